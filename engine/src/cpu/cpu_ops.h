// fp32 math over bf16/f16/f32 weights for the CPU reference backend. Each op is parallel over
// output rows (OpenMP, `threads` wide). Numerics follow Hugging Face's float32 path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "cosmos/dtype.h"
#include "cosmos/quant.h"

namespace cosmos::cpu {

// A weight tensor: rows x cols of `dtype` in place (memory-mapped from the checkpoint), or, when
// `quant` is set, the quantized copy it points to (cosmos/quant.h; data and dtype then unused).
struct WeightView {
  const std::byte* data = nullptr;
  DType dtype = DType::bf16;
  std::int64_t rows = 0, cols = 0;  // cols == 1 row length for vectors (rows = 1)
  const QuantizedMatrix* quant = nullptr;
};

// The sum of a[i] * b[i] over [0, n) (vector partial sums: the order is the vector width's).
float dot(const float* a, const float* b, std::int64_t n);

// y[0, n) += a * x[0, n).
void axpy(float a, const float* x, float* y, std::int64_t n);

// dot and axpy with an int8 operand (the int8 KV cache, cosmos/kv_format.h; its scale is applied
// by the caller): the int8 values are exact in fp32.
float dot_i8(const float* a, const std::int8_t* b, std::int64_t n);
void axpy_i8(float a, const std::int8_t* x, float* y, std::int64_t n);

// dst[0..n) = fp32 of src row `row` (n = cols); quantized weights are dequantized.
void load_row(const WeightView& w, std::int64_t row, float* dst);

// The kernel of matmul with several tokens: the widest block this CPU runs (4 rows x 6 tokens with
// AVX-512, else 4 x 4), or the portable 4 x 4 one whatever the CPU (for tests). One token with
// quantized weights takes neither: it reads the quantized rows one by one.
enum class BlockKernel { best, portable };

// y[n, out] = x[n, in] @ W^T (+ bias). W: [out, in]. bias: [out] fp32 or null.
void matmul(const float* x, const WeightView& w, const float* bias, float* y, int n, int threads,
            BlockKernel kernel = BlockKernel::best);

// y[n, d] = x * rsqrt(mean(x^2) + eps) * weight, per row (fp32 throughout).
void rms_norm(const float* x, const float* weight, float* y, int n, int d, float eps);

// out[n, d] = silu(gate) * up, elementwise.
void silu_mul(const float* gate, const float* up, float* out, std::size_t count);

// Rotary embedding, half-split (dim i pairs with i + head_dim/2), in place on [n_heads, head_dim].
// cos/sin: [head_dim] for this token.
void apply_rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin);

}  // namespace cosmos::cpu
