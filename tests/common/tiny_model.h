// The tiny test model (seed 1, the same bytes tests/golden/make_golden.py ran through Hugging Face),
// written once per test process into a temporary folder.
#pragma once

#include <filesystem>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "cosmos/test_model.h"

namespace cosmos::testing {

// The model of a test preset ("tiny", "tiny-hd128"), seed 1, written once per test process.
inline std::filesystem::path write_preset_model(const std::string& preset, const std::string& dir_name) {
  const auto d = std::filesystem::temp_directory_path() / (dir_name + "_" + std::to_string(::getpid()));
  TestModelOptions o;
  o.preset = preset;
  o.seed = 1;
  o.shards = 2;
  o.tokenizer_json = COSMOS_TEST_TOKENIZER;
  o.out_dir = d;
  auto st = make_test_model(o);
  if (!st) ADD_FAILURE() << st.error().message << " (run packaging/setup.sh for the test tokenizer)";
  return d;
}

inline const std::filesystem::path& tiny_model_dir() {
  static const std::filesystem::path dir = [] {
    auto d = write_preset_model("tiny", "cosmos_tiny");
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("cosmos_tiny_" + std::to_string(::getpid())), ec);
    });
    return d;
  }();
  return dir;
}

// tiny's layers with the 7B's attention shape (head_dim 128, grouped queries): the GPU's flash
// prefill and decode attention kernels serve it (tiny takes the reference attention).
inline const std::filesystem::path& tiny_hd128_model_dir() {
  static const std::filesystem::path dir = [] {
    auto d = write_preset_model("tiny-hd128", "cosmos_tiny_hd128");
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(
          std::filesystem::temp_directory_path() / ("cosmos_tiny_hd128_" + std::to_string(::getpid())), ec);
    });
    return d;
  }();
  return dir;
}

}  // namespace cosmos::testing
