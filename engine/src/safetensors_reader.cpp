// Parsing and validation of safetensors headers, and the memory-mapped SafetensorsFile.
//
// parse_safetensors() is the only place that interprets untrusted checkpoint bytes, so it is written
// to never read outside the span it is given and never throw: every integer is range-checked before
// it is used as an offset, the JSON is parsed with the non-throwing overload, and the nesting depth
// of the JSON is bounded before parsing (a header of a hundred megabytes of '[' would otherwise
// allocate gigabytes). tests/fuzz/fuzz_safetensors_header.cpp exercises it with libFuzzer.
//
// Choices where the format leaves room:
//   - "__metadata__" must be an object whose values are strings; anything else is
//     "safetensors.tensor_entry" (the entry named "__metadata__" is malformed).
//   - Gaps between tensors and bytes after the last tensor are accepted.
//   - Zero-size tensors (a 0 in the shape) are accepted, and never overlap anything; their
//     offsets must still lie inside the data section.
//   - Unknown keys inside a tensor entry are ignored.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "cosmos/safetensors.h"

namespace cosmos {
namespace {

// The length prefix is trusted only up to this (the real 7B checkpoint's headers are ~30 KB).
constexpr std::uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
// A valid header nests three deep ({ "t": { "shape": [ ] } }); anything past this is junk.
constexpr int kMaxJsonDepth = 64;

Error st_error(const std::string& code, const std::string& label, const std::string& message) {
  return make_error(ErrorCategory::bad_input, code, label + ": " + message);
}

Error entry_error(const std::string& code, const std::string& label, const std::string& tensor,
                  const std::string& message) {
  return st_error(code, label, "tensor '" + tensor + "': " + message);
}

std::uint64_t read_le_u64(std::span<const std::byte> bytes) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  return v;
}

// True if brackets/braces outside of strings nest no deeper than max_depth. Does not validate JSON.
bool nesting_within(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// A non-negative JSON integer (nlohmann stores those as number_unsigned); nullopt for anything else.
std::optional<std::uint64_t> as_unsigned(const nlohmann::json& j) {
  if (!j.is_number_unsigned()) return std::nullopt;
  return j.get<std::uint64_t>();
}

struct RawEntry {
  TensorInfo info;
  std::uint64_t begin = 0;  // data_offsets, relative to the data section
  std::uint64_t end = 0;
};

// Validates one tensor entry on its own (types, dtype, sizes, begin <= end).
Result<RawEntry> parse_entry(const std::string& name, const nlohmann::json& e, const std::string& label) {
  const auto bad = [&](const std::string& msg) { return entry_error("safetensors.tensor_entry", label, name, msg); };
  if (!e.is_object()) return bad("entry is not a JSON object");

  const auto dt = e.find("dtype");
  if (dt == e.end()) return bad("missing \"dtype\"");
  if (!dt->is_string()) return bad("\"dtype\" is not a string");
  const auto sh = e.find("shape");
  if (sh == e.end()) return bad("missing \"shape\"");
  if (!sh->is_array()) return bad("\"shape\" is not an array");
  const auto off = e.find("data_offsets");
  if (off == e.end()) return bad("missing \"data_offsets\"");
  if (!off->is_array() || off->size() != 2) return bad("\"data_offsets\" is not an array of two integers");

  RawEntry r;
  r.info.name = name;
  std::uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (d.is_number_integer() && !d.is_number_unsigned()) {
      return bad("negative dimension " + std::to_string(d.get<std::int64_t>()) + " in \"shape\"");
    }
    const auto v = as_unsigned(d);
    if (!v) return bad("\"shape\" holds a non-integer (" + d.dump() + ")");
    if (*v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return bad("dimension " + std::to_string(*v) + " is too large");
    }
    if (__builtin_mul_overflow(numel, *v, &numel)) return bad("the number of elements overflows 64 bits");
    r.info.shape.push_back(static_cast<std::int64_t>(*v));
  }
  const auto b = as_unsigned((*off)[0]);
  const auto en = as_unsigned((*off)[1]);
  if (!b || !en) return bad("\"data_offsets\" must be two non-negative integers, got " + off->dump());

  const auto dtype = dtype_from_name(dt->get_ref<const std::string&>());
  if (!dtype) {
    return entry_error("safetensors.dtype", label, name,
                       "unknown dtype \"" + dt->get_ref<const std::string&>() + "\"");
  }
  r.info.dtype = *dtype;
  std::uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(dtype_size(*dtype)), &nbytes)) {
    return bad("the byte size overflows 64 bits");
  }
  if (*b > *en) {
    return entry_error("safetensors.offsets", label, name,
                       "data_offsets begin " + std::to_string(*b) + " > end " + std::to_string(*en));
  }
  if (*en - *b != nbytes) {
    return entry_error("safetensors.size_mismatch", label, name,
                       "shape " + shape_text(r.info.shape) + " of " + std::string(dtype_name(*dtype)) +
                           " needs " + std::to_string(nbytes) + " bytes but data_offsets [" +
                           std::to_string(*b) + ", " + std::to_string(*en) + ") span " +
                           std::to_string(*en - *b));
  }
  r.begin = *b;
  r.end = *en;
  r.info.nbytes = nbytes;
  return r;
}

