// The tiny model's first golden prompt and its greedy continuation in bf16 (the sequence the
// quantized formats are scored on by teacher forcing: tests/unit/test_cpu_quant.cpp).
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cosmos/model_loader.h"
#include "cosmos/session.h"
#include "tiny_model.h"

namespace cosmos::testing {

inline std::vector<TokenId> tiny_prompt_ids() {
  std::ifstream f(std::string(COSMOS_TEST_DATA_DIR) + "/tiny_golden.json");
  return nlohmann::json::parse(f)["cases"][0]["ids"].get<std::vector<TokenId>>();
}

// The prompt plus `steps` greedy tokens of the bf16 CPU model in `dir` (the last one is not
// scored, so it is left off: steps positions predict a token of the sequence).
inline std::vector<TokenId> tiny_greedy_sequence(const std::filesystem::path& dir, int steps) {
  auto model = load_model(dir, Device::cpu, BackendOptions{});
  EXPECT_TRUE(model.ok());
  if (!model.ok()) return {};
  Session session(*model->backend, *model->tokenizer);
  GenerateOptions o;
  o.sampling.temperature = 0.0f;
  o.max_new_tokens = steps;
  o.stop_tokens = {-1};  // no early stop
  std::vector<TokenId> ids = tiny_prompt_ids();
  auto r = session.generate(ids, o);
  EXPECT_TRUE(r.ok());
  if (r.ok()) ids.insert(ids.end(), r->token_ids.begin(), r->token_ids.end() - 1);
  return ids;
}

}  // namespace cosmos::testing
