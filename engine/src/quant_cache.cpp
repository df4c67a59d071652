#include "cosmos/quant_cache.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <system_error>

#include "cosmos/dtype.h"
#include "cosmos/safetensors.h"

namespace cosmos {
namespace fs = std::filesystem;

namespace {

constexpr const char* kKeyVersion = "cosmos.quant_cache";
constexpr const char* kKeyPrecision = "cosmos.precision";
constexpr const char* kKeyFingerprint = "cosmos.fingerprint";
constexpr const char* kKeyChecksum = "cosmos.xxh3";
constexpr const char* kColsPrefix = "cosmos.cols.";

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void hash_string(XXH3_state_t* st, const std::string& s) {
  const std::uint64_t n = s.size();
  XXH3_64bits_update(st, &n, sizeof n);
  XXH3_64bits_update(st, s.data(), s.size());
}

// One stored part of a matrix: its tensor name, dtype, shape and bytes.
struct Part {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;
};

template <typename T>
std::span<const std::byte> as_bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v.data(), v.size()));
}

std::vector<Part> parts_of(const std::string& name, const QuantizedMatrix& m) {
  std::vector<Part> p;
  const std::int64_t per_row = m.rows > 0 ? static_cast<std::int64_t>(m.q.size()) / m.rows : 0;
  p.push_back({name + ".q", DType::u8, {m.rows, per_row}, as_bytes(m.q)});
  if (m.format == QuantFormat::int4_group) {
    p.push_back({name + ".group_scale", DType::bf16, {m.rows, m.groups()}, as_bytes(m.group_scale)});
    p.push_back({name + ".group_min", DType::bf16, {m.rows, m.groups()}, as_bytes(m.group_min)});
  } else {
    p.push_back({name + ".row_scale", DType::f32, {m.rows}, as_bytes(m.row_scale)});
  }
  return p;
}

// XXH3-64 over the parts in name order (name, then bytes): independent of the file's layout.
std::uint64_t checksum(std::vector<Part> parts) {
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.name < b.name; });
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const Part& p : parts) {
    hash_string(st, p.name);
    XXH3_64bits_update(st, p.bytes.data(), p.bytes.size());
  }
  const std::uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

Error corrupt(const fs::path& file, const std::string& why) {
  return make_error(ErrorCategory::bad_input, "quant_cache.corrupt", file.string() + ": " + why);
}

}  // namespace

fs::path default_quant_cache_dir() {
  if (const char* d = std::getenv("COSMOS_CACHE_DIR"); d && *d) return fs::path(d) / "quantized";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "cosmos-chat" / "quantized";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".cache" / "cosmos-chat" / "quantized";
}

Result<std::string> checkpoint_fingerprint(const Checkpoint& checkpoint) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (std::size_t i = 0; i < checkpoint.shard_count(); ++i) {
    const SafetensorsFile& shard = checkpoint.shard(i);
    std::error_code ec;
    const auto mtime = fs::last_write_time(shard.path(), ec);
    if (ec) {
      XXH3_freeState(st);
      return make_error(ErrorCategory::io, "file.stat", shard.path().string() + ": " + ec.message());
    }
    hash_string(st, shard.path().filename().string());
    const std::int64_t stamp[2] = {static_cast<std::int64_t>(shard.file_size()),
                                   static_cast<std::int64_t>(mtime.time_since_epoch().count())};
    XXH3_64bits_update(st, stamp, sizeof stamp);
    for (const TensorInfo& t : shard.tensors()) {
      hash_string(st, t.name);
      hash_string(st, std::string(dtype_name(t.dtype)));
      XXH3_64bits_update(st, t.shape.data(), t.shape.size() * sizeof(t.shape[0]));
      const std::uint64_t offsets[2] = {t.offset, t.nbytes};
      XXH3_64bits_update(st, offsets, sizeof offsets);
    }
  }
  const std::uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return hex64(h);
}

fs::path quant_cache_path(const fs::path& dir, const std::string& fingerprint, Precision precision) {
  return dir / (fingerprint + "-" + std::string(to_string(precision)) + ".safetensors");
}

