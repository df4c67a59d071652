// The safetensors format: 8-byte little-endian header length N, N bytes of JSON header
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}), then the data.
// Every malformed input is a specific Error (code "safetensors.*"), never a crash or an
// out-of-bounds read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "cosmos/dtype.h"
#include "cosmos/error.h"
#include "cosmos/mapped_file.h"

namespace cosmos {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // from the start of the file (8 + N + data_offsets[0])
  std::uint64_t nbytes = 0;  // data_offsets[1] - data_offsets[0] == prod(shape) * dtype_size
  std::uint64_t numel() const;
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in file order (sorted by offset)
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;     // 8 + N
};

// Parses and validates the header of a whole safetensors file given as bytes. `label` names the
// file in error messages. Error codes:
//   safetensors.too_small        file shorter than the 8-byte length prefix
//   safetensors.header_length    header length past the end of the file (or absurdly large)
//   safetensors.header_json      header is not valid UTF-8 JSON object
//   safetensors.tensor_entry     an entry lacks dtype/shape/data_offsets or has wrong types
//                                (also: "__metadata__" not an object of strings)
//   safetensors.dtype            unknown dtype string
//   safetensors.size_mismatch    prod(shape) * dtype size != end - begin
//   safetensors.offsets          begin > end, or an offset beyond the data section
//   safetensors.overlap          two tensors share bytes
//   safetensors.truncated        tensors tile the data section but the file ends early
Result<SafetensorsHeader> parse_safetensors(std::span<const std::byte> file_bytes, const std::string& label);

// One memory-mapped safetensors file.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::filesystem::path& path);

  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* find(std::string_view name) const;
  std::span<const std::byte> data(const TensorInfo& t) const;
  const std::filesystem::path& path() const { return file_.path(); }
  std::uint64_t file_size() const { return file_.size(); }

 private:
  MappedFile file_;
  SafetensorsHeader header_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// Writes a safetensors file (used by make-test-model and by tests that build malformed files).
struct TensorToWrite {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;  // prod(shape) * dtype_size bytes
};
Status write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace cosmos
