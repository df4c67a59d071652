// An on-disk cache of quantized weights (cosmos/quant.h), so that loading the same checkpoint in the
// same precision again skips the quantization. One safetensors file per (checkpoint, precision):
//   <dir>/<fingerprint>-<precision>.safetensors
// holding, for each quantized matrix <name>, "<name>.q" (U8 [rows, bytes per row]) and its scales:
// "<name>.row_scale" (F32 [rows]) for int8 / fp8, "<name>.group_scale" and "<name>.group_min" (BF16
// [rows, groups]) for int4; and in its metadata:
//   cosmos.quant_cache   the format version (kQuantCacheVersion): an older or newer file is stale;
//   cosmos.precision     the precision; cosmos.fingerprint the checkpoint's fingerprint (below);
//   cosmos.xxh3          XXH3-64 of the data section (hex): a file damaged on disk is refused.
// The fingerprint (hex XXH3-64) covers every shard's file name, size, modification time and
// safetensors header (every tensor's name, dtype, shape and offsets): a checkpoint replaced or
// rewritten in place gets a new fingerprint, and its old cache files are simply never read again.
// Files are written to a temporary name and renamed, so a crash or a full disk never leaves a
// half-written cache file under the real name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cosmos/checkpoint.h"
#include "cosmos/error.h"
#include "cosmos/precision.h"
#include "cosmos/quant.h"

namespace cosmos {

inline constexpr int kQuantCacheVersion = 1;

// $COSMOS_CACHE_DIR, else $XDG_CACHE_HOME/cosmos-chat, else ~/.cache/cosmos-chat; then "quantized".
std::filesystem::path default_quant_cache_dir();

// The checkpoint's fingerprint (see the top of this file). Errors: "file.stat" (io).
Result<std::string> checkpoint_fingerprint(const Checkpoint& checkpoint);

// The cache file for a fingerprint and precision.
std::filesystem::path quant_cache_path(const std::filesystem::path& dir, const std::string& fingerprint, Precision precision);

// Reads the matrices of a cache file. Errors (none of them harmful: the caller quantizes instead):
//   quant_cache.missing  no such file;
//   quant_cache.stale    another version, precision or fingerprint;
//   quant_cache.corrupt  unreadable, a checksum or shape that does not match, a missing part.
Result<std::map<std::string, QuantizedMatrix>> read_quant_cache(const std::filesystem::path& file, Precision precision,
                                                                const std::string& fingerprint);

// Writes (name, matrix) pairs as a cache file (temporary file, then rename). Errors: "file.write" (io),
// e.g. a full disk; nothing is left under the real name then.
Status write_quant_cache(const std::filesystem::path& file, Precision precision, const std::string& fingerprint,
                         const std::vector<std::pair<std::string, const QuantizedMatrix*>>& matrices);

}  // namespace cosmos
