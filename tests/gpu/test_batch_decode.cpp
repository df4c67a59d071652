// Batched decode on the CUDA backend (continuous batching): steps that decode one token for each of
// many sequences (the batch-size graphs, the decode attention's splits for large batches) against
// each sequence decoded alone, and the BatchScheduler's greedy replies against a Session's.
//
// Alone, a step runs the one-token kernels (fp32 activations, gemv); in a batch, the tensor-core
// GEMMs (bf16 activations): the logits differ by rounding, so they are compared within a bound, and
// greedy replies are equal up to the first near tie (where the rounding may pick the other token).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/batch_scheduler.h"
#include "cosmos/cuda_backend.h"
#include "cosmos/model_loader.h"
#include "cosmos/session.h"
#include "kernels/device_info.cuh"
#include "logit_compare.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

// Relative L2 error of a batch's logits row against the same sequence alone: bf16 activations in
// the GEMM path against fp32 ones (this size measured ~2-5e-3 on the tiny model's bf16 weights).
constexpr double kRowTolerance = 2e-2;
// Quantized batches of up to 64 sequences multiply the weights with bf16 activations on tensor
// cores (kernels/gemm_q_small.cuh), so int8 / fp8 / int4 rows take kRowTolerance too. Larger fp8
// batches run on fp8 tensor cores with E4M3 activations, against alone's exact activations: a bound
// a few times E4M3's 2^-4 relative step over the square root of the summed terms.
constexpr double kFp8RowTolerance = 1.5e-1;

std::vector<TokenId> prompt_of(int len, int salt) {
  std::vector<TokenId> p(len);
  for (int i = 0; i < len; ++i) p[i] = static_cast<TokenId>((i * 7919 + salt * 104729 + 13) % 150000);
  return p;
}

using testing::rel_l2;

// The greedy token of a logits row.
TokenId argmax(std::span<const float> row) {
  return static_cast<TokenId>(std::max_element(row.begin(), row.end()) - row.begin());
}

// COSMOS_BATCH_TEST_LIGHT=1 (tests/gpu/run.sh --sanitize sets it): the same kernels in far fewer
// launches, for compute-sanitizer, whose racecheck takes over 430 s for one 64-sequence case run in
// full on an H100 (docs/PERFORMANCE.md, session 67). Every sequence's prompt still runs (the
// batch is built from them); 2 batched steps instead of 20 (a graph captured, then replayed at the
// next length), and only sequences 0, S / 2 and S - 1 are also decoded alone and compared.
bool light_mode() {
  const char* v = std::getenv("COSMOS_BATCH_TEST_LIGHT");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// (model, sequences, precision): tiny-hd128 runs the flash prefill and decode attention kernels,
// tiny the reference attention (whose context is capped near 57k tokens: its cases stay below).
// fp8: alone the products dequantize the weights in registers (bf16-exact activations); in a batch
// they run on fp8 tensor cores with E4M3 activations (lm_head too), a coarser rounding.
using Param = std::tuple<bool, int, Precision>;

class BatchDecode : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
  static std::unique_ptr<Backend> make(bool hd128, int context, Precision precision) {
    BackendOptions o;
    o.context_tokens = context;
    o.precision = precision;
    auto b = create_cuda_backend(hd128 ? testing::tiny_hd128_model_dir() : testing::tiny_model_dir(), o);
    EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
    return b.ok() ? std::move(*b) : nullptr;
  }
};

// S sequences with prompts of 1..300 tokens: 20 steps decode all S in one pass (logits back) while
// each also decodes alone; every row matches its sequence alone. The steps cross cache blocks and
// replay the batch size's graph at new lengths. Light mode (light_mode()): 2 steps, 3 sequences compared.
TEST_P(BatchDecode, EachRowMatchesItsSequenceAlone) {
  const auto [hd128, S, precision] = GetParam();
  auto b = make(hd128, 2 * S * 352, precision);
  const double tolerance = precision == Precision::fp8 && S > 16 ? kFp8RowTolerance : kRowTolerance;
  ASSERT_TRUE(b);
  const bool light = light_mode();
  const int steps = light ? 2 : 20;
  // checked[s]: sequence s is also decoded alone and its batch rows compared with it.
  std::vector<bool> checked(S, !light);
  if (light) {
    for (const int s : {0, S / 2, S - 1}) checked[s] = true;
  }
  const int V = b->config().vocab_size;
  std::vector<SeqId> batched(S), alone(S);
  std::vector<TokenId> next(S);
  ForwardOutput out;
  for (int s = 0; s < S; ++s) {
    const auto p = prompt_of(1 + (s * 37) % 300, s);
    for (SeqId* seq : {&batched[s], &alone[s]}) {
      if (seq == &alone[s] && !checked[s]) continue;
      *seq = b->kv_cache().create_sequence();
      SequenceInput in;
      in.seq = *seq;
      in.tokens = p;
      ASSERT_TRUE(b->forward(std::span<const SequenceInput>(&in, 1), out).ok());
    }
    next[s] = argmax(out.row(0));
  }
  double worst = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<SequenceInput> batch(S);
    for (int s = 0; s < S; ++s) {
      batch[s].seq = batched[s];
      batch[s].tokens = {next[s]};
    }
    ForwardOutput many;
    ASSERT_TRUE(b->forward(batch, many).ok());
    ASSERT_EQ(many.logits.size(), static_cast<std::size_t>(S) * V);
    for (int s = 0; s < S; ++s) {
      if (!checked[s]) {  // its next token from its batch row
        next[s] = argmax(many.row(many.first_row[s]));
        continue;
      }
      SequenceInput in;
      in.seq = alone[s];
      in.tokens = {next[s]};
      ASSERT_TRUE(b->forward(std::span<const SequenceInput>(&in, 1), out).ok());
      const double e = rel_l2(many.row(many.first_row[s]), out.row(0));
      worst = std::max(worst, e);
      ASSERT_LT(e, tolerance) << "sequence " << s << " step " << step;
      next[s] = argmax(out.row(0));
    }
  }
  for (int s = 0; s < S; ++s) {
    if (checked[s]) {
      EXPECT_EQ(b->kv_cache().length(batched[s]), b->kv_cache().length(alone[s]));
    }
  }
  std::printf("[ info     ] %s %s, batch %d%s: largest relative L2 error of a row against its sequence alone %.2e\n",
              hd128 ? "tiny-hd128" : "tiny", std::string(to_string(precision)).c_str(), S,
              light ? " (light: 2 steps, 3 sequences compared)" : "", worst);
}

