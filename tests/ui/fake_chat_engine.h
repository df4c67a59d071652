// FakeChatEngine: a scripted ChatEngine for the UI tests. The test keeps a shared FakeScript and
// changes it while the engine lives on the worker thread (every access is under a mutex):
//   - load: progress steps with a delay each, honoring cancel (progress returning false), an
//     optional failure sentence, and the EngineInfo to report;
//   - streams: each generate() takes the next FakeStream (a default one when none is queued): the
//     pieces, a delay before each, an optional error after N pieces, or an endless repetition
//     until the stop callback returns false;
//   - batches: each generateMany() takes the next FakeBatch (a default one when none is queued): one
//     FakeAnswer per answer, interleaved round-robin (round k: piece k of answer 0, 1, …, each
//     answer still going), with a delay before each round and the step callback after each; an
//     answer may fail after N pieces, restart once after N pieces, or repeat until stopped;
//   - it records the messages of every request (and the options and n of every batch), so tests can
//     check what the view-model sent.
#pragma once

#include <QString>
#include <QStringList>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "chat_engine.h"

namespace cosmos::ui::testing {

struct FakeLoad {
  int steps = 4;            // progress calls: 1/steps .. 1
  int stepDelayMs = 0;      // before each step
  QString error;            // non-empty: the load fails with this sentence (after the steps)
  EngineInfo info = defaultInfo();

  static EngineInfo defaultInfo() {
    EngineInfo i;
    i.deviceName = QStringLiteral("Fake CPU (2 threads)");
    i.precision = QStringLiteral("bf16");
    i.deviceNote = QStringLiteral("using the CPU: the fake has no GPU");
    i.weightBytes = 1000000;
    i.kvCacheBytes = 200000;
    i.workspaceBytes = 30000;
    i.contextLimit = 4096;
    return i;
  }
};

struct FakeStream {
  QStringList pieces = {QStringLiteral("Hello"), QStringLiteral(" world")};
  int delayMs = 0;             // before each piece
  int failAfter = -1;          // >= 0: after that many pieces, return an Error with `error`
  QString error = QStringLiteral("the fake engine ran out of memory");
  bool untilStopped = false;   // repeat the pieces until the callback returns false
  int promptTokens = 12;
};

struct FakeAnswer {
  QStringList pieces;
  int failAfter = -1;        // >= 0: after that many pieces, this answer fails with `error`
  QString error = QStringLiteral("the fake answer failed");
  int restartAfter = -1;     // >= 0: after that many pieces, the answer restarts once (from piece 0)
  bool untilStopped = false; // repeat the pieces until the step callback returns false
};

struct FakeBatch {
  std::vector<FakeAnswer> answers;  // fewer than n: the rest get the default pieces
  int delayMs = 0;                  // before each round
  int promptTokens = 12;

