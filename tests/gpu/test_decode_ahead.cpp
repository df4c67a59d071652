// The CUDA backend's decode step run ahead (engine/src/cuda/cuda_decode_ahead.cpp): after a
// one-token step that samples on the device, the next step is submitted before the caller asks for
// it. Every case runs the same calls on a backend with it (the default) and one without it
// (COSMOS_DECODE_AHEAD=0) and asserts equal results: sampled ids, logits, cache lengths and free
// blocks. Reference math (fp32, no atomics in the order of sums), so both runs are bit-identical.
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/cuda_backend.h"
#include "cosmos/model_loader.h"
#include "cosmos/session.h"
#include "kernels/device_info.cuh"
#include "tiny_model.h"

namespace cosmos {
namespace {

class DecodeAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
    ahead_ = make(true);
    plain_ = make(false);
    ASSERT_TRUE(ahead_ && plain_);
  }
  // The switch is read when the backend loads.
  static std::unique_ptr<Backend> make(bool ahead) {
    if (ahead)
      unsetenv("COSMOS_DECODE_AHEAD");
    else
      setenv("COSMOS_DECODE_AHEAD", "0", 1);
    BackendOptions o;
    o.context_tokens = 512;
    o.reference_math = true;
    auto b = create_cuda_backend(testing::tiny_model_dir(), o);
    unsetenv("COSMOS_DECODE_AHEAD");
    EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
    return b.ok() ? std::move(*b) : nullptr;
  }
  // One call on both backends; the results must be equal. Returns the ahead backend's output.
  ForwardOutput both(const std::vector<SequenceInput>& batch_ahead, std::vector<SequenceInput> batch_plain) {
    ForwardOutput a, p;
    EXPECT_TRUE(ahead_->forward(batch_ahead, a).ok());
    EXPECT_TRUE(plain_->forward(batch_plain, p).ok());
    EXPECT_FALSE(p.ran_ahead);
    EXPECT_EQ(a.sampled, p.sampled);
    EXPECT_EQ(a.logits, p.logits);
    EXPECT_EQ(ahead_->kv_cache().free_blocks() + (a.sampled.empty() ? 0 : held_), plain_->kv_cache().free_blocks());
    return a;
  }
  static SequenceInput step(SeqId seq, std::vector<TokenId> ids, const SamplingParams* sp, std::uint64_t n = 0,
                            std::span<const TokenId> history = {}) {
    SequenceInput in;
    in.seq = seq;
    in.tokens = std::move(ids);
    in.sampling = sp;
    in.sample_step = n;
    in.history = history;
    return in;
  }
  std::unique_ptr<Backend> ahead_, plain_;
  int held_ = 0;  // blocks the ahead backend's pending step holds beyond the other's (see below)
};

// A prompt, then 40 steps feeding back the sampled id: every step after the first was run ahead,
// and the ids equal one step at a time: greedy and seeded sampling with top-k / top-p, each
// without and with a repetition penalty (its history: the prompt and the ids so far, as Session
// passes it; the step run ahead extends it on the device).
TEST_F(DecodeAheadTest, FedBackIdsEqualOneStepAtATime) {
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplingParams drawn;
  drawn.temperature = 0.9f;
  drawn.top_k = 40;
  drawn.top_p = 0.95f;
  drawn.seed = 11;
  SamplingParams greedy_penalty = greedy, drawn_penalty = drawn;
  greedy_penalty.repetition_penalty = drawn_penalty.repetition_penalty = 1.3f;
  for (const SamplingParams* sp : {&greedy, &drawn, &greedy_penalty, &drawn_penalty}) {
    const SeqId sa = ahead_->kv_cache().create_sequence(), sq = plain_->kv_cache().create_sequence();
    const std::vector<TokenId> prompt = {9707, 1879, 0, 5, 151644, 100, 42};  // 7 tokens: step 9 opens block 2
    std::vector<TokenId> history = prompt;
    ForwardOutput out = both({step(sa, prompt, sp, 0, history)}, {step(sq, prompt, sp, 0, history)});
    ASSERT_EQ(out.sampled.size(), 1u);
    EXPECT_FALSE(out.ran_ahead);
    int ran_ahead = 0;
    for (int i = 1; i <= 40; ++i) {
      const TokenId id = out.sampled[0];
      history.push_back(id);
      // After this call the ahead backend has the next step pending; when its token opens a new
      // block (length a multiple of 16), that block is reserved there already.
      held_ = (ahead_->kv_cache().length(sa) + 1) % 16 == 0 ? 1 : 0;
      out = both({step(sa, {id}, sp, i, history)}, {step(sq, {id}, sp, i, history)});
      ran_ahead += out.ran_ahead ? 1 : 0;
      EXPECT_EQ(ahead_->kv_cache().length(sa), plain_->kv_cache().length(sq));
    }
    EXPECT_EQ(ran_ahead, 39) << "the first step after the prompt is submitted when asked; the rest run ahead";
    held_ = 0;
    ahead_->kv_cache().free_sequence(sa);
    plain_->kv_cache().free_sequence(sq);
  }
}

