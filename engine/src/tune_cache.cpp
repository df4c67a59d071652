#include "cosmos/tune_cache.h"

#include <unistd.h>
#include <xxhash.h>

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

constexpr const char* kMagic = "cosmos-gemm-tune";

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

Error corrupt(const fs::path& file, const std::string& why) {
  return make_error(ErrorCategory::bad_input, "tune_cache.corrupt", file.string() + ": " + why);
}

// The file's text before its checksum line.
std::string body(const std::string& identity, const std::vector<TuneCacheEntry>& entries) {
  std::ostringstream out;
  out << kMagic << ' ' << kTuneCacheVersion << '\n' << "identity " << identity << '\n';
  for (const TuneCacheEntry& e : entries) {
    for (const int k : e.key) out << k << ' ';
    for (std::size_t i = 0; i < e.algo.size(); ++i) out << hex64(e.algo[i]) << (i + 1 < e.algo.size() ? ' ' : '\n');
  }
  return out.str();
}

}  // namespace

// Next to the quantized-weight cache: the same root ($COSMOS_CACHE_DIR, $XDG_CACHE_HOME/cosmos-chat
// or ~/.cache/cosmos-chat).
fs::path default_tune_cache_dir() { return default_quant_cache_dir().parent_path() / "gemm-tuning"; }

fs::path tune_cache_path(const fs::path& dir, const std::string& identity) {
  return dir / ("gemm-" + hex64(XXH3_64bits(identity.data(), identity.size())) + ".txt");
}

Result<std::vector<TuneCacheEntry>> read_tune_cache(const fs::path& file, const std::string& identity) {
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
  std::string magic, id_word, id;
  int version = 0;
  lines >> magic >> version;
  if (magic != kMagic) return corrupt(file, "not a GEMM tuning file");
  if (version != kTuneCacheVersion)
    return make_error(ErrorCategory::bad_input, "tune_cache.stale",
                      file.string() + ": version " + std::to_string(version) + ", not " +
                          std::to_string(kTuneCacheVersion));
  lines.ignore(1);
  std::getline(lines, id);
  if (id != "identity " + identity)
    return make_error(ErrorCategory::bad_input, "tune_cache.stale", file.string() + ": made for another GPU or library");
  std::vector<TuneCacheEntry> entries;
  std::string line;
  while (std::getline(lines, line)) {
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
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) return make_error(ErrorCategory::io, "file.write", file.parent_path().string() + ": " + ec.message());
  std::string text = body(identity, entries);
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

}  // namespace cosmos
