# Checkpoint reading: safetensors parsing/writing, mapped files, sharded checkpoints and validation.
cosmos_add_gtest(test_safetensors LABEL unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_safetensors.cpp)
cosmos_add_gtest(test_checkpoint LABEL unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_checkpoint.cpp)
