// The tiny test model (seed 1, the same bytes tests/golden/make_golden.py ran through Hugging Face),
// written once per test process into a temporary folder.
#pragma once

#include <filesystem>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "cosmos/test_model.h"

namespace cosmos::testing {

inline const std::filesystem::path& tiny_model_dir() {
  static const std::filesystem::path dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("cosmos_tiny_" + std::to_string(::getpid()));
    TestModelOptions o;
    o.preset = "tiny";
    o.seed = 1;
    o.shards = 2;
    o.tokenizer_json = COSMOS_TEST_TOKENIZER;
    o.out_dir = d;
    auto st = make_test_model(o);
    if (!st) ADD_FAILURE() << st.error().message << " (run packaging/setup.sh for the test tokenizer)";
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("cosmos_tiny_" + std::to_string(::getpid())), ec);
    });
    return d;
  }();
  return dir;
}

}  // namespace cosmos::testing