Result<std::map<std::string, QuantizedMatrix>> read_quant_cache(const fs::path& file, Precision precision,
                                                                const std::string& fingerprint) {
  std::error_code ec;
  if (!fs::exists(file, ec))
    return make_error(ErrorCategory::bad_input, "quant_cache.missing", file.string() + ": no such cache file");
  const auto format = quant_format_for(precision);
  if (!format) return make_error(ErrorCategory::internal, "quant_cache.stale", "bf16 and fp16 are not cached");
  auto f = SafetensorsFile::open(file);
  if (!f) return corrupt(file, f.error().message);
  const auto& meta = f->metadata();
  auto value = [&](const std::string& key) {
    const auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  if (value(kKeyVersion) != std::to_string(kQuantCacheVersion) || value(kKeyPrecision) != to_string(precision) ||
      value(kKeyFingerprint) != fingerprint)
    return make_error(ErrorCategory::bad_input, "quant_cache.stale",
                      file.string() + ": made by another version, precision or checkpoint");
  std::vector<Part> parts;
  for (const TensorInfo& t : f->tensors()) parts.push_back({t.name, t.dtype, t.shape, f->data(t)});
  if (hex64(checksum(parts)) != value(kKeyChecksum)) return corrupt(file, "checksum mismatch (damaged on disk)");

  // The matrices named in the metadata, then filled over the threads: a fresh buffer's pages cost
  // the kernel a zeroed page at first touch, which one thread paid alone (docs/PERFORMANCE.md,
  // session 51).
  std::vector<std::pair<std::string, std::int64_t>> named;  // (name, cols)
  for (const auto& [key, cols_text] : meta)
    if (key.rfind(kColsPrefix, 0) == 0) named.emplace_back(key.substr(std::strlen(kColsPrefix)), std::atoll(cols_text.c_str()));
  std::vector<QuantizedMatrix> made(named.size());
  std::vector<std::string> problem(named.size());  // empty: filled
  std::atomic<bool> no_memory{false};
#pragma omp parallel for schedule(dynamic)
  for (std::size_t i = 0; i < named.size(); ++i) {
    if (no_memory.load(std::memory_order_relaxed)) continue;
    const std::string& name = named[i].first;
    const TensorInfo* q = f->find(name + ".q");
    if (!q || q->shape.size() != 2) {
      problem[i] = "no values for " + name;
      continue;
    }
    try {
      made[i] = make_quantized(*format, q->shape[0], named[i].second);
    } catch (const std::bad_alloc&) {
      no_memory = true;
      continue;
    }
    QuantizedMatrix& m = made[i];
    auto fill = [&](const std::string& part, auto& dst) -> bool {
      const TensorInfo* t = part.empty() ? q : f->find(name + part);
      if (!t) return false;
      const auto bytes = f->data(*t);
      if (bytes.size() != dst.size() * sizeof(dst[0])) return false;
      std::memcpy(dst.data(), bytes.data(), bytes.size());
      return true;
    };
    bool ok = fill("", m.q);
    if (*format == QuantFormat::int4_group)
      ok = ok && fill(".group_scale", m.group_scale) && fill(".group_min", m.group_min);
    else
      ok = ok && fill(".row_scale", m.row_scale);
    if (!ok) problem[i] = "parts of " + name + " are missing or of the wrong size";
  }
  if (no_memory)
    return make_error(ErrorCategory::out_of_memory, "quant_cache.memory",
                      file.string() + ": not enough memory to read the quantized weights back");
  std::map<std::string, QuantizedMatrix> out;
  for (std::size_t i = 0; i < named.size(); ++i) {
    if (!problem[i].empty()) return corrupt(file, problem[i]);
    out.emplace(named[i].first, std::move(made[i]));
  }
  if (out.empty()) return corrupt(file, "no matrices");
  return out;
}

Status write_quant_cache(const fs::path& file, Precision precision, const std::string& fingerprint,
                         const std::vector<std::pair<std::string, const QuantizedMatrix*>>& matrices) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) return make_error(ErrorCategory::io, "file.write", file.parent_path().string() + ": " + ec.message());
  std::vector<Part> parts;
  std::map<std::string, std::string> meta;
  for (const auto& [name, m] : matrices) {
    for (Part& p : parts_of(name, *m)) parts.push_back(std::move(p));
    meta[kColsPrefix + name] = std::to_string(m->cols);
  }
  meta[kKeyVersion] = std::to_string(kQuantCacheVersion);
  meta[kKeyPrecision] = std::string(to_string(precision));
  meta[kKeyFingerprint] = fingerprint;
  meta[kKeyChecksum] = hex64(checksum(parts));
  std::vector<TensorToWrite> tensors;
  for (const Part& p : parts) tensors.push_back({p.name, p.dtype, p.shape, p.bytes});
  const fs::path tmp = file.string() + ".tmp-" + std::to_string(::getpid());
  if (auto st = write_safetensors(tmp, tensors, meta); !st) {
    fs::remove(tmp, ec);
    return st.error();
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return make_error(ErrorCategory::io, "file.write", file.string() + ": " + ec.message());
  }
  return ok_status();
}

}  // namespace cosmos
