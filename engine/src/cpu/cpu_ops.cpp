#include "cpu/cpu_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "simd_clones.h"

// AVX-512 block kernels, picked at run time by the CPU, where the portable loops are built per CPU
// level too (simd_clones.h).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(COSMOS_NO_SIMD_CLONES)
#define COSMOS_AVX512_BLOCKS 1
#include <immintrin.h>
#else
#define COSMOS_AVX512_BLOCKS 0
#endif

namespace cosmos::cpu {

namespace {

// matmul with several tokens multiplies blocks of kRows weight rows by blocks of tokens, kChunk
// columns at a time, with every sum of a block a vector of partial sums in a register.
constexpr int kRows = 4;               // weight rows in a block
constexpr int kSub = 4;                // blocks of rows converted to fp32 together (one pass over x)
constexpr int kBlockRows = kSub * kRows;
constexpr int kTok = 4;                // tokens in a block of the portable kernel
constexpr int kMaxTok = 6;             // and the most of any kernel (AVX-512's)
constexpr std::int64_t kChunk = 1024;  // columns per pass

// A block kernel: part[r * tok + j] = sum over columns [c0, c0 + len) of w[r][c] * x[j][c] for
// r < kRows, j < tok (1 <= tok <= the kernel's width). w: [kRows] row pointers, x: [tok] token rows.
using BlockDot = void (*)(const float* const* w, const float* const* x, int tok, std::int64_t c0, std::int64_t len,
                          float* part);

// The portable kernel, 4 rows x 4 tokens: 16 sums over one pass of the columns, each a vector of
// partial sums in a register (the reduction clause), built per CPU level (simd_clones.h). AVX2's 16
// registers hold no larger block. Each load of x feeds four rows and each load of a row four tokens.
COSMOS_SIMD_CLONES void block_dot_4x4(const float* const (&w)[kRows], const float* const (&x)[kTok], std::int64_t c0,
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

// BlockDot for up to kTok tokens: a narrower block repeats its last token (those sums are dropped).
void block_dot_portable(const float* const* w, const float* const* x, int tok, std::int64_t c0, std::int64_t len,
                        float* part) {
  const float* const wr[kRows] = {w[0], w[1], w[2], w[3]};
  const float* const xt[kTok] = {x[0], x[std::min(1, tok - 1)], x[std::min(2, tok - 1)], x[std::min(3, tok - 1)]};
  float sums[kRows * kTok];  // [kRows, kTok]
  block_dot_4x4(wr, xt, c0, len, sums);
  for (int r = 0; r < kRows; ++r) std::copy_n(sums + r * kTok, tok, part + r * tok);
}

#if COSMOS_AVX512_BLOCKS
// out[k] = the sum of the 16 lanes of a_k, k < 4, as a tree over the four vectors (8 shuffles and
// 6 adds for four sums). The masked forms of the shuffles, with every lane selected, name their
// pass-through operand: the unmasked ones pass _mm512_undefined_ps, on which GCC 12 warns.
__attribute__((target("avx512f"))) inline void sum_lanes4(__m512 a0, __m512 a1, __m512 a2, __m512 a3, float* out) {
  constexpr __mmask16 all = 0xFFFF;
  // 256-bit halves: [a0 lo + a0 hi, a1 lo + a1 hi] and likewise a2, a3 (8 partial sums each)
  const __m512 s01 = _mm512_add_ps(_mm512_mask_shuffle_f32x4(a0, all, a0, a1, 0x44), _mm512_mask_shuffle_f32x4(a0, all, a0, a1, 0xEE));
  const __m512 s23 = _mm512_add_ps(_mm512_mask_shuffle_f32x4(a2, all, a2, a3, 0x44), _mm512_mask_shuffle_f32x4(a2, all, a2, a3, 0xEE));
  // 128-bit quarters: lanes 4k..4k+3 hold 4 partial sums of a_k
  __m512 q = _mm512_add_ps(_mm512_mask_shuffle_f32x4(s01, all, s01, s23, 0x88), _mm512_mask_shuffle_f32x4(s01, all, s01, s23, 0xDD));
  q = _mm512_add_ps(q, _mm512_mask_permute_ps(q, all, q, 0x4E));  // pairs within each quarter
  q = _mm512_add_ps(q, _mm512_mask_permute_ps(q, all, q, 0xB1));  // every lane of quarter k: sum of a_k
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, q);
  for (int k = 0; k < 4; ++k) out[k] = lanes[4 * k];
}

// AVX-512 (32 registers): 4 rows x T tokens, T <= 6, with the 4 T sums in zmm registers (24 at T = 6,
// plus the 4 rows' vectors and a token's: 29), 16 columns a step and the last ones under a mask.
// A step loads 4 + T vectors for 4 T multiply-adds (10 per 24 at T = 6; 4 x 4: 8 per 16).
// Each row's chunk, from L2, feeds T tokens (4 x 4: 4); the tokens' chunk stays in L1.
template <int T>
__attribute__((target("avx512f"))) void block_dot_avx512(const float* const* w, const float* const* x,
                                                          std::int64_t c0, std::int64_t len, float* part) {
  __m512 acc[kRows][T];  // acc[r][j]: 16 partial sums of row r times token j
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 6
    for (int j = 0; j < T; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  const std::int64_t end = c0 + len;
  for (std::int64_t i = c0; i < end; i += 16) {
    const __mmask16 m = end - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (end - i)) - 1);  // lanes in range
    __m512 wv[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) wv[r] = _mm512_maskz_loadu_ps(m, w[r] + i);
#pragma GCC unroll 6
    for (int j = 0; j < T; ++j) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x[j] + i);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) acc[r][j] = _mm512_fmadd_ps(wv[r], xv, acc[r][j]);
    }
  }
