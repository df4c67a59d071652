# The end-to-end test of cosmos-chat (label ui): included from app/chat/CMakeLists.txt. It needs
# Xvfb, xdotool and ImageMagick (packaging/setup.sh installs them) and the test tokenizer; without
# them it reports skipped (exit code 77).
add_test(NAME e2e_cosmos_chat
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_e2e.sh
          $<TARGET_FILE:cosmos-chat> $<TARGET_FILE:cosmos-cli> ${CMAKE_BINARY_DIR}/e2e)
set_tests_properties(e2e_cosmos_chat PROPERTIES
  LABELS ui
  TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "COSMOS_TEST_TOKENIZER=${COSMOS_TEST_TOKENIZER}")
