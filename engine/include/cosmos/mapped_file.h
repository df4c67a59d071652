// A read-only memory-mapped file (RAII). Empty files map to an empty span.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "cosmos/error.h"

namespace cosmos {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Result<MappedFile> open(const std::filesystem::path& path);

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::filesystem::path path_;
};

// Asks the kernel to map the pages holding [p, p + bytes) of a mapping now, in one call
// (MADV_POPULATE_READ, Linux 5.14), instead of one fault per 64 KB as a pass over them reads on.
// Loading the 7B checkpoint into int4 on the CPU backend: ~0.5-1.4 s of ~11.5 s saved
// (docs/PERFORMANCE.md, session 51). A hint: where the kernel lacks it, nothing changes but speed.
// Returns whether the kernel did it.
bool prefault_read(const std::byte* p, std::size_t bytes);

}  // namespace cosmos