#pragma GCC unroll 6
  for (int j = 0; j < T; ++j) {
    float sums[kRows];
    sum_lanes4(acc[0][j], acc[1][j], acc[2][j], acc[3][j], sums);
    for (int r = 0; r < kRows; ++r) part[r * T + j] = sums[r];
  }
}

// One token times 4 bf16 rows: block_dot_avx512<1>'s operations in its order (the same bits), with
// each row read straight from the checkpoint and widened in registers (bf16 -> fp32 is exact), so
// a one-token step reads 2 bytes a weight and writes no fp32 copy. Each row's bytes are asked for
// kAhead columns before they are reached (the hardware prefetcher alone keeps too few reads in
// flight: quant_dot_x86.cpp). w: [kRows] rows, x: [len] from c0, part: [kRows].
__attribute__((target("avx512f,avx512bw,avx512vl"))) void dot4_bf16_avx512(const std::uint16_t* const* w, const float* x,
                                                                              std::int64_t c0, std::int64_t len, float* part) {
  constexpr std::int64_t kAhead = 2048;  // columns (4 KB)
  constexpr __mmask16 all = 0xFFFF;
  __m512 acc[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  const std::int64_t end = c0 + len;
  for (std::int64_t i = c0; i < end; i += 16) {
    const __mmask16 m = end - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (end - i)) - 1);  // lanes in range
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      if ((i & 31) == 0) _mm_prefetch(reinterpret_cast<const char*>(w[r] + i + kAhead), _MM_HINT_T0);  // a line per 32 columns
      // (the maskz forms, all lanes: the plain ones pass _mm512_undefined_epi32, on which GCC 12 warns)
      const __m512i wide = _mm512_maskz_cvtepu16_epi32(all, _mm256_maskz_loadu_epi16(m, w[r] + i));
      const __m512i bits = _mm512_maskz_slli_epi32(all, wide, 16);
      acc[r] = _mm512_fmadd_ps(_mm512_castsi512_ps(bits), xv, acc[r]);
    }
  }
  sum_lanes4(acc[0], acc[1], acc[2], acc[3], part);
}

// BlockDot for up to kMaxTok tokens: the kernel of exactly that width.
__attribute__((target("avx512f"))) void block_dot_avx512_any(const float* const* w, const float* const* x, int tok,
                                                              std::int64_t c0, std::int64_t len, float* part) {
  switch (tok) {
    case 1: block_dot_avx512<1>(w, x, c0, len, part); break;
    case 2: block_dot_avx512<2>(w, x, c0, len, part); break;
    case 3: block_dot_avx512<3>(w, x, c0, len, part); break;
    case 4: block_dot_avx512<4>(w, x, c0, len, part); break;
    case 5: block_dot_avx512<5>(w, x, c0, len, part); break;
    default: block_dot_avx512<6>(w, x, c0, len, part); break;
  }
}
#endif

struct BlockKernelChoice {
  BlockDot dot;
  int width;  // tokens per block (the last block of a product may have fewer)
};

BlockKernelChoice choose_block_kernel(BlockKernel which) {
#if COSMOS_AVX512_BLOCKS
  if (which == BlockKernel::best && __builtin_cpu_supports("avx512f")) return {block_dot_avx512_any, kMaxTok};
#else
  (void)which;
#endif
  return {block_dot_portable, kTok};
}

