// Paged KV-cache bookkeeping: blocks are shared by sequences, freed on truncate, and a full pool
// is an error that changes nothing.
#include <algorithm>
#include <vector>

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

// fork_sequence: whole blocks shared by reference; a block returns to the pool with its last
// reader; truncate never keeps part of a shared block (a sequence would write into it again).
TEST(KvCache, ForkedSequencesShareWholeBlocksUntilTheLastReaderLeaves) {
  KvCache c(shape(8));
  const SeqId a = c.create_sequence();
  ASSERT_TRUE(c.reserve(a, 40).ok());  // 3 blocks
  c.set_length(a, 40);
  const SeqId b = c.fork_sequence(a, 2);
  EXPECT_EQ(c.length(b), 32);
  ASSERT_EQ(c.block_table(b).size(), 2u);
  EXPECT_EQ(c.block_table(b)[0], c.block_table(a)[0]);
  EXPECT_EQ(c.block_table(b)[1], c.block_table(a)[1]);
  EXPECT_EQ(c.free_blocks(), 5);  // nothing new taken
  ASSERT_TRUE(c.reserve(b, 33).ok());  // b grows into a block of its own
  c.set_length(b, 33);
  EXPECT_NE(c.block_table(b)[2], c.block_table(a)[2]);
  EXPECT_EQ(c.free_blocks(), 4);
  // Cutting a inside a shared block keeps only the whole blocks before it.
  EXPECT_EQ(c.truncate(a, 20), 16);
  EXPECT_EQ(c.length(a), 16);
  EXPECT_EQ(c.block_table(a).size(), 1u);
  EXPECT_EQ(c.free_blocks(), 5);  // a's third block; the second is still b's
  // Cutting b inside its own block keeps the part asked for.
  EXPECT_EQ(c.truncate(b, 40), 33);
  c.free_sequence(a);
  EXPECT_EQ(c.free_blocks(), 5);  // block 0 is still b's
  EXPECT_EQ(c.truncate(b, 10), 10);  // b alone holds block 0 now: a partial block is kept
  EXPECT_EQ(c.free_blocks(), 7);
  c.free_sequence(b);
  EXPECT_EQ(c.free_blocks(), 8);
  // Every block once in the pool: taking all 8 again gives 8 different blocks.
  const SeqId d = c.create_sequence();
  ASSERT_TRUE(c.reserve(d, 128).ok());
  std::vector<int> t(c.block_table(d).begin(), c.block_table(d).end());
  std::sort(t.begin(), t.end());
  EXPECT_EQ(std::adjacent_find(t.begin(), t.end()), t.end());
}

}  // namespace
}  // namespace cosmos
