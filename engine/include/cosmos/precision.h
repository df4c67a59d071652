// Weight precisions (DESIGN.md §4).
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace cosmos {

enum class Precision { bf16, fp16, fp8, int8, int4 };
inline constexpr std::array<Precision, 5> kAllPrecisions{Precision::bf16, Precision::fp16, Precision::fp8,
                                                         Precision::int8, Precision::int4};

// From the most to the least accurate (measured weight error int8 < fp8 < int4: docs/PERFORMANCE.md):
// the order "auto" tries them in.
inline constexpr std::array<Precision, 5> kPrecisionsByAccuracy{Precision::bf16, Precision::fp16, Precision::int8,
                                                                Precision::fp8, Precision::int4};

std::string_view to_string(Precision p);
std::optional<Precision> precision_from_string(std::string_view name);

}  // namespace cosmos
