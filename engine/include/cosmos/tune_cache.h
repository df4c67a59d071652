// An on-disk cache of the GEMM tuner's choices (kernels/gemm_lt.h), so that a later load on the same
// GPU and cuBLASLt skips the timing runs of each size class's first long prompt (66-438 ms per size
// class on an H200; docs/PERFORMANCE.md session 17). One text file per GPU and library:
//   <dir>/gemm-<hex XXH3-64 of the identity>.txt
//   line 1   "cosmos-gemm-tune <kTuneCacheVersion>"
//   line 2   "identity <GPU name, compute capability, SM count, cuBLASLt version>"
//   entries  "<7 key integers> <8 algorithm words in hex>" (the tuner's key and cublasLtMatmulAlgo_t)
//   last     "xxh3 <hex XXH3-64 of every line above, newlines included>"
// A file of another version or identity is stale; a damaged one corrupt. Neither is harmful: the
// tuner times again, and cuBLASLt checks every restored algorithm before it is used. Files are
// written to a temporary name and renamed.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cosmos/error.h"

namespace cosmos {

inline constexpr int kTuneCacheVersion = 1;

struct TuneCacheEntry {
  std::array<int, 7> key{};             // n bucket, rows, cols, accumulate, type, out type, W transposed
  std::array<std::uint64_t, 8> algo{};  // the cublasLtMatmulAlgo_t words
  bool operator==(const TuneCacheEntry&) const = default;
};

// $COSMOS_CACHE_DIR, else $XDG_CACHE_HOME/cosmos-chat, else ~/.cache/cosmos-chat; then "gemm-tuning".
std::filesystem::path default_tune_cache_dir();

// The cache file for an identity (see the top).
std::filesystem::path tune_cache_path(const std::filesystem::path& dir, const std::string& identity);

// Reads a cache file. Errors: tune_cache.missing (no file), tune_cache.stale (another version or
// identity), tune_cache.corrupt (a checksum, line or number that does not parse).
Result<std::vector<TuneCacheEntry>> read_tune_cache(const std::filesystem::path& file, const std::string& identity);

// Writes the entries (temporary file, then rename; the directory is created). Errors: "file.write"
// (io), e.g. a full disk or a directory that cannot be created; nothing is left under the real name.
Status write_tune_cache(const std::filesystem::path& file, const std::string& identity,
                        const std::vector<TuneCacheEntry>& entries);

// The decode launch tuning (`cosmos-cli tune`, cosmos/decode_tuner.h) kept for one GPU, precision
// and set of automatic plans (the identity the CUDA backend builds), in the same directory:
//   <dir>/decode-<hex XXH3-64 of the identity>.txt
//   line 1   "cosmos-decode-tune <kDecodeTuneVersion>"
//   line 2   "identity <identity>"
//   line 3   "spec <the knobs, kernels/qgemv_tuning_spec.h>" or "spec -" (the automatic plan won)
//   then     "depth <context> <A us per step> <tuned us per step>", one line per depth timed
//   last     "xxh3 <hex XXH3-64 of every line above, newlines included>"
// Errors as for the GEMM file: tune_cache.missing, tune_cache.stale (another version or identity),
// tune_cache.corrupt; file.write for a write that cannot happen (nothing left under the real name).
inline constexpr int kDecodeTuneVersion = 1;

struct DecodeTuneDepth {
  int depth = 0;
  double base_us = 0, tuned_us = 0;
  bool operator==(const DecodeTuneDepth&) const = default;
};

struct DecodeTuneRecord {
  std::string spec;  // no spaces or newlines (the spec grammar has none); "" for the automatic plan
  std::vector<DecodeTuneDepth> depths;
  bool operator==(const DecodeTuneRecord&) const = default;
};

std::filesystem::path decode_tune_path(const std::filesystem::path& dir, const std::string& identity);
Result<DecodeTuneRecord> read_decode_tune(const std::filesystem::path& file, const std::string& identity);
// Errors also "tune_cache.spec" (bad_input) for a spec holding whitespace, which the file cannot keep.
Status write_decode_tune(const std::filesystem::path& file, const std::string& identity, const DecodeTuneRecord& record);

}  // namespace cosmos
