// Element types of tensors on disk and in memory.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace cosmos {

enum class DType { bf16, f16, f32, f64, i8, u8, i16, i32, i64, f8_e4m3, f8_e5m2, boolean };

// Bytes per element.
std::size_t dtype_size(DType t);
// safetensors spelling: "BF16", "F16", "F32", "I8", "U8", "F8_E4M3", ...
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace cosmos
