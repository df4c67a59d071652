#include "cpu/cpu_ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "simd_clones.h"

namespace cosmos::cpu {

namespace {

COSMOS_SIMD_CLONES float dot(const float* a, const float* b, std::int64_t n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (std::int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

}  // namespace

COSMOS_SIMD_CLONES void load_row(const WeightView& w, std::int64_t row, float* dst) {
  if (w.quant) {
    dequantize_row(*w.quant, row, dst);
    return;
  }
  const std::int64_t n = w.cols;
  switch (w.dtype) {
    case DType::bf16: {
      const auto* src = reinterpret_cast<const std::uint16_t*>(w.data) + row * n;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t bits = static_cast<std::uint32_t>(src[i]) << 16;
        std::memcpy(dst + i, &bits, 4);
      }
      break;
    }
    case DType::f16: {
      const auto* src = reinterpret_cast<const _Float16*>(w.data) + row * n;
      for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
      break;
    }
    default: {  // f32 (the loader admits only bf16, f16, f32)
      std::memcpy(dst, reinterpret_cast<const float*>(w.data) + row * n, n * sizeof(float));
      break;
    }
  }
}

void matmul(const float* x, const WeightView& w, const float* bias, float* y, int n, int threads) {
  const std::int64_t out = w.rows, in = w.cols;
  if (w.quant && n == 1) {
    // One token, quantized weights: each row's products straight from its quantized bytes (no fp32
    // copy of the row: a quarter to an eighth of the memory traffic of converting it first).
    Int4DotInput prep;  // int4: x's group sums and even / odd columns, once for all rows
    if (w.quant->format == QuantFormat::int4_group) prep = prepare_int4_dot(x, in);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t o = 0; o < out; ++o) y[o] = quant_row_dot(*w.quant, o, x, &prep) + (bias ? bias[o] : 0.0f);
    return;
  }
  // Each thread converts one weight row at a time to fp32 and dots it with every input row, so
  // each weight byte is read once per call whatever n is.
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> row(in);  // [in] fp32 copy of one weight row
#pragma omp for schedule(static)
    for (std::int64_t o = 0; o < out; ++o) {
      load_row(w, o, row.data());
      const float bias_o = bias ? bias[o] : 0.0f;
      for (int t = 0; t < n; ++t) {
        y[static_cast<std::int64_t>(t) * out + o] = dot(x + static_cast<std::int64_t>(t) * in, row.data(), in) + bias_o;
      }
    }
  }
}

void rms_norm(const float* x, const float* weight, float* y, int n, int d, float eps) {
  for (int t = 0; t < n; ++t) {
    const float* xt = x + static_cast<std::int64_t>(t) * d;
    float* yt = y + static_cast<std::int64_t>(t) * d;
    float ss = 0.0f;
    for (int i = 0; i < d; ++i) ss += xt[i] * xt[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
    for (int i = 0; i < d; ++i) yt[i] = weight[i] * (xt[i] * inv);
  }
}

void silu_mul(const float* gate, const float* up, float* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void apply_rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<std::int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      // x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i + half] + a * sin[i + half];
    }
  }
}

}  // namespace cosmos::cpu
