#include "cosmos/tune_cache.h"

#include <unistd.h>
#include <xxhash.h>

#include <cctype>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

#include "cosmos/quant_cache.h"

namespace cosmos {
namespace fs = std::filesystem;

namespace {

// What tells the two file kinds apart; everything else about reading and writing them is shared.
struct FileKind {
  const char* magic;
  int version;
  const char* prefix;   // of the file name
  const char* name;     // for "not a ... file"
  const char* foreign;  // for "made for another ..."
};
constexpr FileKind kGemm{"cosmos-gemm-tune", kTuneCacheVersion, "gemm-", "GEMM tuning", "GPU or library"};
constexpr FileKind kDecode{"cosmos-decode-tune", kDecodeTuneVersion, "decode-", "decode tuning",
                           "GPU, precision or plan set"};

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

Error corrupt(const fs::path& file, const std::string& why) {
  return make_error(ErrorCategory::bad_input, "tune_cache.corrupt", file.string() + ": " + why);
}

fs::path path_for(const FileKind& kind, const fs::path& dir, const std::string& identity) {
  return dir / (kind.prefix + hex64(XXH3_64bits(identity.data(), identity.size())) + ".txt");
}

// Verifies the checksum, version and identity; returns the lines between the identity line and the
// checksum line, for the caller to parse.
Result<std::vector<std::string>> read_signed(const fs::path& file, const FileKind& kind, const std::string& identity) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return make_error(ErrorCategory::bad_input, "tune_cache.missing", file.string() + ": no such cache file");
  std::ifstream in(file, std::ios::binary);
  if (!in) return corrupt(file, "cannot be opened");
  std::ostringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  // The checksum line is the last one; what precedes it is hashed.
  const std::size_t end = text.size() >= 1 && text.back() == '\n' ? text.size() - 1 : text.size();
  const std::size_t last = text.rfind('\n', end == 0 ? 0 : end - 1);
  if (last == std::string::npos) return corrupt(file, "no checksum line");
  const std::string head = text.substr(0, last + 1);
  const std::string sum_line = text.substr(last + 1, end - last - 1);
  if (sum_line != "xxh3 " + hex64(XXH3_64bits(head.data(), head.size())))
    return corrupt(file, "checksum does not match");
  std::istringstream lines(head);
  std::string magic, id;
  int version = 0;
  lines >> magic >> version;
  if (magic != kind.magic) return corrupt(file, std::string("not a ") + kind.name + " file");
  if (version != kind.version)
    return make_error(ErrorCategory::bad_input, "tune_cache.stale",
                      file.string() + ": version " + std::to_string(version) + ", not " + std::to_string(kind.version));
  lines.ignore(1);
  std::getline(lines, id);
  if (id != "identity " + identity)
    return make_error(ErrorCategory::bad_input, "tune_cache.stale", file.string() + ": made for another " + kind.foreign);
  std::vector<std::string> rest;
  for (std::string line; std::getline(lines, line);) rest.push_back(line);
  return rest;
}

// Writes the header, `entries` (whole lines) and the checksum to a temporary name, then renames it,
// so that a reader never sees half a file and a failed write leaves nothing under the real name.
Status write_signed(const fs::path& file, const FileKind& kind, const std::string& identity, const std::string& entries) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) return make_error(ErrorCategory::io, "file.write", file.parent_path().string() + ": " + ec.message());
  std::string text = std::string(kind.magic) + ' ' + std::to_string(kind.version) + "\nidentity " + identity + '\n' + entries;
  text += "xxh3 " + hex64(XXH3_64bits(text.data(), text.size())) + "\n";
  const fs::path tmp = file.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return make_error(ErrorCategory::io, "file.write", tmp.string() + ": cannot be written (disk full?)");
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    return make_error(ErrorCategory::io, "file.write", file.string() + ": " + why);
  }
  return ok_status();
}

// The whole word or nothing: from_chars is also locale-independent, unlike strtod and printf, so a
// file written under one locale reads under another.
template <typename T>
bool parse_word(const std::string& word, T& v) {
  const char* const stop = word.data() + word.size();
  const auto [ptr, ec] = std::from_chars(word.data(), stop, v);
  return ec == std::errc() && ptr == stop && !word.empty();
}

