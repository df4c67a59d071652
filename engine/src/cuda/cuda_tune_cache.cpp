// CUDA backend: the GEMM tuning cache (cosmos/tune_cache.h). After cuBLASLt is set up, the tuner's
// earlier choices for this GPU and library are restored (each checked by cuBLASLt), so the first
// long prompt of a size class skips the timing runs; after a forward pass that tuned a new size
// class, the file is rewritten with every choice. Like the quantized-weight cache it never fails a
// load or a pass: a missing, stale or damaged file means tuning again, a failed write is a warning.
#include <chrono>

#include "cosmos/tune_cache.h"
#include "cuda/cuda_backend_impl.h"

namespace cosmos {

void CudaBackend::read_tune_cache() {
  tunings_saved_ = gemm_.tunings();
  if (tune_cache_dir_.empty()) return;
  const std::string identity = gemm_.identity();
  if (identity.empty()) return;
  const auto file = tune_cache_path(tune_cache_dir_, identity);
  auto entries = cosmos::read_tune_cache(file, identity);
  if (!entries) {
    if (entries.error().code == "tune_cache.missing")
      spdlog::info("cuda backend: no GEMM tuning cache yet ({}); size classes are tuned on first use", file.string());
    else
      spdlog::warn("cuda backend: GEMM tuning cache not used ({}): {}; size classes are tuned again",
                   entries.error().code, entries.error().message);
    return;
  }
  std::vector<kernels::GemmLt::Tuned> list;
  for (const TuneCacheEntry& e : *entries) {
    kernels::GemmLt::Tuned t{e.key, {}};
    for (std::size_t i = 0; i < e.algo.size(); ++i) t.algo.data[i] = e.algo[i];
    list.push_back(t);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int kept = gemm_.restore_tuned(list);
  spdlog::info("cuda backend: {} of {} GEMM tuning choices restored from {} in {:.1f} ms", kept, list.size(),
               file.string(), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

void CudaBackend::write_tune_cache() {
  tunings_saved_ = gemm_.tunings();
  if (tune_cache_dir_.empty()) return;
  const std::string identity = gemm_.identity();
  if (identity.empty()) return;
  std::vector<TuneCacheEntry> entries;
  for (const auto& t : gemm_.tuned()) {
    TuneCacheEntry e;
    e.key = t.key;
    for (std::size_t i = 0; i < e.algo.size(); ++i) e.algo[i] = t.algo.data[i];
    entries.push_back(e);
  }
  const auto file = tune_cache_path(tune_cache_dir_, identity);
  if (auto st = cosmos::write_tune_cache(file, identity, entries); !st)
    spdlog::warn("cuda backend: GEMM tuning cache not written: {}", st.error().message);
}

}  // namespace cosmos
