#include "bench_batch.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace cosmos::cli {
namespace {

using Clock = std::chrono::steady_clock;

TokenId argmax(std::span<const float> row) {
  return static_cast<TokenId>(std::max_element(row.begin(), row.end()) - row.begin());
}

// The decode state of the batch: per sequence its cache id, history and the token to feed next.
struct Stream {
  SeqId seq = 0;
  SamplingParams sampling;
  std::vector<TokenId> history;
  TokenId next = 0;
  std::uint64_t draws = 0;
  std::unique_ptr<Sampler> sampler;  // host sampling: one seeded sampler for the whole run, as a Session
};

// One forward over `ids[i]` for streams[first..first + count); samples each stream's next token
// (on the device where the backend can, else greedy or drawn on the host).
Status step(Backend& b, std::vector<Stream>& streams, std::size_t first, std::size_t count,
            std::vector<std::vector<TokenId>> ids, ForwardOutput& out, std::vector<float>& scratch) {
  std::vector<SequenceInput> batch(count);
  const bool device = b.samples_on_device();
  for (std::size_t i = 0; i < count; ++i) {
    Stream& s = streams[first + i];
    SequenceInput& in = batch[i];
    in.seq = s.seq;
    in.tokens = std::move(ids[i]);
    s.history.insert(s.history.end(), in.tokens.begin(), in.tokens.end());
    if (device) {
      in.sampling = &s.sampling;
      in.history = s.history;
      in.sample_step = s.draws;
    }
  }
  if (auto st = b.forward(batch, out); !st) return st;
  for (std::size_t i = 0; i < count; ++i) {
    Stream& s = streams[first + i];
    ++s.draws;
    if (device) {
      s.next = out.sampled.at(i);
    } else if (s.sampling.greedy() && s.sampling.repetition_penalty == 1.0f) {
      s.next = argmax(out.row(out.first_row[i]));
    } else {
      const auto row = out.row(out.first_row[i]);
      scratch.assign(row.begin(), row.end());
      if (!s.sampler) s.sampler = std::make_unique<Sampler>(s.sampling);
      s.next = s.sampler->sample(scratch, s.history);
    }
  }
  return ok_status();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int batch_bench_context(const BatchBenchOptions& o, int block_size) {
  int most = 1;
  for (int s : o.sizes) most = std::max(most, s);
  const int per = o.prompt + o.gen + 3;  // prompt, two untimed steps, the timed ones
  const int blocks = (per + block_size - 1) / block_size + 1;
  return most * blocks * block_size;
}

Result<nlohmann::json> run_batch_bench(Backend& b, const BatchBenchOptions& o, std::mt19937& rng) {
  nlohmann::json rows = nlohmann::json::array();
  ForwardOutput out;
  std::vector<float> scratch;
  for (const int size : o.sizes) {
    if (size < 1) continue;
    std::vector<double> step_s;
    for (int r = 0; r < o.reps; ++r) {
      std::vector<Stream> streams(size);
      for (int i = 0; i < size; ++i) {
        streams[i].seq = b.kv_cache().create_sequence();
        streams[i].sampling = o.sampling;
        streams[i].sampling.seed = o.sampling.seed + static_cast<std::uint64_t>(i);
      }
      struct Free {
        Backend& b;
        std::vector<Stream>& s;
        ~Free() {
          for (const Stream& x : s) b.kv_cache().free_sequence(x.seq);
        }
      } free_all{b, streams};
      // Prefill: as many whole prompts a pass as fit prefill_tokens.
      const int per_pass = std::max(1, o.prefill_tokens / std::max(o.prompt, 1));
      for (int first = 0; first < size; first += per_pass) {
        const int count = std::min(per_pass, size - first);
        std::vector<std::vector<TokenId>> ids(count);
        for (auto& v : ids) {
          v.resize(std::max(o.prompt, 1));
          for (auto& id : v) id = static_cast<TokenId>(rng() % 151643);
        }
        if (auto st = step(b, streams, first, count, std::move(ids), out, scratch); !st) return st.error();
      }
      auto decode = [&]() -> Status {
        std::vector<std::vector<TokenId>> ids(size);
        for (int i = 0; i < size; ++i) ids[i] = {streams[i].next};
        return step(b, streams, 0, size, std::move(ids), out, scratch);
      };
      for (int w = 0; w < 2; ++w)
        if (auto st = decode(); !st) return st.error();
      const auto t0 = Clock::now();
      for (int g = 0; g < o.gen; ++g)
        if (auto st = decode(); !st) return st.error();
      step_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / std::max(o.gen, 1));
    }
    const double s = median(step_s);
    rows.push_back({{"batch", size},
                    {"tok_per_s", size / s},
                    {"per_stream_tok_per_s", 1.0 / s},
                    {"ms_per_step", 1e3 * s},
                    {"context_at_end", o.prompt + 2 + o.gen}});
  }
  return rows;
}

}  // namespace cosmos::cli
