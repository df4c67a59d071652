# The end-to-end test of cosmos-chat (label ui): included from app/chat/CMakeLists.txt. It needs
# Xvfb, xdotool, ImageMagick and sqlite3 (packaging/setup.sh installs them) and the test
# tokenizer; without them it reports skipped (exit code 77).
#
# The top-level CMakeLists.txt calls enable_testing() after add_subdirectory(app), so a test added
# here would be dropped: the registration is deferred to the end of the top-level directory.
set_property(GLOBAL PROPERTY COSMOS_E2E_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/run_e2e.sh)
function(cosmos_register_e2e_test)
  get_property(script GLOBAL PROPERTY COSMOS_E2E_SCRIPT)
  add_test(NAME e2e_cosmos_chat
    COMMAND ${script} $<TARGET_FILE:cosmos-chat> $<TARGET_FILE:cosmos-cli> ${CMAKE_BINARY_DIR}/e2e)
  set_tests_properties(e2e_cosmos_chat PROPERTIES
    LABELS ui
    TIMEOUT 300
    SKIP_RETURN_CODE 77
    ENVIRONMENT "COSMOS_TEST_TOKENIZER=${COSMOS_TEST_TOKENIZER}")
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL cosmos_register_e2e_test)