  // Answer i of a default batch: "Answer i+1" " of n".
  static FakeAnswer defaultAnswer(int i, int n) {
    FakeAnswer a;
    a.pieces = {QStringLiteral("Answer %1").arg(i + 1), QStringLiteral(" of %1").arg(n)};
    return a;
  }
};

class FakeScript {
 public:
  void setLoad(FakeLoad load) {
    std::lock_guard lock(mutex_);
    load_ = std::move(load);
  }
  FakeLoad load() const {
    std::lock_guard lock(mutex_);
    return load_;
  }
  void pushStream(FakeStream stream) {
    std::lock_guard lock(mutex_);
    streams_.push_back(std::move(stream));
  }
  FakeStream nextStream() {
    std::lock_guard lock(mutex_);
    if (streams_.empty()) return FakeStream{};
    FakeStream s = std::move(streams_.front());
    streams_.pop_front();
    return s;
  }
  void pushBatch(FakeBatch batch) {
    std::lock_guard lock(mutex_);
    batches_.push_back(std::move(batch));
  }
  FakeBatch nextBatch() {
    std::lock_guard lock(mutex_);
    if (batches_.empty()) return FakeBatch{};
    FakeBatch b = std::move(batches_.front());
    batches_.pop_front();
    return b;
  }
  void recordBatch(const cosmos::GenerateOptions& options, int n) {
    std::lock_guard lock(mutex_);
    batchOptions_.push_back(options);
    batchSizes_.push_back(n);
  }
  // The options and answer count of every generateMany() call, in order.
  std::vector<cosmos::GenerateOptions> batchOptions() const {
    std::lock_guard lock(mutex_);
    return batchOptions_;
  }
  std::vector<int> batchSizes() const {
    std::lock_guard lock(mutex_);
    return batchSizes_;
  }
  void recordRequest(const std::vector<cosmos::ChatMessage>& messages) {
    std::lock_guard lock(mutex_);
    requests_.push_back(messages);
  }
  std::vector<std::vector<cosmos::ChatMessage>> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  // The text of message i of request r ("" when out of range).
  QString requestText(std::size_t r, std::size_t i) const {
    std::lock_guard lock(mutex_);
    if (r >= requests_.size() || i >= requests_[r].size() || requests_[r][i].parts.empty()) return {};
    return QString::fromStdString(requests_[r][i].parts[0].text);
  }
  QString requestRole(std::size_t r, std::size_t i) const {
    std::lock_guard lock(mutex_);
    if (r >= requests_.size() || i >= requests_[r].size()) return {};
    return QString::fromStdString(requests_[r][i].role);
  }

  std::atomic<int> loads{0};
  std::atomic<int> contextUsed{0};

 private:
  mutable std::mutex mutex_;
  FakeLoad load_;
  std::deque<FakeStream> streams_;
  std::deque<FakeBatch> batches_;
  std::vector<cosmos::GenerateOptions> batchOptions_;
  std::vector<int> batchSizes_;
  std::vector<std::vector<cosmos::ChatMessage>> requests_;
};

class FakeChatEngine final : public ChatEngine {
 public:
  explicit FakeChatEngine(std::shared_ptr<FakeScript> script) : script_(std::move(script)) {}

  cosmos::Result<EngineInfo> load(const EngineLoadRequest& request,
                                  const std::function<bool(double)>& progress) override {
    (void)request;
    ++script_->loads;
    const FakeLoad l = script_->load();
    for (int step = 1; step <= l.steps; ++step) {
      if (l.stepDelayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(l.stepDelayMs));
      if (progress && !progress(static_cast<double>(step) / l.steps))
        return cosmos::make_error(cosmos::ErrorCategory::cancelled, "load.cancelled", "loading was cancelled");
    }
    if (!l.error.isEmpty())
      return cosmos::make_error(cosmos::ErrorCategory::bad_input, "fake.load", l.error.toStdString());
    return l.info;
  }

  cosmos::Result<cosmos::GenerationResult> generate(const std::vector<cosmos::ChatMessage>& messages,
                                                    const cosmos::GenerateOptions& options,
                                                    const cosmos::StreamCallback& onPiece) override {
    (void)options;
    script_->recordRequest(messages);
    const FakeStream s = script_->nextStream();
    cosmos::GenerationResult result;
    cosmos::GenerationStats& stats = result.stats;
    stats.prompt_tokens = s.promptTokens;
    stats.reused_tokens = s.promptTokens / 2;
    stats.ttft_s = 0.01;
    stats.prefill_tok_per_s = 500;
    script_->contextUsed = s.promptTokens;
    const auto start = std::chrono::steady_clock::now();
    const int limit = s.untilStopped ? 1000000 : static_cast<int>(s.pieces.size());
    for (int i = 0; i < limit && !s.pieces.isEmpty(); ++i) {
      if (i == s.failAfter)
        return cosmos::make_error(cosmos::ErrorCategory::out_of_memory, "fake.generate", s.error.toStdString());
      if (s.delayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(s.delayMs));
      const std::string piece = s.pieces[i % s.pieces.size()].toStdString();
      result.text += piece;
      ++stats.generated_tokens;
      script_->contextUsed = s.promptTokens + stats.generated_tokens;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      stats.decode_tok_per_s = seconds > 0 ? stats.generated_tokens / seconds : 0;
      if (onPiece && !onPiece(piece, stats)) {
        stats.stop = cosmos::StopReason::cancelled;
        return result;
      }
    }
    if (s.failAfter >= 0 && s.failAfter >= s.pieces.size())
      return cosmos::make_error(cosmos::ErrorCategory::out_of_memory, "fake.generate", s.error.toStdString());
    stats.stop = cosmos::StopReason::eos;
    return result;
  }

