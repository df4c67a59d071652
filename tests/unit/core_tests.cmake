# Core engine tests: config, tensor list, memory estimates, chat format, test models, the CLI.
cosmos_add_gtest(test_model_config LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_model_config.cpp)
cosmos_add_gtest(test_memory_estimate LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_memory_estimate.cpp)
cosmos_add_gtest(test_chat_format LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_chat_format.cpp)
cosmos_add_gtest(test_test_model LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_test_model.cpp)
cosmos_add_gtest(test_cli LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.cpp)
add_dependencies(test_cli cosmos-cli)
