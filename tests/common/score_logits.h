// One forward pass over `ids` in a fresh sequence of the backend's cache (freed afterwards): the
// logits of every position (all_logits) or of the last one. A failure is a test failure.
#pragma once

#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/backend.h"

namespace cosmos::testing {

inline ForwardOutput score_logits(Backend& b, const std::vector<TokenId>& ids, bool all_logits = true) {
  SequenceInput in;
  in.seq = b.kv_cache().create_sequence();
  in.tokens = ids;
  in.all_logits = all_logits;
  ForwardOutput out;
  auto st = b.forward(std::span<const SequenceInput>(&in, 1), out);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  b.kv_cache().free_sequence(in.seq);
  return out;
}

}  // namespace cosmos::testing
