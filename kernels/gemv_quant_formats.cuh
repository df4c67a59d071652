// kernels/gemv_quant.cu's kernel parameters (also those of kernels/gemv_q4_mma.cu) and its three
// weight formats (how a 16-byte vector of int8, fp8 or int4 weights meets its x values); see the
// top comment of gemv_quant.cu for the arithmetic. Included by those two files only.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/gemv_quant.cuh"
#include "kernels/quant_format.cuh"

namespace cosmos::kernels::qgemv {

struct QParams {
  const std::uint8_t* q;
  const float* row_scale;
  const std::uint16_t* gs;  // int4 group scales, bf16 bits
  const std::uint16_t* gm;  // int4 group minimums
  const float* x;
  const std::uint16_t* bias;  // bf16 bits
  const float* residual;      // may alias y: not restrict
  float* y;
  std::uint16_t* y16;      // SwiGLU: the outputs as bf16 bits here instead of y (QGemvArgs::y16), or null
  const std::uint16_t* g;  // norm weight, bf16 bits
  float eps;
  int rows, cols, outs;
  int items;      // vector path: warp items; element-wise path: outputs; tensor cores: 16-row tiles
  int half;       // swiglu: F (row offset of the up rows); else 0
  int row_bytes;  // bytes of q per row
  int groups;     // int4 groups per row
  int l2_next;    // vector path: prefetch the next item's rows into L2
  const float* xdiv;  // int4 o's wide kernel, 8-bit kSums: x holds the decode attention's sums, these their divisors (QGemvArgs::x_div)
};

// The fields every kernel shares, from the launch arguments (items, l2_next: the caller's).
inline QParams params_of(const QGemvArgs& a) {
  QParams p{};
  const int outs = a.swiglu ? a.rows / 2 : a.rows;
  p.q = a.w.q;
  p.row_scale = a.w.row_scale;
  p.gs = a.w.group_scale;
  p.gm = a.w.group_min;
  p.x = a.x16 ? reinterpret_cast<const float*>(a.x16) : a.x;  // (bf16 x: the kX16 kernels read it so)
  p.xdiv = a.x_div;
  p.bias = reinterpret_cast<const std::uint16_t*>(a.bias);
  p.residual = a.residual;
  p.y = a.y;
  p.y16 = reinterpret_cast<std::uint16_t*>(a.y16);
  p.g = reinterpret_cast<const std::uint16_t*>(a.norm_weight);
  p.eps = a.norm_eps;
  p.rows = a.rows;
  p.cols = a.cols;
  p.outs = outs;
  p.half = a.swiglu ? outs : 0;
  p.row_bytes = static_cast<int>(quant_row_bytes(a.w.kind, a.cols));
  p.groups = static_cast<int>(quant_groups(a.cols));
  return p;
}

// What a launch moves, in bytes: q, the scales (int4: a scale and a minimum per group), x, the norm
// weight, the bias, the residual and y.
inline std::size_t bytes_moved(const QGemvArgs& a) {
  const std::size_t r = static_cast<std::size_t>(a.rows), c = static_cast<std::size_t>(a.cols),
                    n = static_cast<std::size_t>(a.swiglu ? a.rows / 2 : a.rows);
  const std::size_t scales = a.w.kind == QuantKind::int4_group ? r * quant_groups(a.cols) * 4 : r * 4;
  return r * quant_row_bytes(a.w.kind, a.cols) + scales + c * (a.x16 ? 2 : 4) + (a.norm_weight ? c * 2 : 0) +
         (a.bias ? r * 2 : 0) + (a.residual ? n * 4 : 0) + n * (a.y16 ? 2 : 4) + (a.x_div ? 2 * quant_groups(a.cols) * 4 : 0);
}

__device__ __forceinline__ float bf16f(unsigned bits) { return __uint_as_float(bits << 16); }

// d = a * b + c, round to nearest, subnormal operands kept (no .ftz whatever the flags say).
__device__ __forceinline__ float fma_sub(float a, float b, float c) {
  float d;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
  return d;
}

__device__ __forceinline__ unsigned word(const uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}
__device__ __forceinline__ unsigned word(const uint2& v, int j) { return j == 0 ? v.x : v.y; }

// Formats. Vec: the load vector (16 bytes, or 8 for I4N) of kWords 32-bit words; kCols: columns per
// vector; kXW: float4s of x per 32-bit word; kVecPerGroup: vectors per int4 group of 128 columns;
// kPrescale: x is read pre-scaled by prescale() (staged so, or scaled as it is read), the weights
// being masked in place as fp32 subnormals (see the top comment of gemv_quant.cu); kOffset: the
// weights enter the sums offset by 128 (int8: q + 128), which the epilogue takes back as 128 sum(x);
// dot_word(): the products of one 32-bit word (columns 4j.. or 8j..) with their x values, added to d.
struct I8 {
  using Vec = uint4;
  static constexpr int kCols = 16, kXW = 1, kAlign = 16, kWords = 4, kVecPerGroup = 1;
  static constexpr bool kGroups = false, kPrescale = true, kOffset = true, kDp = false;
  // The pre-scale of x at column position k = column % 4: 2^(K - 8k) for the bytes masked in place
  // (k = 0, 1, 2) and 2^K for byte 3, shifted down to bits 0-7.
  __device__ static float4 prescale(float4 v, bool) {
    return make_float4(v.x * 0x1p96f, v.y * 0x1p88f, v.z * 0x1p80f, v.w * 0x1p96f);
  }
  // Byte k of t = u ^ 0x80808080 is b = q + 128 in [0, 255]; masked in place it is the fp32 value
  // b * 2^(8k - 149) (bits 0-23: subnormal, or for byte 2 with its top bit set the first normal
  // binade, where fp32 is still linear in the bit pattern). With x pre-scaled, each product is
  // b x 2^(K - 149), exact up to the FFMA's rounding.
  __device__ static float dot_word(unsigned u, const float4* xw, float d) {
    const unsigned t = u ^ 0x80808080u;
    const float4 a = xw[0];
    d = fma_sub(__uint_as_float(t & 0x000000FFu), a.x, d);
    d = fma_sub(__uint_as_float(t & 0x0000FF00u), a.y, d);
    d = fma_sub(__uint_as_float(t & 0x00FF0000u), a.z, d);
    d = fma_sub(__uint_as_float(t >> 24), a.w, d);
    return d;
  }
  __device__ static float elem(const QParams& p, int row, int c) {
    return static_cast<float>(static_cast<signed char>(p.q[static_cast<std::size_t>(row) * p.row_bytes + c]));
  }
};

struct F8 {
  using Vec = uint4;
  static constexpr int kCols = 16, kXW = 1, kAlign = 16, kWords = 4, kVecPerGroup = 1;
  static constexpr bool kGroups = false, kPrescale = false, kOffset = false, kDp = false;
  __device__ static float2 pair(unsigned bits16) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(bits16), __NV_E4M3);
    return __half22float2(__half2(h));
  }
  __device__ static float dot_word(unsigned u, const float4* xw, float d) {
    const float2 lo = pair(u & 0xFFFFu), hi = pair(u >> 16);
    const float4 a = xw[0];
    d = fmaf(lo.x, a.x, d);
    d = fmaf(lo.y, a.y, d);
    d = fmaf(hi.x, a.z, d);
    d = fmaf(hi.y, a.w, d);
    return d;
  }
  __device__ static float elem(const QParams& p, int row, int c) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(p.q[static_cast<std::size_t>(row) * p.row_bytes + c], __NV_E4M3);
    return __half2float(__half(h));
  }
};