// acc[r * n + t] = sum over columns of rows[r] * x[t] for r < nr (nr <= kBlockRows), t < n: for each
// chunk of columns and each block of tokens (its chunk stays in L1), every block of kRows rows
// (their chunk comes from L2). x, which a long prompt keeps in L3, is read once per kBlockRows rows.
// rows: [nr, in] fp32; x: [n, in]; acc: [kBlockRows, n].
void multiply_row_block(const float* rows, int nr, const float* x, int n, std::int64_t in, const BlockKernelChoice& k,
                        float* acc) {
  const int subs = (nr + kRows - 1) / kRows;
  const float* wr[kSub][kRows];  // a block past the last row repeats its first (those sums are dropped)
  for (int sb = 0; sb < subs; ++sb) {
    for (int r = 0; r < kRows; ++r) wr[sb][r] = rows + static_cast<std::int64_t>(sb * kRows + r < nr ? sb * kRows + r : sb * kRows) * in;
  }
  std::fill(acc, acc + static_cast<std::size_t>(kBlockRows) * n, 0.0f);
  for (std::int64_t c0 = 0; c0 < in; c0 += kChunk) {
    const std::int64_t len = std::min(kChunk, in - c0);
    for (int t0 = 0; t0 < n; t0 += k.width) {
      const int tok = std::min(k.width, n - t0);
      const float* xt[kMaxTok];  // [tok] token rows
      for (int j = 0; j < tok; ++j) xt[j] = x + static_cast<std::int64_t>(t0 + j) * in;
      for (int sb = 0; sb < subs; ++sb) {
        float part[kRows * kMaxTok];  // [kRows, tok]
        k.dot(wr[sb], xt, tok, c0, len, part);
        for (int r = 0; r < kRows; ++r) {
          float* a = acc + static_cast<std::int64_t>(sb * kRows + r) * n + t0;
          for (int j = 0; j < tok; ++j) a[j] += part[r * tok + j];
        }
      }
    }
  }
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

COSMOS_SIMD_CLONES float dot_i8(const float* a, const std::int8_t* b, std::int64_t n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (std::int64_t i = 0; i < n; ++i) acc += a[i] * static_cast<float>(b[i]);
  return acc;
}

COSMOS_SIMD_CLONES void axpy_i8(float a, const std::int8_t* x, float* y, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) y[i] += a * static_cast<float>(x[i]);
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
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(src[i]) << 16);
      break;
    }
    case DType::f16: {
      const auto* src = reinterpret_cast<const _Float16*>(w.data) + row * n;
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
      break;
    }
    default: {  // f32 (the loader admits only bf16, f16, f32)
      std::memcpy(dst, reinterpret_cast<const float*>(w.data) + row * n, n * sizeof(float));
      break;
    }
  }
}

namespace {

// matmul for one token with quantized weights: each row's products straight from its quantized
// bytes (no fp32 copy of the row: a quarter to an eighth of the memory traffic of converting it
// first), each row read once, at memory speed.
void matmul_one_token_quant(const float* x, const WeightView& w, const float* bias, float* y, int threads) {
  const std::int64_t out = w.rows, in = w.cols;
  Int4DotInput prep;  // int4: x's group sums and even / odd columns, once for all rows
  if (w.quant->format == QuantFormat::int4_group) prep = prepare_int4_dot(x, in);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t o = 0; o < out; ++o) y[o] = quant_row_dot(*w.quant, o, x, &prep) + (bias ? bias[o] : 0.0f);
}

// matmul for one token with bf16 / fp16 / fp32 weights where only the portable block kernel runs:
// each row converted and read once (the 4 x 4 kernel would compute its one token 4 times).
void matmul_one_token_rows(const float* x, const WeightView& w, const float* bias, float* y, int threads) {
  const std::int64_t out = w.rows, in = w.cols;
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> row(in);  // [in] fp32 copy of one weight row
#pragma omp for schedule(static)
    for (std::int64_t o = 0; o < out; ++o) {
      load_row(w, o, row.data());
      y[o] = dot(x, row.data(), in) + (bias ? bias[o] : 0.0f);
    }
  }
}

