// Paged KV-cache bookkeeping: blocks are shared by sequences, freed on truncate, and a full pool
// is an error that changes nothing.
#include <gtest/gtest.h>

#include "cosmos/kv_cache.h"

namespace cosmos {
namespace {

KvCacheShape shape(int blocks) {
  KvCacheShape s;
  s.n_layers = 2;
  s.n_kv_heads = 2;
  s.head_dim = 16;
  s.block_size = 16;
  s.n_blocks = blocks;
  return s;
}

TEST(KvCache, AllocatesBlocksAsSequencesGrow) {
  KvCache c(shape(8));
  const SeqId a = c.create_sequence(), b = c.create_sequence();
  ASSERT_TRUE(c.reserve(a, 17).ok());  // 2 blocks
  c.set_length(a, 17);
  ASSERT_TRUE(c.reserve(b, 16).ok());  // 1 block
  c.set_length(b, 16);
  EXPECT_EQ(c.block_table(a).size(), 2u);
  EXPECT_EQ(c.block_table(b).size(), 1u);
  EXPECT_EQ(c.free_blocks(), 5);
  // No block is owned twice.
  EXPECT_NE(c.block_table(a)[0], c.block_table(b)[0]);
  EXPECT_NE(c.block_table(a)[1], c.block_table(b)[0]);
  c.truncate(a, 16);
  EXPECT_EQ(c.length(a), 16);
  EXPECT_EQ(c.block_table(a).size(), 1u);
  EXPECT_EQ(c.free_blocks(), 6);
  c.free_sequence(b);
  EXPECT_FALSE(c.valid(b));
  EXPECT_EQ(c.free_blocks(), 7);
  EXPECT_EQ(c.create_sequence(), b);  // slot reused
}

TEST(KvCache, FullPoolIsAnErrorThatChangesNothing) {
  KvCache c(shape(2));
  const SeqId a = c.create_sequence();
  ASSERT_TRUE(c.reserve(a, 20).ok());
  c.set_length(a, 20);
  auto st = c.reserve(a, 33);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "kv_cache.full");
  EXPECT_EQ(st.error().category, ErrorCategory::out_of_memory);
  EXPECT_EQ(c.block_table(a).size(), 2u);
  EXPECT_EQ(c.length(a), 20);
  EXPECT_EQ(shape(2).tokens(), 32);
}

}  // namespace
}  // namespace cosmos
