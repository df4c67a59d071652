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

}  // namespace cosmos
