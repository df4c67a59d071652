#include "cosmos/dtype.h"

#include <array>
#include <utility>

namespace cosmos {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeInfo, 12> kTypes{{
    {DType::bf16, "BF16", 2},   {DType::f16, "F16", 2},          {DType::f32, "F32", 4},
    {DType::f64, "F64", 8},     {DType::i8, "I8", 1},            {DType::u8, "U8", 1},
    {DType::i16, "I16", 2},     {DType::i32, "I32", 4},          {DType::i64, "I64", 8},
    {DType::f8_e4m3, "F8_E4M3", 1}, {DType::f8_e5m2, "F8_E5M2", 1}, {DType::boolean, "BOOL", 1},
}};

}  // namespace

std::size_t dtype_size(DType t) {
  for (const auto& info : kTypes)
    if (info.type == t) return info.size;
  return 0;
}

std::string_view dtype_name(DType t) {
  for (const auto& info : kTypes)
    if (info.type == t) return info.name;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kTypes)
    if (info.name == name) return info.type;
  return std::nullopt;
}

}  // namespace cosmos
