// quant_row_dot's int8, fp8 and int4 products written with x86-64 intrinsics (quant_dot_x86.cpp),
// for quant.cpp's dispatch.
#pragma once

#include <cstdint>
#include <optional>

#include "cosmos/quant.h"

namespace cosmos::quant_dot {

// Whether this CPU (and its operating system) runs `isa`; portable always.
bool cpu_has(QuantDotIsa isa);

// quant_row_dot(m, row, x, int4) on `isa`'s intrinsics (a level cpu_has() accepted); nullopt where
// they do not apply, for the portable loops to take: `isa` portable, a build for another
// architecture, or int4 rows that are not whole groups of 128 columns.
std::optional<float> row_dot(QuantDotIsa isa, const QuantizedMatrix& m, std::int64_t row, const float* x,
                             const Int4DotInput* int4);

}  // namespace cosmos::quant_dot