struct I4 {
  using Vec = uint4;
  static constexpr int kCols = 32, kXW = 2, kAlign = 128, kWords = 4, kVecPerGroup = 4;
  static constexpr bool kGroups = true, kPrescale = true, kOffset = false, kDp = false;
  // The pre-scale of x at column position k = column % 8: 2^(K - e(k)) with e = 0, 4, .., 20, 16, 0
  // (nibble 6 is taken at bits 16-19 of u >> 8, nibble 7 at bits 0-3 of u >> 28).
  __device__ static float4 prescale(float4 v, bool upper) {
    if (!upper) return make_float4(v.x * 0x1p96f, v.y * 0x1p92f, v.z * 0x1p88f, v.w * 0x1p84f);
    return make_float4(v.x * 0x1p80f, v.y * 0x1p76f, v.z * 0x1p80f, v.w * 0x1p96f);
  }
  __device__ static float dot_word(unsigned u, const float4* xw, float d) {
    const float4 a = xw[0], b = xw[1];
    d = fma_sub(__uint_as_float(u & 0x0000000Fu), a.x, d);
    d = fma_sub(__uint_as_float(u & 0x000000F0u), a.y, d);
    d = fma_sub(__uint_as_float(u & 0x00000F00u), a.z, d);
    d = fma_sub(__uint_as_float(u & 0x0000F000u), a.w, d);
    d = fma_sub(__uint_as_float(u & 0x000F0000u), b.x, d);
    d = fma_sub(__uint_as_float(u & 0x00F00000u), b.y, d);
    d = fma_sub(__uint_as_float((u >> 8) & 0x000F0000u), b.z, d);
    d = fma_sub(__uint_as_float(u >> 28), b.w, d);
    return d;
  }
  // Element-wise: the dequantized weight q s + m.
  __device__ static float elem(const QParams& p, int row, int c) {
    const unsigned b = p.q[static_cast<std::size_t>(row) * p.row_bytes + (c >> 1)];
    const std::size_t k = static_cast<std::size_t>(row) * p.groups + c / kQuantGroup;
    return fmaf(static_cast<float>((c & 1) ? b >> 4 : b & 0xFu), bf16f(p.gs[k]), bf16f(p.gm[k]));
  }
};

