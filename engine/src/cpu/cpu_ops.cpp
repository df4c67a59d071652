#include "cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "simd_clones.h"

namespace cosmos::cpu {

namespace {

constexpr int kRows = 4, kTok = 4;    // matmul's block of weight rows times tokens
constexpr int kSub = 4;                // and of those blocks per pass over x
constexpr std::int64_t kChunk = 1024;  // and its columns per pass

// part[r * kTok + j] = sum over columns [c0, c0 + len) of w[r] * x[j]: 16 sums over one pass of
// the columns, each a vector of partial sums in a register (the reduction clause).
COSMOS_SIMD_CLONES void block_dot(const float* const (&w)[kRows], const float* const (&x)[kTok], std::int64_t c0,
                                  std::int64_t len, float* part) {
  const float *w0 = w[0] + c0, *w1 = w[1] + c0, *w2 = w[2] + c0, *w3 = w[3] + c0;
  const float *x0 = x[0] + c0, *x1 = x[1] + c0, *x2 = x[2] + c0, *x3 = x[3] + c0;
  float a00 = 0, a01 = 0, a02 = 0, a03 = 0, a10 = 0, a11 = 0, a12 = 0, a13 = 0;
  float a20 = 0, a21 = 0, a22 = 0, a23 = 0, a30 = 0, a31 = 0, a32 = 0, a33 = 0;
#pragma omp simd reduction(+ : a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33)
  for (std::int64_t i = 0; i < len; ++i) {
    const float v0 = x0[i], v1 = x1[i], v2 = x2[i], v3 = x3[i];
    a00 += w0[i] * v0, a01 += w0[i] * v1, a02 += w0[i] * v2, a03 += w0[i] * v3;
    a10 += w1[i] * v0, a11 += w1[i] * v1, a12 += w1[i] * v2, a13 += w1[i] * v3;
    a20 += w2[i] * v0, a21 += w2[i] * v1, a22 += w2[i] * v2, a23 += w2[i] * v3;
    a30 += w3[i] * v0, a31 += w3[i] * v1, a32 += w3[i] * v2, a33 += w3[i] * v3;
  }
  const float sums[kRows * kTok] = {a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33};
  std::copy_n(sums, kRows * kTok, part);
}

}  // namespace

COSMOS_SIMD_CLONES float dot(const float* a, const float* b, std::int64_t n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (std::int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

COSMOS_SIMD_CLONES void axpy(float a, const float* x, float* y, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

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
  if (n == 1) {  // one token, bf16 / fp16 / fp32 weights: one row at a time, read at memory speed
#pragma omp parallel num_threads(threads)
    {
      std::vector<float> row(in);  // [in] fp32 copy of one weight row
#pragma omp for schedule(static)
      for (std::int64_t o = 0; o < out; ++o) {
        load_row(w, o, row.data());
        y[o] = dot(x, row.data(), in) + (bias ? bias[o] : 0.0f);
      }
    }
    return;
  }
  // Several tokens (a prompt, a batch): each thread converts a block of kSub x kRows weight rows to
  // fp32 (each weight byte is read once per call whatever n is) and multiplies it with the tokens,
  // kChunk columns at a time: for each kTok tokens (their chunk, 16 KB, stays in L1) every kRows rows
  // of the block (their chunk, 16 KB, from L2). The 16 sums of a 4 x 4 block are vectors in registers
  // over a chunk: each load of x feeds four rows and each load of a row four tokens (8 loads per 16
  // multiply-adds, where a row times a token took 2 per 1); and x, which a long prompt keeps in L3
  // (n x 4 KB a chunk), is read once per 16 rows.
  // int4 rows are dequantized in group-split order (cosmos/quant.h: a loop that vectorizes), so x
  // is put in that order too.
  std::vector<float> x_split;  // [n, in] x in group-split order (int4 only)
  if (w.quant && w.quant->format == QuantFormat::int4_group) {
    x_split.resize(static_cast<std::size_t>(n) * in);
    for (int t = 0; t < n; ++t) split_group_order(x + static_cast<std::int64_t>(t) * in, in, x_split.data() + static_cast<std::int64_t>(t) * in);
    x = x_split.data();
  }
  constexpr int kBlockRows = kSub * kRows;
  const int blocks = (n + kTok - 1) / kTok;
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> rows(static_cast<std::size_t>(kBlockRows) * in);            // [kBlockRows, in] fp32 copy of a block of weight rows
    std::vector<float> acc(static_cast<std::size_t>(blocks) * kBlockRows * kTok);  // [blocks, kBlockRows, kTok] sums so far
#pragma omp for schedule(static)
    for (std::int64_t o0 = 0; o0 < out; o0 += kBlockRows) {
      const int nr = static_cast<int>(std::min<std::int64_t>(kBlockRows, out - o0));
      const int subs = (nr + kRows - 1) / kRows;
      for (int r = 0; r < nr; ++r) {
        float* dst = rows.data() + static_cast<std::int64_t>(r) * in;
        if (w.quant) dequantize_row_split(*w.quant, o0 + r, dst);
        else load_row(w, o0 + r, dst);
      }
      const float* wr[kSub][kRows];  // a sub-block past the last row repeats its first (those sums are dropped)
      for (int sb = 0; sb < subs; ++sb) {
        for (int r = 0; r < kRows; ++r) wr[sb][r] = rows.data() + static_cast<std::int64_t>(sb * kRows + r < nr ? sb * kRows + r : sb * kRows) * in;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t c0 = 0; c0 < in; c0 += kChunk) {
        const std::int64_t len = std::min(kChunk, in - c0);
        for (int b = 0; b < blocks; ++b) {
          const float* xt[kTok];  // likewise past the last token
          for (int j = 0; j < kTok; ++j) xt[j] = x + static_cast<std::int64_t>(std::min(b * kTok + j, n - 1)) * in;
          for (int sb = 0; sb < subs; ++sb) {
            float part[kRows * kTok];
            block_dot(wr[sb], xt, c0, len, part);
            float* a = acc.data() + (static_cast<std::size_t>(b) * kSub + sb) * kRows * kTok;
            for (int i = 0; i < kRows * kTok; ++i) a[i] += part[i];
          }
        }
      }
      for (int t = 0; t < n; ++t) {
        const float* a = acc.data() + static_cast<std::size_t>(t / kTok) * kBlockRows * kTok + t % kTok;
        for (int r = 0; r < nr; ++r) y[static_cast<std::int64_t>(t) * out + o0 + r] = a[r * kTok] + (bias ? bias[o0 + r] : 0.0f);
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
