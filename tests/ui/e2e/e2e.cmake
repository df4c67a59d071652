# The end-to-end tests of cosmos-chat (labels ui and e2e): included from app/chat/CMakeLists.txt.
# Each starts the real app under its own Xvfb (a free display, found with -displayfd) with
# temporary XDG folders and drives it with xdotool:
#   e2e_cosmos_chat     (run_e2e.sh)            a question typed, the reply saved, a screenshot
#   e2e_kill_streaming  (e2e_kill_streaming.sh) kill -9 mid-reply: the reply saved up to the last
#                                               second, the database intact, the app restarts
#   e2e_corrupt_db      (e2e_corrupt_db.sh)     garbage / a truncated database: moved aside, a
#                                               fresh one, the user told
# They need Xvfb, xdotool, ImageMagick and sqlite3 (packaging/setup.sh installs them) and the test
# tokenizer; without them they report skipped (exit code 77). Screenshots and, on a failure, the
# app's log go to build/<preset>/e2e/.
#
# The top-level CMakeLists.txt calls enable_testing() after add_subdirectory(app), so a test added
# here would be dropped: the registration is deferred to the end of the top-level directory.
set_property(GLOBAL PROPERTY COSMOS_E2E_DIR ${CMAKE_CURRENT_LIST_DIR})
function(cosmos_register_e2e_test)
  get_property(dir GLOBAL PROPERTY COSMOS_E2E_DIR)
  set(args $<TARGET_FILE:cosmos-chat> $<TARGET_FILE:cosmos-cli> ${CMAKE_BINARY_DIR}/e2e)
  add_test(NAME e2e_cosmos_chat COMMAND ${dir}/run_e2e.sh ${args})
  add_test(NAME e2e_kill_streaming COMMAND ${dir}/e2e_kill_streaming.sh ${args})
  add_test(NAME e2e_corrupt_db COMMAND ${dir}/e2e_corrupt_db.sh ${args})
  set_tests_properties(e2e_cosmos_chat PROPERTIES TIMEOUT 300)
  set_tests_properties(e2e_kill_streaming e2e_corrupt_db PROPERTIES TIMEOUT 120)
  set_tests_properties(e2e_cosmos_chat e2e_kill_streaming e2e_corrupt_db PROPERTIES
    LABELS "ui;e2e"
    SKIP_RETURN_CODE 77
    # One app at a time: the kill test measures how old the last save is, on two cores.
    RESOURCE_LOCK cosmos_e2e_app
    ENVIRONMENT "COSMOS_TEST_TOKENIZER=${COSMOS_TEST_TOKENIZER}")
  # Under AddressSanitizer (the asan preset) the real app's exit leaves allocations of libraries
  # it unloaded (the X / GL drivers), which LeakSanitizer cannot attribute or suppress by name:
  # these runs check memory errors, not leaks (the unit and UI tests check leaks).
  if(CMAKE_CXX_FLAGS MATCHES "fsanitize=[a-z,]*address")
    set_property(TEST e2e_cosmos_chat e2e_kill_streaming e2e_corrupt_db APPEND PROPERTY ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL cosmos_register_e2e_test)