// The caller asks for something other than the step run ahead: another token, another draw
// counter, other parameters, logits, another sequence. Each is computed fresh and equals the
// backend without steps run ahead, and the pending step's cache reservation is given back.
TEST_F(DecodeAheadTest, OtherRequestsAreComputedFresh) {
  SamplingParams drawn;
  drawn.temperature = 0.7f;
  drawn.seed = 5;
  SamplingParams other = drawn;
  other.seed = 6;
  const SeqId sa = ahead_->kv_cache().create_sequence(), sq = plain_->kv_cache().create_sequence();
  const std::vector<TokenId> prompt = {9707, 1879, 0, 5, 151644, 100, 42, 7, 8, 9, 10, 11, 12, 13};  // 14
  ForwardOutput out = both({step(sa, prompt, &drawn)}, {step(sq, prompt, &drawn)});
  out = both({step(sa, {out.sampled[0]}, &drawn, 1)}, {step(sq, {out.sampled[0]}, &drawn, 1)});
  // Length 15; the pending step's token is at 15 (block 0). A different token; after it the length
  // is 16 and the new pending step's token opens block 1, which a changed draw counter gives back.
  const TokenId wrong = out.sampled[0] == 77 ? 78 : 77;
  held_ = 1;
  out = both({step(sa, {wrong}, &drawn, 2)}, {step(sq, {wrong}, &drawn, 2)});
  EXPECT_FALSE(out.ran_ahead);
  EXPECT_EQ(ahead_->kv_cache().free_blocks() + 1, plain_->kv_cache().free_blocks());
  held_ = 0;
  out = both({step(sa, {out.sampled[0]}, &drawn, 9)}, {step(sq, {out.sampled[0]}, &drawn, 9)});
  EXPECT_FALSE(out.ran_ahead);
  // Other parameters.
  out = both({step(sa, {out.sampled[0]}, &other, 10)}, {step(sq, {out.sampled[0]}, &other, 10)});
  EXPECT_FALSE(out.ran_ahead);
  // With a penalty: the fed-back id and the history the step run ahead assumed, then a history
  // that differs from it.
  SamplingParams penalty = other;
  penalty.repetition_penalty = 1.2f;
  std::vector<TokenId> history = {1, 2, 3};
  out = both({step(sa, {out.sampled[0]}, &penalty, 11, history)}, {step(sq, {out.sampled[0]}, &penalty, 11, history)});
  history.push_back(out.sampled[0]);
  out = both({step(sa, {out.sampled[0]}, &penalty, 12, history)}, {step(sq, {out.sampled[0]}, &penalty, 12, history)});
  EXPECT_TRUE(out.ran_ahead);
  history.push_back(out.sampled[0]);
  history[0] = 4;
  out = both({step(sa, {out.sampled[0]}, &penalty, 13, history)}, {step(sq, {out.sampled[0]}, &penalty, 13, history)});
  EXPECT_FALSE(out.ran_ahead);
  // Logits instead of a sample.
  out = both({step(sa, {out.sampled[0]}, nullptr)}, {step(sq, {out.sampled[0]}, nullptr)});
  EXPECT_FALSE(out.ran_ahead);
  EXPECT_EQ(out.logits.size(), 152064u);
  // A step, then another sequence's prompt while it runs ahead; then the first sequence again.
  out = both({step(sa, {5}, &drawn, 11)}, {step(sq, {5}, &drawn, 11)});
  const SeqId sa2 = ahead_->kv_cache().create_sequence(), sq2 = plain_->kv_cache().create_sequence();
  out = both({step(sa2, prompt, nullptr)}, {step(sq2, prompt, nullptr)});
  out = both({step(sa, {6}, &drawn, 12)}, {step(sq, {6}, &drawn, 12)});
  EXPECT_EQ(ahead_->kv_cache().length(sa), plain_->kv_cache().length(sq));
  EXPECT_EQ(ahead_->kv_cache().length(sa2), plain_->kv_cache().length(sq2));
}

