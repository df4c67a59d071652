// Read-only memory mapping of a whole file with POSIX open/fstat/mmap.
//
// The mapping is MAP_PRIVATE | PROT_READ: the engine never writes through it. The descriptor is
// closed right after mmap (the mapping keeps the file alive). Note that a file truncated by another
// process while mapped raises SIGBUS on access; that is a property of mmap, not something this class
// can detect.
#include "cosmos/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace cosmos {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

Error open_error(const std::filesystem::path& path, const char* what, int err) {
  // A file that is not there (or a path through a non-folder) is the user's input being wrong;
  // anything else (permissions, I/O, limits) is the operating system refusing.
  if (err == ENOENT || err == ENOTDIR) {
    return make_error(ErrorCategory::bad_input, "file.missing",
                      "cannot open " + path.string() + ": " + errno_text(err));
  }
  return make_error(ErrorCategory::io, "file.open",
                    std::string(what) + " " + path.string() + ": " + errno_text(err));
}

// Closes a descriptor on every return path.
struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::~MappedFile() {
  if (data_ != nullptr && size_ > 0) {
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr && size_ > 0) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  FdGuard guard;
  do {
    guard.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (guard.fd < 0 && errno == EINTR);
  if (guard.fd < 0) return open_error(path, "cannot open", errno);

  struct stat st {};
  if (::fstat(guard.fd, &st) != 0) return open_error(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorCategory::io, "file.open",
                      "cannot map " + path.string() + ": not a regular file");
  }

  MappedFile file;
  file.path_ = path;
  if (st.st_size == 0) return file;  // empty file: empty span, nothing to map

  const auto size = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, guard.fd, 0);
  if (p == MAP_FAILED) return open_error(path, "cannot map", errno);
  file.data_ = static_cast<const std::byte*>(p);
  file.size_ = size;
  return file;
}

bool prefault_read(const std::byte* p, std::size_t bytes) {
#if defined(MADV_POPULATE_READ)
  if (p == nullptr || bytes == 0) return true;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(p) + bytes;
  return ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ) == 0;
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

}  // namespace cosmos