  std::vector<cosmos::Result<cosmos::GenerationResult>> generateMany(const std::vector<cosmos::ChatMessage>& messages,
                                                                     const cosmos::GenerateOptions& options, int n,
                                                                     const AnswerCallbacks& callbacks) override {
    script_->recordRequest(messages);
    script_->recordBatch(options, n);
    const FakeBatch b = script_->nextBatch();
    struct Answer {
      FakeAnswer script;
      int next = 0;  // the next piece
      bool restarted = false;
      std::optional<cosmos::Result<cosmos::GenerationResult>> result;
      cosmos::GenerationResult out;
    };
    std::vector<Answer> answers(static_cast<std::size_t>(std::max(0, n)));
    for (int i = 0; i < n; ++i) {
      Answer& a = answers[static_cast<std::size_t>(i)];
      a.script = i < static_cast<int>(b.answers.size()) ? b.answers[static_cast<std::size_t>(i)] : FakeBatch::defaultAnswer(i, n);
      a.out.stats.prompt_tokens = b.promptTokens;
      a.out.stats.ttft_s = 0.01;
      a.out.stats.prefill_tok_per_s = 500;
    }
    auto finish = [&](int i, cosmos::Result<cosmos::GenerationResult> r) {
      Answer& a = answers[static_cast<std::size_t>(i)];
      a.result = std::move(r);
      if (callbacks.finished) callbacks.finished(i, *a.result);
    };
    long long generated = 0;
    bool stopped = false;
    script_->contextUsed = b.promptTokens;
    while (true) {
      if (callbacks.step && !callbacks.step(generated)) stopped = true;
      bool running = false;
      for (int i = 0; i < n; ++i) {
        Answer& a = answers[static_cast<std::size_t>(i)];
        if (a.result) continue;
        if (stopped) {
          a.out.stats.stop = cosmos::StopReason::cancelled;
          finish(i, a.out);
          continue;
        }
        const int count = static_cast<int>(a.script.pieces.size());
        if (a.next == a.script.failAfter) {
          finish(i, cosmos::make_error(cosmos::ErrorCategory::out_of_memory, "fake.generate", a.script.error.toStdString()));
          continue;
        }
        if (a.next == a.script.restartAfter && !a.restarted) {
          a.restarted = true;
          a.next = 0;
          generated -= a.out.stats.generated_tokens;
          a.out.text.clear();
          a.out.stats.generated_tokens = 0;
          if (callbacks.restarted) callbacks.restarted(i);
        }
        if (count == 0 || (!a.script.untilStopped && a.next >= count)) {
          a.out.stats.stop = cosmos::StopReason::eos;
          finish(i, a.out);
          continue;
        }
        const std::string piece = a.script.pieces[a.next % count].toStdString();
        ++a.next;
        a.out.text += piece;
        ++a.out.stats.generated_tokens;
        ++generated;
        if (callbacks.piece) callbacks.piece(i, piece);
        running = true;
      }
      if (!running) break;
      if (b.delayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(b.delayMs));
    }
    std::vector<cosmos::Result<cosmos::GenerationResult>> results;
    for (Answer& a : answers) results.push_back(std::move(*a.result));
    return results;
  }

  int contextUsed() const override { return script_->contextUsed.load(); }

 private:
  std::shared_ptr<FakeScript> script_;
};

// A host-ready engine and the script that drives it.
inline std::unique_ptr<ChatEngine> makeFakeEngine(const std::shared_ptr<FakeScript>& script) {
  return std::make_unique<FakeChatEngine>(script);
}

}  // namespace cosmos::ui::testing
