// libFuzzer target: parse_safetensors on arbitrary bytes must return (a header or an Error) without
// crashing, reading out of bounds or tripping UBSan; an accepted header must be self-consistent.
//
//   cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DCOSMOS_FUZZ=ON
//   ninja -C build/fuzz fuzz_safetensors_header
//   build/fuzz/bin/fuzz_safetensors_header -dict=tests/fuzz/safetensors.dict -max_total_time=60 \
//       /tmp/corpus tests/fuzz/corpus     (new inputs go to the first folder)
#include <cstddef>
#include <cstdint>
#include <span>

#include "cosmos/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // libFuzzer hands an exactly-sized heap buffer, so ASan flags any read past `size`.
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto r = cosmos::parse_safetensors(bytes, "fuzz-input");
  if (!r.ok()) {
    if (r.error().code.empty() || r.error().message.empty()) __builtin_trap();
    return 0;
  }
  const auto& h = r.value();
  if (h.data_start < 8 || h.data_start > size) __builtin_trap();
  std::uint64_t prev_offset = 0;
  for (const auto& t : h.tensors) {
    // Inside the file, in offset order, and sized by shape and dtype.
    if (t.offset < h.data_start || t.offset > size || t.nbytes > size - t.offset) __builtin_trap();
    if (t.offset < prev_offset) __builtin_trap();
    if (t.numel() * cosmos::dtype_size(t.dtype) != t.nbytes) __builtin_trap();
    for (auto d : t.shape)
      if (d < 0) __builtin_trap();
    prev_offset = t.offset;
    // Touch the first and last byte the header claims (ASan checks the access).
    if (t.nbytes > 0) {
      volatile std::uint8_t sink = data[t.offset] ^ data[t.offset + t.nbytes - 1];
      (void)sink;
    }
  }
  return 0;
}