// The shortest text that reads back as the same double (at most 24 characters, so buf suffices).
std::string exact(double v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

}  // namespace

// Next to the quantized-weight cache: the same root ($COSMOS_CACHE_DIR, $XDG_CACHE_HOME/cosmos-chat
// or ~/.cache/cosmos-chat).
fs::path default_tune_cache_dir() { return default_quant_cache_dir().parent_path() / "gemm-tuning"; }

fs::path tune_cache_path(const fs::path& dir, const std::string& identity) { return path_for(kGemm, dir, identity); }

Result<std::vector<TuneCacheEntry>> read_tune_cache(const fs::path& file, const std::string& identity) {
  auto lines = read_signed(file, kGemm, identity);
  if (!lines) return lines.error();
  std::vector<TuneCacheEntry> entries;
  for (const std::string& line : *lines) {
    std::istringstream f(line);
    TuneCacheEntry e;
    for (int& k : e.key)
      if (!(f >> k)) return corrupt(file, "a line that does not parse: " + line);
    for (std::uint64_t& w : e.algo) {
      std::string word;
      if (!(f >> word) || word.size() != 16) return corrupt(file, "a line that does not parse: " + line);
      char* stop = nullptr;
      w = std::strtoull(word.c_str(), &stop, 16);
      if (*stop != '\0') return corrupt(file, "a line that does not parse: " + line);
    }
    std::string extra;
    if (f >> extra) return corrupt(file, "a line that does not parse: " + line);
    entries.push_back(e);
  }
  return entries;
}

Status write_tune_cache(const fs::path& file, const std::string& identity, const std::vector<TuneCacheEntry>& entries) {
  std::ostringstream out;
  for (const TuneCacheEntry& e : entries) {
    for (const int k : e.key) out << k << ' ';
    for (std::size_t i = 0; i < e.algo.size(); ++i) out << hex64(e.algo[i]) << (i + 1 < e.algo.size() ? ' ' : '\n');
  }
  return write_signed(file, kGemm, identity, out.str());
}

fs::path decode_tune_path(const fs::path& dir, const std::string& identity) { return path_for(kDecode, dir, identity); }

Result<DecodeTuneRecord> read_decode_tune(const fs::path& file, const std::string& identity) {
  auto lines = read_signed(file, kDecode, identity);
  if (!lines) return lines.error();
  // The spec line is required even for the automatic plan ("spec -"), so that a file cut short
  // behind a forged checksum cannot pass for "the automatic plan won".
  if (lines->empty() || lines->front().rfind("spec ", 0) != 0) return corrupt(file, "no spec line");
  DecodeTuneRecord record;
  record.spec = lines->front().substr(5);
  if (record.spec.empty() || record.spec.find_first_of(" \t\r\n\v\f") != std::string::npos)
    return corrupt(file, "a spec line that does not parse: " + lines->front());
  if (record.spec == "-") record.spec.clear();
  for (std::size_t i = 1; i < lines->size(); ++i) {
    const std::string& line = (*lines)[i];
    std::istringstream f(line);
    std::string kind, context, base, tuned, extra;
    DecodeTuneDepth d;
    if (!(f >> kind >> context >> base >> tuned) || (f >> extra) || kind != "depth" || !parse_word(context, d.depth) ||
        !parse_word(base, d.base_us) || !parse_word(tuned, d.tuned_us))
      return corrupt(file, "a line that does not parse: " + line);
    record.depths.push_back(d);
  }
  return record;
}

Status write_decode_tune(const fs::path& file, const std::string& identity, const DecodeTuneRecord& record) {
  // "-" stands for the empty spec, so a spec that is "-" itself would read back as empty.
  if (record.spec == "-" || record.spec.find_first_of(" \t\r\n\v\f") != std::string::npos)
    return make_error(ErrorCategory::bad_input, "tune_cache.spec",
                      file.string() + ": the spec \"" + record.spec + "\" cannot be kept (whitespace or \"-\")");
  std::string text = "spec " + (record.spec.empty() ? std::string("-") : record.spec) + '\n';
  for (const DecodeTuneDepth& d : record.depths)
    text += "depth " + std::to_string(d.depth) + ' ' + exact(d.base_us) + ' ' + exact(d.tuned_us) + '\n';
  return write_signed(file, kDecode, identity, text);
}

}  // namespace cosmos