Result<std::map<std::string, std::string>> parse_metadata(const nlohmann::json& m, const std::string& label) {
  std::map<std::string, std::string> out;
  if (!m.is_object()) {
    return st_error("safetensors.tensor_entry", label, "\"__metadata__\" is not an object of strings");
  }
  for (const auto& [k, v] : m.items()) {
    if (!v.is_string()) {
      return st_error("safetensors.tensor_entry", label,
                      "\"__metadata__\" value for \"" + k + "\" is not a string");
    }
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

}  // namespace

std::uint64_t TensorInfo::numel() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

Result<SafetensorsHeader> parse_safetensors(std::span<const std::byte> file_bytes, const std::string& label) {
  const std::uint64_t file_size = file_bytes.size();
  if (file_size < 8) {
    return st_error("safetensors.too_small", label,
                    "file has " + std::to_string(file_size) +
                        " bytes, fewer than the 8-byte header length prefix of a safetensors file");
  }
  const std::uint64_t n = read_le_u64(file_bytes.first(8));
  if (n > file_size - 8 || n > kMaxHeaderBytes) {
    return st_error("safetensors.header_length", label,
                    "header length " + std::to_string(n) + " is " +
                        (n > kMaxHeaderBytes ? "larger than the 100 MB limit"
                                             : "past the end of the file (" + std::to_string(file_size) +
                                                   " bytes)") +
                        "; not a safetensors file, or a damaged one");
  }

  SafetensorsHeader header;
  header.data_start = 8 + n;
  const auto* text_begin = reinterpret_cast<const char*>(file_bytes.data() + 8);
  const std::string_view text(text_begin, static_cast<std::size_t>(n));
  // nlohmann's lexer takes a NUL byte for the end of input ("{}\0junk" would parse); JSON never
  // holds a raw NUL (not even inside strings), so reject it outright.
  if (text.find('\0') != std::string_view::npos) {
    return st_error("safetensors.header_json", label, "header contains a NUL byte; not valid JSON");
  }
  if (!nesting_within(text, kMaxJsonDepth)) {
    return st_error("safetensors.header_json", label, "header JSON nests deeper than " +
                                                          std::to_string(kMaxJsonDepth) + " levels");
  }
  // nlohmann also rejects invalid UTF-8 inside strings. Its parse_error is caught here (it never
  // crosses the API) because its text says where the header is broken.
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    std::string why = e.what();
    if (const auto close = why.find("] "); why.starts_with("[json.exception") && close != std::string::npos) {
      why.erase(0, close + 2);
    }
    // The "last read" excerpt may hold the very bytes that are not UTF-8; keep messages valid text.
    for (char& c : why) {
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    }
    return st_error("safetensors.header_json", label, "header is not valid UTF-8 JSON (" + why + ")");
  }
  if (!j.is_object()) return st_error("safetensors.header_json", label, "header JSON is not an object");

  std::vector<RawEntry> entries;
  entries.reserve(j.size());
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      auto meta = parse_metadata(value, label);
      if (!meta) return meta.error();
      header.metadata = std::move(meta.value());
      continue;
    }
    auto e = parse_entry(name, value, label);
    if (!e) return e.error();
    entries.push_back(std::move(e.value()));
  }

  std::sort(entries.begin(), entries.end(), [](const RawEntry& a, const RawEntry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.info.name < b.info.name;
  });

  // Overlap: with entries sorted by begin, a non-empty tensor overlaps an earlier one exactly when
  // it begins before the furthest end seen so far.
  std::uint64_t furthest = 0;
  const RawEntry* furthest_entry = nullptr;
  for (const auto& e : entries) {
    if (e.begin == e.end) continue;  // zero bytes share nothing
    if (furthest_entry && e.begin < furthest) {
      return entry_error("safetensors.overlap", label, e.info.name,
                         "bytes [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                             ") overlap tensor '" + furthest_entry->info.name + "' [" +
                             std::to_string(furthest_entry->begin) + ", " + std::to_string(furthest_entry->end) + ")");
    }
    if (e.end > furthest) {
      furthest = e.end;
      furthest_entry = &e;
    }
  }

  // Bounds. If the tensors tile [0, max_end) without gaps and only the end of the file is missing,
  // the file was cut short (an interrupted download or copy): say so rather than "bad offsets".
  const std::uint64_t data_size = file_size - header.data_start;
  std::uint64_t max_end = 0;
  for (const auto& e : entries) max_end = std::max(max_end, e.end);
  if (max_end > data_size) {
    std::uint64_t cursor = 0;
    const RawEntry* gap_at = nullptr;
    for (const auto& e : entries) {
      if (e.begin > cursor) {
        gap_at = &e;
        break;
      }
      cursor = std::max(cursor, e.end);
    }
    const RawEntry* first_out = nullptr;
    for (const auto& e : entries) {
      if (e.end > data_size) {
        first_out = &e;
        break;
      }
    }
    if (gap_at == nullptr) {
      return st_error("safetensors.truncated", label,
                      "file is truncated: the header describes " + std::to_string(max_end) +
                          " bytes of tensor data (" + std::to_string(header.data_start + max_end) +
                          " bytes in all) but the file has " + std::to_string(file_size) + " bytes (" +
                          std::to_string(data_size) + " of data); tensor '" + first_out->info.name +
                          "' is the first that does not fit");
    }
    return entry_error("safetensors.offsets", label, first_out->info.name,
                       "data_offsets [" + std::to_string(first_out->begin) + ", " +
                           std::to_string(first_out->end) + ") lie beyond the data section of " +
                           std::to_string(data_size) + " bytes");
  }

  header.tensors.reserve(entries.size());
  for (auto& e : entries) {
    e.info.offset = header.data_start + e.begin;
    header.tensors.push_back(std::move(e.info));
  }
  return header;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  auto header = parse_safetensors(mapped->bytes(), path.string());
  if (!header) return header.error();

  SafetensorsFile f;
  f.file_ = std::move(mapped.value());
  f.header_ = std::move(header.value());
  for (std::size_t i = 0; i < f.header_.tensors.size(); ++i) f.index_.emplace(f.header_.tensors[i].name, i);
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::data(const TensorInfo& t) const {
  const auto bytes = file_.bytes();
  // Guard against a TensorInfo that did not come from this file.
  if (t.offset > bytes.size() || t.nbytes > bytes.size() - t.offset) return {};
  return bytes.subspan(static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.nbytes));
}

}  // namespace cosmos