// matmul for several tokens (a prompt, a batch): each thread converts kBlockRows weight rows at a
// time to fp32 (each weight byte is read once per call whatever n is) and multiplies them with all
// tokens (multiply_row_block). int4 rows are dequantized in group-split order (cosmos/quant.h: a
// loop that vectorizes), so x is put in that order too.
void matmul_tokens(const float* x, const WeightView& w, const float* bias, float* y, int n, int threads,
                   BlockKernel which) {
  const std::int64_t out = w.rows, in = w.cols;
  std::vector<float> x_split;  // [n, in] x in group-split order (int4 only)
  if (w.quant && w.quant->format == QuantFormat::int4_group) {
    x_split.resize(static_cast<std::size_t>(n) * in);
    for (int t = 0; t < n; ++t) split_group_order(x + static_cast<std::int64_t>(t) * in, in, x_split.data() + static_cast<std::int64_t>(t) * in);
    x = x_split.data();
  }
  const BlockKernelChoice kernel = choose_block_kernel(which);
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> rows(static_cast<std::size_t>(kBlockRows) * in);  // [kBlockRows, in] fp32 copy of a block of weight rows
    std::vector<float> acc(static_cast<std::size_t>(kBlockRows) * n);    // [kBlockRows, n] their sums
#pragma omp for schedule(static)
    for (std::int64_t o0 = 0; o0 < out; o0 += kBlockRows) {
      const int nr = static_cast<int>(std::min<std::int64_t>(kBlockRows, out - o0));
      for (int r = 0; r < nr; ++r) {
        float* dst = rows.data() + static_cast<std::int64_t>(r) * in;
        if (w.quant) dequantize_row_split(*w.quant, o0 + r, dst);
        else load_row(w, o0 + r, dst);
      }
      multiply_row_block(rows.data(), nr, x, n, in, kernel, acc.data());
      for (int t = 0; t < n; ++t) {
        for (int r = 0; r < nr; ++r) y[static_cast<std::int64_t>(t) * out + o0 + r] = acc[static_cast<std::size_t>(r) * n + t] + (bias ? bias[o0 + r] : 0.0f);
      }
    }
  }
}

#if COSMOS_AVX512_BLOCKS
bool bf16_one_token_avx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return ok;
}

// matmul for one token with bf16 weights on AVX-512: the rows in blocks of 4 over chunks of kChunk
// columns, each row's chunk sums added in order as multiply_row_block adds them, so y is the bits
// matmul_tokens gives this token alone or in a batch (test_cpu_matmul checks it).
void matmul_one_token_bf16(const float* x, const WeightView& w, const float* bias, float* y, int threads) {
  const std::int64_t out = w.rows, in = w.cols;
  const auto* base = reinterpret_cast<const std::uint16_t*>(w.data);  // [out, in] bf16 bits
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t o0 = 0; o0 < out; o0 += kRows) {
    const int nr = static_cast<int>(std::min<std::int64_t>(kRows, out - o0));
    const std::uint16_t* rows[kRows];  // past the last row: the block's first again (sums dropped)
    for (int r = 0; r < kRows; ++r) rows[r] = base + (o0 + (r < nr ? r : 0)) * in;
    float acc[kRows] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (std::int64_t c0 = 0; c0 < in; c0 += kChunk) {
      float part[kRows];
      dot4_bf16_avx512(rows, x, c0, std::min(kChunk, in - c0), part);
      for (int r = 0; r < kRows; ++r) acc[r] += part[r];
    }
    for (int r = 0; r < nr; ++r) y[o0 + r] = acc[r] + (bias ? bias[o0 + r] : 0.0f);
  }
}
#endif

}  // namespace

void matmul(const float* x, const WeightView& w, const float* bias, float* y, int n, int threads, BlockKernel kernel) {
  // bf16 / fp16 / fp32 weights take the AVX-512 block kernels for one token too: a token's sums are
  // then the same bits alone and in a batch (each sum its own chain of additions in a fixed order,
  // the same in every block width), so several answers generated at once equal each one generated
  // alone (test_real_chat_engine_answers). The rows are still read once per call; bf16 ones
  // straight from the checkpoint (matmul_one_token_bf16, the same sums). (With the
  // portable kernel one token reads the rows one by one, as its omp simd sums over a whole row; the
  // 4 x 4 block's sums agree with them for rows of up to one chunk, as on the tiny test model.)
#if COSMOS_AVX512_BLOCKS
  if (n == 1 && !w.quant && w.dtype == DType::bf16 && kernel == BlockKernel::best && bf16_one_token_avx512()) {
    matmul_one_token_bf16(x, w, bias, y, threads);
    return;
  }
#endif
  if (n == 1 && (w.quant || choose_block_kernel(kernel).width == kTok)) {
    if (w.quant) matmul_one_token_quant(x, w, bias, y, threads);
    else matmul_one_token_rows(x, w, bias, y, threads);
  } else {
    matmul_tokens(x, w, bias, y, n, threads, kernel);
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
