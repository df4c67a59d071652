# QML component tests (label ui), Qt Quick Test: included from app/chat/CMakeLists.txt after the
# CosmosChat module is defined. The runner links the module's static plugin (cosmos_chat_qmlplugin:
# the app's compiled QML, its qmldir and the icons under qrc:/), like the app.
find_package(Qt6 6.4 QUIET COMPONENTS QuickTest)
if(NOT Qt6QuickTest_FOUND)
  message(STATUS "Qt6QuickTest not found: the QML component tests are not built")
  return()
endif()
qt_add_executable(test_qml_components ${CMAKE_CURRENT_LIST_DIR}/qml_test_main.cpp)
target_link_libraries(test_qml_components PRIVATE cosmos_chat_qmlplugin Qt6::QuickTest Qt6::Quick Qt6::Qml)
target_compile_definitions(test_qml_components PRIVATE QUICK_TEST_SOURCE_DIR="${CMAKE_CURRENT_LIST_DIR}")
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/qml_test_main.cpp PROPERTIES COMPILE_OPTIONS
  "-Wall;-Wextra;-Wpedantic;-Wshadow;$<$<BOOL:${COSMOS_WERROR}>:-Werror>")
# Registered at the end of the top-level directory, after its enable_testing() (see e2e.cmake).
function(cosmos_register_qml_tests)
  add_test(NAME test_qml_components COMMAND test_qml_components)
  set_tests_properties(test_qml_components PROPERTIES LABELS ui TIMEOUT 120
    ENVIRONMENT "QT_QPA_PLATFORM=offscreen;QT_QUICK_CONTROLS_STYLE=Fusion")
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL cosmos_register_qml_tests)