// 5: just past the few-token decode path; 17, 64: the large-batch splits; 200 sequences at once
// (a cache of 140k tokens). Quantized: up to 64 on the small-batch tensor-core product (int4 on the
// tiny model too: 33, a partial token tile in the second pass of 32), fp8 200 on fp8 tensor cores.
INSTANTIATE_TEST_SUITE_P(Sizes, BatchDecode,
                         ::testing::Values(Param{true, 5, Precision::bf16}, Param{true, 17, Precision::bf16},
                                           Param{true, 64, Precision::bf16}, Param{true, 200, Precision::bf16},
                                           Param{false, 5, Precision::bf16}, Param{false, 64, Precision::bf16},
                                           Param{true, 17, Precision::fp8}, Param{true, 64, Precision::fp8},
                                           Param{true, 200, Precision::fp8}, Param{true, 5, Precision::int8},
                                           Param{true, 64, Precision::int8}, Param{true, 17, Precision::int4},
                                           Param{true, 64, Precision::int4}, Param{false, 33, Precision::int4}),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::string(std::get<0>(i.param) ? "hd128_" : "tiny_") +
                                  std::to_string(std::get<1>(i.param)) + "_" +
                                  std::string(to_string(std::get<2>(i.param)));
                         });

// The scheduler on the GPU (device sampling per sequence, prompt chunks sharing steps with
// decodes, requests joining and leaving): each greedy reply equals the request run alone in a
// Session, up to a first difference that is a near tie in the alone run's logits.
TEST(BatchDecodeScheduler, GreedyRepliesEqualRunningAloneUpToNearTies) {
  const auto q = kernels::query_gpus();
  if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  BackendOptions o;
  o.context_tokens = 8192;
  auto loaded = load_model(testing::tiny_hd128_model_dir(), Device::cuda, o);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  Backend& b = *loaded->backend;
  ASSERT_TRUE(b.samples_on_device());
  const Tokenizer& tok = *loaded->tokenizer;
  struct Job {
    std::vector<TokenId> prompt;
    GenerateOptions options;
  };
  std::vector<Job> jobs;
  for (int i = 0; i < 12; ++i) {
    GenerateOptions g;
    g.sampling.temperature = 0;
    g.max_new_tokens = 8 + (i * 13) % 40;
    g.stop_tokens = {-1};  // every request runs its full length
    jobs.push_back({prompt_of(1 + (i * 53) % 200, i), g});
  }
  std::vector<GenerationResult> want;
  for (const Job& j : jobs) {
    Session s(b, tok);
    auto r = s.generate(j.prompt, j.options);
    ASSERT_TRUE(r.ok()) << r.error().message;
    want.push_back(*r);
  }
  BatchSchedulerOptions so;
  so.max_batch = 6;
  so.step_tokens = 128;
  BatchScheduler sched(b, tok, so);
  for (const Job& j : jobs) sched.submit(j.prompt, j.options);
  ASSERT_TRUE(sched.run().ok());
  int equal = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& r = sched.result(static_cast<int>(i));
    ASSERT_TRUE(r.ok()) << r.error().message;
    const auto& got = r->token_ids;
    const auto& exp = want[i].token_ids;
    ASSERT_EQ(got.size(), exp.size()) << "request " << i;
    const std::size_t k = std::mismatch(got.begin(), got.end(), exp.begin()).first - got.begin();
    if (k == got.size()) {
      ++equal;
      continue;
    }
    // The alone run's logits where they parted: the two tokens must be within the rounding of
    // the two paths (a few times the rows' tolerance, in units of the row's RMS).
    const SeqId seq = b.kv_cache().create_sequence();
    SequenceInput in;
    in.seq = seq;
    in.tokens = jobs[i].prompt;
    in.tokens.insert(in.tokens.end(), exp.begin(), exp.begin() + static_cast<std::ptrdiff_t>(k));
    ForwardOutput out;
    ASSERT_TRUE(b.forward(std::span<const SequenceInput>(&in, 1), out).ok());
    b.kv_cache().free_sequence(seq);
    const auto row = out.row(0);
    double rms = 0;
    for (float v : row) rms += static_cast<double>(v) * v;
    rms = std::sqrt(rms / row.size());
    const double margin = row[exp[k]] - row[got[k]];
    std::printf("[ info     ] request %zu parted at token %zu of %zu: margin %.4f (row RMS %.3f)\n", i, k, got.size(),
                margin, rms);
    EXPECT_LE(margin, 4 * kRowTolerance * rms) << "request " << i << " parted at token " << k << " without a near tie";
  }
  std::printf("[ info     ] %d of %zu greedy replies equal to running alone\n", equal, jobs.size());
  EXPECT_GE(equal, static_cast<int>(jobs.size()) / 2);
  EXPECT_EQ(b.kv_cache().free_blocks(), b.kv_cache().shape().n_blocks);
}

}  // namespace
}  // namespace cosmos
