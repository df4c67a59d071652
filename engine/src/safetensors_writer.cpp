// Writes safetensors files: the 8-byte little-endian header length, the JSON header (tensors in the
// order given, "__metadata__" first when present), space padding so the data starts at a multiple of
// 8 bytes, then the tensors' bytes back to back.
//
// The file is written to "<path>.tmp", flushed to disk and renamed over <path>, so a full disk or a
// crash never leaves a half-written file under the real name.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cosmos/safetensors.h"

namespace cosmos {
namespace {

Error write_error(const std::filesystem::path& path, const char* what, int err) {
  return make_error(ErrorCategory::io, "file.write",
                    std::string(what) + " " + path.string() + ": " + std::strerror(err));
}

// Writes all of `bytes`, retrying short writes and EINTR. Returns 0 or an errno value.
int write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

// The header JSON, padded with spaces so that 8 + size is a multiple of 8. Validates the tensors.
Result<std::string> build_header(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                                 const std::map<std::string, std::string>& metadata) {
  const auto bad = [&](const std::string& name, const std::string& msg) {
    return make_error(ErrorCategory::bad_input, "safetensors.write",
                      "cannot write " + path.string() + ": tensor '" + name + "': " + msg);
  };
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string, std::less<>> names;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__") return bad(t.name, "the name is reserved");
    if (!names.insert(t.name).second) return bad(t.name, "the name appears twice");
    std::uint64_t numel = 1;
    for (auto d : t.shape) {
      if (d < 0) return bad(t.name, "negative dimension");
      if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(d), &numel)) return bad(t.name, "too large");
    }
    std::uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(dtype_size(t.dtype)), &nbytes)) {
      return bad(t.name, "too large");
    }
    if (nbytes != t.data.size()) {
      return bad(t.name, "shape and dtype need " + std::to_string(nbytes) + " bytes but " +
                             std::to_string(t.data.size()) + " were given");
    }
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = std::string(dtype_name(t.dtype));
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + nbytes};
    header[t.name] = std::move(entry);
    offset += nbytes;
  }
  // Invalid UTF-8 in a name or metadata makes dump() throw; replace it rather than throw.
  std::string text = header.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  return text;
}

}  // namespace

Status write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                         const std::map<std::string, std::string>& metadata) {
  auto header = build_header(path, tensors, metadata);
  if (!header) return header.error();
  const std::string& text = header.value();

  unsigned char prefix[8];
  std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);

  std::filesystem::path tmp = path;
  tmp += ".tmp";
  int fd = -1;
  do {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return write_error(tmp, "cannot create", errno);

  int err = write_all(fd, prefix, sizeof prefix);
  if (!err) err = write_all(fd, text.data(), text.size());
  for (const auto& t : tensors) {
    if (err) break;
    err = write_all(fd, t.data.data(), t.data.size());
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  // close() can report a deferred write error (e.g. on network file systems).
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    return write_error(tmp, "cannot write", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return write_error(path, "cannot rename the finished file to", err);
  }
  return ok_status();
}

}  // namespace cosmos