// int4 read as 8-byte vectors (16 columns): a 3,584-column row is 224 of them, 7 per lane, where
// 16-byte vectors (112 per row) leave the last of a lane's 4 load slots empty in half the lanes
// while the warp still issues its work (docs/PERFORMANCE.md, session 10).
struct I4N : I4 {
  using Vec = uint2;
  static constexpr int kCols = 16, kWords = 2, kVecPerGroup = 8;
};

// int4 by integer dot products (kDp): x staged as 16-bit fixed point per group of 128 columns
// (x ~ xs_g (256 h + l), h a signed and l an unsigned byte, xs_g = max |x| over the group / 32767),
// the nibbles of a word split into its even and odd ones (u & 0x0F0F0F0F, (u >> 4) & 0x0F0F0F0F,
// one byte each), and 4 DP4A per word (even / odd nibbles times h and l): 7 instructions per 8
// weights where the fp32 path (I4 / I4N above) takes 17. Staged x per word, one uint4: the h bytes
// of its even columns, of its odd columns, then the l bytes likewise (dp_x below). Per vector the
// two integer sums 256 H + L (< 2^24 in magnitude: exact in fp32) become one float times xs_g.
struct I4D : I4 {
  static constexpr bool kDp = true;
};
struct I4ND : I4N {
  static constexpr bool kDp = true;
};

// The staged uint4 of one 8-column word for kDp from two lanes' quantized columns: b0..b3, this
// lane's 4 columns as the bit patterns of fmaf(x, 32767 / max, 1.5 * 2^23) (the low 16 bits hold
// round(x 32767 / max) in two's complement: byte 0 is l, byte 1 is h). The even lane of a pair
// holds columns 0-3 of the word, the odd one 4-7; the even lane returns the word's uint4.
__device__ __forceinline__ uint4 dp_x(unsigned b0, unsigned b1, unsigned b2, unsigned b3) {
  const unsigned a = __byte_perm(b0, b2, 0x5140), b = __byte_perm(b1, b3, 0x5140);  // [l l h h] of cols 0, 2 / 1, 3
  const unsigned a1 = __shfl_down_sync(0xffffffffu, a, 1), b1n = __shfl_down_sync(0xffffffffu, b, 1);
  return make_uint4(__byte_perm(a, a1, 0x7632), __byte_perm(b, b1n, 0x7632), __byte_perm(a, a1, 0x5410),
                    __byte_perm(b, b1n, 0x5410));
}

}  // namespace cosmos::kernels::qgemv
