# Streaming reasoning parser (<think>/<answer> channels).
cosmos_add_gtest(test_reasoning_parser LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_reasoning_parser.cpp)
