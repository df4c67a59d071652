# Tokenizer tests: byte-level BPE (tokenizer.json), SentencePiece, streaming decode, HF parity.
# The tests reach the private helpers in engine/src (byte_level.h: GPT-2 byte mapping, UTF-8, NFC).
set(_cosmos_engine_src ${PROJECT_SOURCE_DIR}/engine/src)

cosmos_add_gtest(test_bpe_tokenizer LABEL unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_bpe_tokenizer.cpp
  LIBS PkgConfig::UTF8PROC Threads::Threads)
target_include_directories(test_bpe_tokenizer PRIVATE ${_cosmos_engine_src})

cosmos_add_gtest(test_streaming_decoder LABEL unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_streaming_decoder.cpp)
target_include_directories(test_streaming_decoder PRIVATE ${_cosmos_engine_src})

# The SentencePiece test trains a tiny model itself, so it needs the trainer library too.
find_library(COSMOS_SENTENCEPIECE_TRAIN_LIB NAMES sentencepiece_train
  HINTS ${SENTENCEPIECE_LIBRARY_DIRS} REQUIRED)
cosmos_add_gtest(test_sentencepiece LABEL unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_sentencepiece.cpp
  LIBS ${COSMOS_SENTENCEPIECE_TRAIN_LIB} PkgConfig::SENTENCEPIECE)

cosmos_add_gtest(test_tokenizer_parity LABEL unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_parity.cpp)
target_include_directories(test_tokenizer_parity PRIVATE ${_cosmos_engine_src})
