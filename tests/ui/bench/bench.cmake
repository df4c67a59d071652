# bench_ui_stream (label-free, NOT a ctest test: run it by hand, see bench_ui_stream.cpp): the real
# app QML (the CosmosChat static plugin) and view-models with the scripted fake engine streaming
# ~1,000 pieces/s; reports GUI-thread frame times and CPU use. Included from app/chat/CMakeLists.txt.
qt_add_executable(bench_ui_stream ${CMAKE_CURRENT_LIST_DIR}/bench_ui_stream.cpp)
target_link_libraries(bench_ui_stream PRIVATE cosmos_chat_qmlplugin cosmos_ui Qt6::Quick Qt6::QuickControls2)
target_include_directories(bench_ui_stream PRIVATE ${PROJECT_SOURCE_DIR}/tests/ui)
cosmos_warnings(bench_ui_stream)