// The caller frees or truncates the sequence while its next step runs ahead; a new sequence that
// gets its blocks computes what it would have without the pending step.
TEST_F(DecodeAheadTest, FreeingOrTruncatingTheSequenceMeanwhile) {
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<TokenId> prompt = {9707, 1879, 0, 5, 151644, 100, 42, 7, 8, 9, 10, 11, 12, 13, 14};  // 15
  SeqId sa = ahead_->kv_cache().create_sequence(), sq = plain_->kv_cache().create_sequence();
  ForwardOutput out = both({step(sa, prompt, &greedy)}, {step(sq, prompt, &greedy)});
  held_ = 1;  // length 16: the pending step's token opens block 1
  out = both({step(sa, {out.sampled[0]}, &greedy)}, {step(sq, {out.sampled[0]}, &greedy)});
  held_ = 0;
  ahead_->kv_cache().free_sequence(sa);
  plain_->kv_cache().free_sequence(sq);
  EXPECT_EQ(ahead_->kv_cache().free_blocks(), plain_->kv_cache().free_blocks());
  sa = ahead_->kv_cache().create_sequence();
  sq = plain_->kv_cache().create_sequence();
  std::vector<TokenId> longer = prompt;
  longer.insert(longer.end(), prompt.begin(), prompt.end());  // 30 tokens: blocks 0 and 1
  SequenceInput a = step(sa, longer, nullptr), p = step(sq, longer, nullptr);
  a.all_logits = p.all_logits = true;
  out = both({a}, {p});
  // Truncation while a step runs ahead, then a prompt that continues from the kept tokens.
  out = both({step(sa, {3}, &greedy)}, {step(sq, {3}, &greedy)});  // length 31
  held_ = 1;  // length 32: the pending step's token opens block 2
  out = both({step(sa, {out.sampled[0]}, &greedy)}, {step(sq, {out.sampled[0]}, &greedy)});
  EXPECT_TRUE(out.ran_ahead);
  held_ = 0;
  // A truncation to the same length gives back the block reserved for the pending step; asking
  // for exactly that step then computes it afresh (into a block reserved again).
  ahead_->kv_cache().truncate(sa, 32);
  plain_->kv_cache().truncate(sq, 32);
  EXPECT_EQ(ahead_->kv_cache().free_blocks(), plain_->kv_cache().free_blocks());
  out = both({step(sa, {out.sampled[0]}, &greedy)}, {step(sq, {out.sampled[0]}, &greedy)});
  EXPECT_FALSE(out.ran_ahead);
  ahead_->kv_cache().truncate(sa, 20);
  plain_->kv_cache().truncate(sq, 20);
  a = step(sa, {1, 2, 3}, nullptr);
  p = step(sq, {1, 2, 3}, nullptr);
  a.all_logits = p.all_logits = true;
  out = both({a}, {p});
  EXPECT_EQ(out.logits.size(), 3u * 152064u);
}

// Explicit M-RoPE positions: the step run ahead assumes the next text position (each component
// + 1); a caller that asks for other positions gets them computed fresh.
TEST_F(DecodeAheadTest, ExplicitPositions) {
  SamplingParams greedy;
  greedy.temperature = 0;
  const SeqId sa = ahead_->kv_cache().create_sequence(), sq = plain_->kv_cache().create_sequence();
  const std::vector<TokenId> prompt = {9707, 1879, 0, 5};
  SequenceInput a = step(sa, prompt, &greedy), p = step(sq, prompt, &greedy);
  a.positions = p.positions = {{0, 0, 0}, {1, 1, 1}, {2, 5, 7}, {9, 9, 9}};
  ForwardOutput out = both({a}, {p});
  int ran_ahead = 0;
  for (int i = 0; i < 6; ++i) {
    const std::int32_t at = 10 + i + (i >= 3 ? 4 : 0);  // a jump of 4 after three steps
    a = step(sa, {out.sampled[0]}, &greedy);
    p = step(sq, {out.sampled[0]}, &greedy);
    a.positions = p.positions = {{at, at, at}};
    out = both({a}, {p});
    ran_ahead += out.ran_ahead ? 1 : 0;
  }
  EXPECT_EQ(ran_ahead, 4);  // not the first step, not the jump
}

// Session::generate twice on one session (the second reuses the first's prefix and truncates the
// cache while a step runs ahead): equal replies, with the app's repetition penalty (1.05).
TEST_F(DecodeAheadTest, SessionRepliesAreEqual) {
  auto tok_a = load_model(testing::tiny_model_dir(), Device::cpu, BackendOptions{});
  ASSERT_TRUE(tok_a.ok()) << tok_a.error().message;
  Session a(*ahead_, *tok_a->tokenizer), p(*plain_, *tok_a->tokenizer);
  GenerateOptions o;
  o.sampling.temperature = 0.8f;
  o.sampling.top_p = 0.9f;
  o.sampling.seed = 3;
  o.sampling.repetition_penalty = 1.05f;
  o.max_new_tokens = 24;
  o.stop_tokens = {-1};
  const std::vector<TokenId> first = {9707, 1879, 0, 5}, second = {9707, 1879, 0, 5, 100, 101};
  for (const auto* prompt : {&first, &second}) {
    auto ra = a.generate(*prompt, o);
    auto rp = p.generate(*prompt, o);
    ASSERT_TRUE(ra.ok() && rp.ok());
    EXPECT_EQ(ra->token_ids, rp->token_ids);
    EXPECT_EQ(ra->token_ids.size(), 24u);
  }
}

}  // namespace
}  // namespace cosmos
