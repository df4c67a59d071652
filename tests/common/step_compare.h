// Two backends fed the same tokens: a 150-token prompt, then 11 one-token decode steps, each in a
// new sequence of its backend; the largest |a - b| over every step's logits and the largest |b|.
// A failed forward pass is a test failure (and stops the comparison).
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/backend.h"

namespace cosmos::testing {

struct StepDiff {
  float worst = 0;  // largest |a - b|
  float scale = 0;  // largest |b|
};

inline StepDiff prefill_then_decode_diff(Backend& a, Backend& b) {
  std::vector<TokenId> ids;
  for (int i = 0; i < 150; ++i) ids.push_back(1000 + 17 * i);
  SequenceInput as, bs;
  as.seq = a.kv_cache().create_sequence();
  bs.seq = b.kv_cache().create_sequence();
  StepDiff d;
  for (int step = 0; step < 12; ++step) {
    as.tokens = bs.tokens = step == 0 ? ids : std::vector<TokenId>{static_cast<TokenId>(500 + 31 * step)};
    ForwardOutput ao, bo;
    const bool ran = a.forward(std::span<const SequenceInput>(&as, 1), ao).ok() &&
                     b.forward(std::span<const SequenceInput>(&bs, 1), bo).ok();
    EXPECT_TRUE(ran) << "step " << step;
    EXPECT_EQ(ao.logits.size(), bo.logits.size()) << "step " << step;
    if (!ran || ao.logits.size() != bo.logits.size()) break;
    for (std::size_t v = 0; v < bo.logits.size(); ++v) {
      d.worst = std::max(d.worst, std::fabs(ao.logits[v] - bo.logits[v]));
      d.scale = std::max(d.scale, std::fabs(bo.logits[v]));
    }
  }
  a.kv_cache().free_sequence(as.seq);
  b.kv_cache().free_sequence(bs.seq);
  return d;
}

}  // namespace cosmos::testing
