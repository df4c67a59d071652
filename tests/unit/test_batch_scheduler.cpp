// BatchScheduler (continuous batching) on the CPU backend with the tiny model: each request's tokens
// equal those of running it alone in a Session (greedy, and seeded sampling with a penalty), with
// rows of several lengths joining and leaving, prompt chunks sharing steps with decodes, requests
// waiting for KV blocks and being preempted and restarted; a prompt that cannot fit is refused on
// its own while the others run.
#include <gtest/gtest.h>

#include "cosmos/batch_scheduler.h"
#include "cosmos/model_loader.h"
#include "cosmos/session.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

LoadedModel load(int context) {
  BackendOptions o;
  o.context_tokens = context;
  auto m = load_model(testing::tiny_model_dir(), Device::cpu, o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return std::move(*m);
}

GenerateOptions options(int n, float temperature, std::uint64_t seed) {
  GenerateOptions o;
  o.sampling.temperature = temperature;
  o.sampling.top_p = 0.9f;
  o.sampling.repetition_penalty = temperature > 0 ? 1.1f : 1.0f;
  o.sampling.seed = seed;
  o.max_new_tokens = n;
  o.stop_tokens = {-1};  // no stop token: every request runs its full length
  return o;
}

std::vector<TokenId> prompt_of(int len, int salt) {
  std::vector<TokenId> p(len);
  for (int i = 0; i < len; ++i) p[i] = static_cast<TokenId>((i * 7919 + salt * 104729 + 13) % 150000);
  return p;
}

struct Job {
  std::vector<TokenId> prompt;
  GenerateOptions options;
};

std::vector<Job> jobs() {
  std::vector<Job> v;
  const int lens[] = {5, 37, 1, 130, 64, 9, 300};
  const int gens[] = {20, 7, 15, 12, 30, 1, 9};
  for (int i = 0; i < 7; ++i) v.push_back({prompt_of(lens[i], i), options(gens[i], i % 2 ? 0.8f : 0.0f, 100 + i)});
  return v;
}

std::vector<GenerationResult> alone(const LoadedModel& m, const std::vector<Job>& js) {
  std::vector<GenerationResult> out;
  for (const Job& j : js) {
    Session s(*m.backend, *m.tokenizer);
    auto r = s.generate(j.prompt, j.options);
    EXPECT_TRUE(r.ok()) << r.error().message;
    out.push_back(*r);
  }
  return out;
}

struct SchedulerCase {
  int context, max_batch, step_tokens;
};

class BatchSchedulerP : public ::testing::TestWithParam<SchedulerCase> {};

TEST_P(BatchSchedulerP, EveryRequestGetsTheTokensOfRunningAlone) {
  const SchedulerCase c = GetParam();
  LoadedModel ref = load(4096);
  const std::vector<Job> js = jobs();
  const std::vector<GenerationResult> want = alone(ref, js);

  LoadedModel m = load(c.context);
  BatchSchedulerOptions o;
  o.max_batch = c.max_batch;
  o.step_tokens = c.step_tokens;
  BatchScheduler sched(*m.backend, *m.tokenizer, o);
  // What a streaming front end sees: each request's text since its last restart, and one finish.
  std::vector<std::string> streamed(js.size());
  std::vector<int> finishes(js.size()), restarts(js.size());
  sched.set_listener([&](const BatchEvent& e) {
    switch (e.kind) {
      case BatchEvent::Kind::text: streamed.at(e.request) += e.text; break;
      case BatchEvent::Kind::restarted: streamed.at(e.request).clear(); ++restarts.at(e.request); break;
      case BatchEvent::Kind::finished: ++finishes.at(e.request); break;
    }
  });
  for (const Job& j : js) sched.submit(j.prompt, j.options);
  int steps = 0, most_running = 0;
  ASSERT_TRUE(sched.run([&](const BatchProgress& p) {
    ++steps;
    most_running = std::max(most_running, p.running);
  }).ok());
  const BatchProgress p = sched.progress();
  EXPECT_EQ(p.finished, static_cast<int>(js.size()));
  EXPECT_LE(most_running, c.max_batch);
  for (std::size_t i = 0; i < js.size(); ++i) {
    ASSERT_TRUE(sched.finished(static_cast<int>(i)));
    const auto& r = sched.result(static_cast<int>(i));
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.error().message;
    EXPECT_EQ(r->token_ids, want[i].token_ids) << "request " << i;
    EXPECT_EQ(r->text, want[i].text) << "request " << i;
    EXPECT_EQ(r->stats.stop, StopReason::max_tokens);
    EXPECT_EQ(r->stats.prompt_tokens, static_cast<int>(js[i].prompt.size()));
    EXPECT_EQ(streamed[i], r->text) << "request " << i;
    EXPECT_EQ(finishes[i], 1) << "request " << i;
  }
  int restarted = 0;
  for (const int n : restarts) restarted += n;
  EXPECT_EQ(restarted, p.preempted);
  // Every sequence went back to the cache.
  EXPECT_EQ(m.backend->kv_cache().free_blocks(), m.backend->kv_cache().shape().n_blocks);
  std::printf("[ info     ] context %d, max batch %d, %d tokens a step: %d steps, up to %d running, %d preempted\n",
              c.context, c.max_batch, c.step_tokens, steps, most_running, p.preempted);
  if (c.context < 700) {
    EXPECT_GT(p.preempted, 0) << "a cache this small should have made requests wait and restart";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchSchedulerP,
                         ::testing::Values(SchedulerCase{4096, 8, 512},  // all at once, prompts in one step
                                           SchedulerCase{4096, 3, 48},   // few at a time, prompts in chunks
                                           SchedulerCase{4096, 1, 512},  // one at a time
                                           SchedulerCase{512, 8, 64}));  // a small cache: waiting, preemption

TEST(BatchScheduler, APromptThatCannotFitIsRefusedAndTheOthersRun) {
  LoadedModel m = load(256);
  BatchScheduler sched(*m.backend, *m.tokenizer);
  const int small = sched.submit(prompt_of(10, 1), options(5, 0.0f, 1));
  const int big = sched.submit(prompt_of(400, 2), options(5, 0.0f, 2));
  GenerateOptions bad = options(5, 0.0f, 3);
  bad.sampling.top_p = 2.0f;
  const int invalid = sched.submit(prompt_of(10, 3), bad);
  const int empty = sched.submit({}, options(5, 0.0f, 4));
  ASSERT_TRUE(sched.run().ok());
  ASSERT_TRUE(sched.result(small).ok());
  EXPECT_EQ(sched.result(small)->token_ids.size(), 5u);
  ASSERT_FALSE(sched.result(big).ok());
  EXPECT_EQ(sched.result(big).error().code, "context.overflow");
  EXPECT_FALSE(sched.result(invalid).ok());
  ASSERT_FALSE(sched.result(empty).ok());
  EXPECT_EQ(sched.result(empty).error().code, "batch.prompt");
  EXPECT_EQ(sched.progress().finished, 4);
}

TEST(BatchScheduler, ARequestAloneThatOutgrowsTheCacheStopsAtContextFull) {
  LoadedModel m = load(64);
  BatchScheduler sched(*m.backend, *m.tokenizer);
  const int id = sched.submit(prompt_of(40, 5), options(100, 0.0f, 5));
  ASSERT_TRUE(sched.run().ok());
  ASSERT_TRUE(sched.result(id).ok());
  EXPECT_EQ(sched.result(id)->stats.stop, StopReason::context_full);
  EXPECT_LT(sched.result(id)->token_ids.size(), 100u);
}

// Prompts that begin alike share the KV blocks of the common part (the followers wait for the
// first to prefill it, then fork its blocks and prefill only the rest), and every reply still
// equals running the request alone: several answers to one prompt (drawn with their own seeds),
// and a prompt that extends it.
TEST(BatchScheduler, PromptsThatBeginAlikeShareTheirBlocksAndGetTheSameReplies) {
  LoadedModel m = load(4096);
  std::vector<Job> js;
  const std::vector<TokenId> question = prompt_of(100, 9);
  for (int i = 0; i < 4; ++i) js.push_back({question, options(12, 0.8f, 500 + i)});
  std::vector<TokenId> longer = question;
  for (int i = 0; i < 40; ++i) longer.push_back(static_cast<TokenId>(2000 + i));
  js.push_back({longer, options(10, 0.0f, 7)});
  js.push_back({prompt_of(30, 3), options(10, 0.0f, 8)});  // shares nothing
  const std::vector<GenerationResult> want = alone(m, js);
  BatchScheduler sched(*m.backend, *m.tokenizer);
  for (const Job& j : js) sched.submit(j.prompt, j.options);
  const int bs = m.backend->kv_cache().shape().block_size;
  int least_free = m.backend->kv_cache().free_blocks();
  ASSERT_TRUE(sched.run([&](const BatchProgress&) {
    least_free = std::min(least_free, m.backend->kv_cache().free_blocks());
  }).ok());
  for (std::size_t i = 0; i < js.size(); ++i) {
    const auto& r = sched.result(static_cast<int>(i));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->token_ids, want[i].token_ids) << "request " << i;
    EXPECT_EQ(r->text, want[i].text) << "request " << i;
  }
  // The first answer prefilled the question; the others and the longer prompt took its 6 whole
  // blocks (96 tokens; the last prompt token is always computed).
  EXPECT_EQ(sched.result(0)->stats.reused_tokens, 0);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(sched.result(i)->stats.reused_tokens, 96 / bs * bs) << "request " << i;
  EXPECT_EQ(sched.result(5)->stats.reused_tokens, 0);
  // Unshared, the six would hold 4 x 7 + 10 + 3 = 41 blocks at their ends (they run together);
  // shared, 6 + 4 x 1 + 4 + 3 = 17.
  const int used = m.backend->kv_cache().shape().n_blocks - least_free;
  EXPECT_LE(used, 20);
  EXPECT_EQ(m.backend->kv_cache().free_blocks(), m.backend->kv_cache().shape().n_blocks);
}

TEST(BatchScheduler, CancelStopsRunningAndWaitingRequestsAndFreesTheirBlocks) {
  LoadedModel m = load(4096);
  BatchSchedulerOptions o;
  o.max_batch = 2;
  BatchScheduler sched(*m.backend, *m.tokenizer, o);
  const int a = sched.submit(prompt_of(12, 1), options(50, 0.0f, 1));
  const int b = sched.submit(prompt_of(9, 2), options(6, 0.0f, 2));
  const int c = sched.submit(prompt_of(7, 3), options(50, 0.0f, 3));  // waits: two run at once
  std::vector<std::string> streamed(3);
  sched.set_listener([&](const BatchEvent& e) {
    if (e.kind == BatchEvent::Kind::text) streamed.at(e.request) += e.text;
    if (e.kind == BatchEvent::Kind::finished && e.request == b) sched.cancel(a);  // from the listener
  });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(sched.step().ok());
  ASSERT_FALSE(sched.finished(a));
  sched.cancel(c);  // still waiting
  ASSERT_TRUE(sched.finished(c));
  ASSERT_TRUE(sched.run().ok());
  ASSERT_TRUE(sched.result(b).ok());
  EXPECT_EQ(sched.result(b)->stats.stop, StopReason::max_tokens);
  ASSERT_TRUE(sched.result(a).ok());
  EXPECT_EQ(sched.result(a)->stats.stop, StopReason::cancelled);
  // a ran as long as b (same steps) and kept what it had.
  EXPECT_GE(sched.result(a)->token_ids.size(), 5u);
  EXPECT_LT(sched.result(a)->token_ids.size(), 50u);
  EXPECT_EQ(sched.result(a)->text, streamed[a]);
  ASSERT_TRUE(sched.result(c).ok());
  EXPECT_EQ(sched.result(c)->stats.stop, StopReason::cancelled);
  EXPECT_TRUE(sched.result(c)->token_ids.empty());
  EXPECT_EQ(sched.progress().finished, 3);
  sched.cancel(a);  // finished: no effect
  EXPECT_EQ(sched.progress().finished, 3);
  EXPECT_EQ(m.backend->kv_cache().free_blocks(), m.backend->kv_cache().shape().n_blocks);
}

}  // namespace
}  // namespace cosmos
