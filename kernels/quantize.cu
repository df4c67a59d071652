// GPU quantization / dequantization, bit for bit engine/src/quant.cpp for bf16 sources.
//
// Thread mapping:
//   int8 / fp8 quantize: one warp per row (grid-stride over rows). Pass 1 reads the row (16-byte
//     loads, four in flight per lane) and takes the integer maximum of the bf16 magnitude bits, which
//     orders like the values (NaN / infinity / beyond 2^126 are the bits above 0x7E80, found in the
//     same pass); pass 2 re-reads the row (an L1 / L2 hit) and writes q with 8-byte stores.
//   int4 quantize: one half-warp per group of 128 columns, 8 columns (one 16-byte load, one 4-byte
//     store) per lane; the two halves of a warp take consecutive (row, group) units, so a warp reads
//     512 contiguous bytes.
//   dequantize: one thread per 8 columns (8- or 4-byte q load, one 16-byte bf16 store), flat over the
//     matrix.
//   Shapes with cols % 8 != 0 or misaligned pointers take the same mapping with element accesses.
//   Bad weights (QuantStatus): rows are not skipped, so the status holds the smallest bad index of
//   each kind over the whole launch (rows counted from src); an int8 / fp8 row holding one is left
//   unwritten, int4 groups of such a row hold meaningless values (the caller discards the result).
//
// Bit-identical rounding: every fp32 step of quant.cpp is one explicit PTX instruction with the
// round-to-nearest-even modifier and no .ftz (sub/mul/add/div.rn.f32, cvt.rn.f32.f64, cvt.rni), so
// nvcc never fuses a product and a sum into an FMA, and neither -ftz nor --use_fast_math changes a
// result; subnormals are kept as on x86-64 SSE (MXCSR default, no FTZ / DAZ). The minima and maxima
// are integer comparisons of bf16 bits that order like the floats, including the CPU's keeping of
// the first of equal values (std::min / std::max), which matters for an int4 group whose minimum
// is a zero: its stored minimum is -0 exactly when the first zero of the group is -0. The E4M3
// encoder is the CPU's integer code. Dequantization has no rounding that an FMA could change: int8 /
// fp8 are one product q * s; int4's q * s (4 bits times a bf16's 8) is exact in fp32, so q * s + m
// rounds once, fused or not; the bf16 result is cvt.rn (to nearest even).
#include "kernels/quantize.cuh"

#include <algorithm>
#include <climits>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace cosmos::kernels {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kThreads = 256;
constexpr std::uint32_t kMaxAbsBits = 0x7E80u;  // bf16 magnitude bits of 2^126, quant.cpp's kMaxWeight
constexpr std::uint32_t kInfBits = 0x7F80u;     // bf16 magnitude bits of infinity (above: NaN)
constexpr std::int64_t kMaxBlocks = 1 << 20;    // grid-stride loops beyond this many blocks

// ---- fp32 steps with exactly one IEEE rounding each (see the top comment) ------------------------

__device__ __forceinline__ float f_sub(float a, float b) {
  float r;
  asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float f_add(float a, float b) {
  float r;
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float f_mul(float a, float b) {
  float r;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float f_div(float a, float b) {  // IEEE division (div.full is the approximation)
  float r;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float d_to_f(double d) {
  float r;
  asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(d));
  return r;
}
// Round to the nearest integer, ties to even (quant.cpp's round_even on its clamped range).
__device__ __forceinline__ int f_rint(float x) {
  int r;
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// std::clamp(v, lo, hi) for a non-NaN v.
__device__ __forceinline__ float clampf(float v, float lo, float hi) { return v < lo ? lo : (hi < v ? hi : v); }

__device__ __forceinline__ float bf16f(std::uint32_t bits) { return __uint_as_float(bits << 16); }

// Two floats to bf16, to nearest even (one cvt.rn.bf16x2.f32, subnormals kept), lo in the low half.
__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return static_cast<std::uint32_t>(__bfloat16_as_ushort(h.x)) | (static_cast<std::uint32_t>(__bfloat16_as_ushort(h.y)) << 16);
}

// ---- E4M3 -----------------------------------------------------------------------------------------

// quant.cpp's float_to_e4m3, line for line.

__device__ __forceinline__ std::uint32_t float_to_e4m3(float v) {
  const std::uint32_t u = __float_as_uint(v);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7Fu;
  if (a >= 0x43E00000u) return sign | 0x7Eu;
  if (a >= 0x3C800000u) {
    const std::uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
    return (sign | (r - (120u << 3))) & 0xFFu;
  }
  const std::uint32_t exp = a >> 23;
  const std::uint32_t shift = 141u - exp;
  if (exp == 0 || shift > 24) return sign;
  const std::uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
  std::uint32_t q = sig >> shift;
  const std::uint32_t rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return sign | q;
}

// E4M3 codes to floats: every E4M3 value (subnormals, -0) is an fp16 value, so the conversion through
// fp16 (one cvt.rn.f16x2.e4m3x2 on sm_89+) is exact and equals quant.cpp's table; the NaN codes give a
// NaN (whose bits the CPU's differ from, as a NaN times s is a NaN either way).
__device__ __forceinline__ float2 e4m3x2_to_float2(std::uint32_t pair) {  // low byte -> .x
  const __half2 h(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3));
  return __half22float2(h);
}
__device__ __forceinline__ float e4m3_to_float(std::uint32_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3)));
}

// ---- bad weights --------------------------------------------------------------------------------

__device__ __forceinline__ unsigned long long warp_min_u64(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

// Folds one bf16 weight at (row, col) into the lane's first non-finite / out-of-range index.
__device__ __forceinline__ void note_bad(std::uint32_t bits, std::int64_t row, std::int64_t col,
                                         unsigned long long& nf, unsigned long long& rg) {
  const std::uint32_t a = bits & 0x7FFFu;
  if (a <= kMaxAbsBits) return;
  const unsigned long long key = (static_cast<unsigned long long>(row) << 32) | static_cast<unsigned long long>(col);
  if (a >= kInfBits) {
    nf = min(nf, key);
  } else {
    rg = min(rg, key);
  }
}

// Warp-wide: the smallest of the lanes' indices into *status (called by all 32 lanes).
__device__ __forceinline__ void publish_bad(unsigned long long nf, unsigned long long rg, QuantStatus* status) {
  nf = warp_min_u64(nf);
  rg = warp_min_u64(rg);
  if ((threadIdx.x & 31) == 0) {
    if (nf != kQuantNoError) atomicMin(&status->non_finite, nf);
    if (rg != kQuantNoError) atomicMin(&status->out_of_range, rg);
  }
}

// Largest magnitude bits of the 8 bf16 in x, as two packed 16-bit maxima (combine with __vmaxu2).
__device__ __forceinline__ std::uint32_t absmax8(const uint4& x) {
  const std::uint32_t m = 0x7FFF7FFFu;
  return __vmaxu2(__vmaxu2(x.x & m, x.y & m), __vmaxu2(x.z & m, x.w & m));
}

// ---- int8 / fp8: one warp per row ----------------------------------------------------------------

template <bool kFp8>
__device__ __forceinline__ std::uint32_t quant_elem(std::uint32_t bits, float s) {
  const float y = f_div(bf16f(bits), s);
  if constexpr (kFp8) {
    return float_to_e4m3(y);
  } else {
    return static_cast<std::uint32_t>(f_rint(clampf(y, -127.0f, 127.0f))) & 0xFFu;
  }
}

template <bool kFp8>
__device__ __forceinline__ std::uint32_t quant4_bytes(std::uint32_t w2a, std::uint32_t w2b, float s) {
  return quant_elem<kFp8>(w2a & 0xFFFFu, s) | (quant_elem<kFp8>(w2a >> 16, s) << 8) |
         (quant_elem<kFp8>(w2b & 0xFFFFu, s) << 16) | (quant_elem<kFp8>(w2b >> 16, s) << 24);
}

// kVec: cols % 8 == 0, src 16-byte and q 8-byte aligned.
template <bool kFp8, bool kVec>
__global__ void __launch_bounds__(kThreads) quantize_row_kernel(const std::uint16_t* __restrict__ src,
                                                                std::int64_t rows, std::int64_t cols,
                                                                std::uint8_t* __restrict__ q,
                                                                float* __restrict__ row_scale,
                                                                QuantStatus* __restrict__ status) {
  const int lane = threadIdx.x & 31;
  const std::int64_t nwarps = static_cast<std::int64_t>(gridDim.x) * (kThreads / 32);
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5); r < rows;
       r += nwarps) {
    const std::uint16_t* srow = src + r * cols;
    std::uint8_t* qrow = q + r * cols;
    const std::int64_t n8 = cols >> 3;
    // Pass 1: max |w| as bf16 magnitude bits.
    std::uint32_t amax = 0;
    if constexpr (kVec) {
      const uint4* v = reinterpret_cast<const uint4*>(srow);
      std::uint32_t acc = 0;
      for (std::int64_t b = lane; b < n8; b += 128) {
        uint4 x[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) x[k] = b + 32 * k < n8 ? __ldg(v + b + 32 * k) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int k = 0; k < 4; ++k) acc = __vmaxu2(acc, absmax8(x[k]));
      }
      amax = max(acc & 0xFFFFu, acc >> 16);
    } else {
      for (std::int64_t c = lane; c < cols; c += 32) amax = max(amax, static_cast<std::uint32_t>(srow[c]) & 0x7FFFu);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = max(amax, __shfl_xor_sync(kFull, amax, o));
    if (amax > kMaxAbsBits) {  // a bad weight (warp-uniform): report the row's first ones, write nothing
      unsigned long long nf = kQuantNoError, rg = kQuantNoError;
      for (std::int64_t c = lane; c < cols; c += 32) note_bad(srow[c], r, c, nf, rg);
      publish_bad(nf, rg, status);
      continue;
    }
    // Pass 2: s = max|w| / 127 (448); q = round(w / s) clamped (e4m3(w / s)); all zeros when s == 0.
    const float s = f_div(bf16f(amax), kFp8 ? 448.0f : 127.0f);
    if (lane == 0) row_scale[r] = s;
    const bool zero = __float_as_uint(s) == 0u;  // s >= 0
    if constexpr (kVec) {
      const uint4* v = reinterpret_cast<const uint4*>(srow);
      uint2* qv = reinterpret_cast<uint2*>(qrow);
#pragma unroll 2
      for (std::int64_t b = lane; b < n8; b += 32) {
        uint2 o = make_uint2(0, 0);
        if (!zero) {
          const uint4 x = __ldg(v + b);
          o.x = quant4_bytes<kFp8>(x.x, x.y, s);
          o.y = quant4_bytes<kFp8>(x.z, x.w, s);
        }
        qv[b] = o;
      }
    } else {
      for (std::int64_t c = lane; c < cols; c += 32)
        qrow[c] = zero ? std::uint8_t{0} : static_cast<std::uint8_t>(quant_elem<kFp8>(srow[c], s));
    }
  }
}

// ---- int4: one half-warp per group of 128 columns ------------------------------------------------

// kVec: cols % 8 == 0, src 16-byte and q 4-byte aligned (every lane then has 0 or 8 columns).
template <bool kVec>
__global__ void __launch_bounds__(kThreads) quantize_int4_kernel(const std::uint16_t* __restrict__ src,
                                                                 std::int64_t rows, std::int64_t cols,
                                                                 std::uint8_t* __restrict__ q,
                                                                 std::uint16_t* __restrict__ gscale,
                                                                 std::uint16_t* __restrict__ gmin,
                                                                 QuantStatus* __restrict__ status) {
  const int lane = threadIdx.x & 31, hl = lane & 15;
  const std::int64_t groups = (cols + kQuantGroup - 1) / kQuantGroup, units = rows * groups, row_bytes = (cols + 1) / 2;
  const std::int64_t nwarps = static_cast<std::int64_t>(gridDim.x) * (kThreads / 32);
  // Loop control is warp-uniform (u0), so every lane reaches every shuffle.
  for (std::int64_t u0 = (static_cast<std::int64_t>(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5)) * 2;
       u0 < units; u0 += nwarps * 2) {
    const std::int64_t u = u0 + (lane >> 4);
    const bool active = u < units;
    std::int64_t r = 0, g = 0;
    if (active) {
      if (units <= 0xFFFFFFFFll) {  // 32-bit division when it suffices (always, for this model)
        r = static_cast<std::uint32_t>(u) / static_cast<std::uint32_t>(groups);
      } else {
        r = u / groups;
      }
      g = u - r * groups;
    }
    const std::int64_t c0 = g * kQuantGroup + hl * 8;  // this lane's first column
    const std::int64_t left = cols - c0;  // > 0 for lanes of an active unit but the last group's tail
    const int n = !active || left <= 0 ? 0 : (left >= 8 ? 8 : static_cast<int>(left));
    const std::uint16_t* sp = src + r * cols + c0;
    std::uint32_t w[8];
    if constexpr (kVec) {
      uint4 x = make_uint4(0, 0, 0, 0);
      if (n > 0) x = __ldg(reinterpret_cast<const uint4*>(sp));
      const std::uint32_t p[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        w[2 * k] = p[k] & 0xFFFFu;
        w[2 * k + 1] = p[k] >> 16;
      }
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) w[k] = k < n ? static_cast<std::uint32_t>(sp[k]) : 0u;
    }
    // The group's minimum and maximum as ordered keys (-|w| or |w|; -0 and +0 are equal keys). The
    // minimum carries its column and sign, so the smallest packed value is the first minimal weight
    // and says whether it is -0: ((key + 0x8000) << 9) | (column in group << 1) | sign.
    std::uint32_t amax = 0, pmin = 0xFFFFFFFFu;
    int kmax = INT_MIN;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (k < n) {
        const std::uint32_t a = w[k] & 0x7FFFu;
        const int key = (w[k] & 0x8000u) ? -static_cast<int>(a) : static_cast<int>(a);
        amax = max(amax, a);
        kmax = max(kmax, key);
        pmin = min(pmin, (static_cast<std::uint32_t>(key + 0x8000) << 9) |
                             (static_cast<std::uint32_t>(hl * 8 + k) << 1) | (w[k] >> 15));
      }
    }
    if (__any_sync(kFull, amax > kMaxAbsBits)) {  // rare: report (the group's q is then meaningless)
      unsigned long long nf = kQuantNoError, rg = kQuantNoError;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (k < n) note_bad(w[k], r, c0 + k, nf, rg);
      publish_bad(nf, rg, status);
    }
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) {
      pmin = min(pmin, __shfl_xor_sync(kFull, pmin, o));
      kmax = max(kmax, __shfl_xor_sync(kFull, kmax, o));
    }
    if (!active) continue;
    // m = the minimum (a bf16 source's minimum is its own bf16 round-down); s = (hi - m) / 15 in
    // double, to float (to nearest, then up if below), then up to bf16.
    const int minkey = static_cast<int>(pmin >> 9) - 0x8000;
    const std::uint32_t min_bits = ((pmin & 1u) << 15) | static_cast<std::uint32_t>(minkey < 0 ? -minkey : minkey);
    const std::uint32_t max_bits = kmax < 0 ? (0x8000u | static_cast<std::uint32_t>(-kmax)) : static_cast<std::uint32_t>(kmax);
    const float m = bf16f(min_bits), hi = bf16f(max_bits);
    const double span = __ddiv_rn(__dsub_rn(static_cast<double>(hi), static_cast<double>(m)), 15.0);
    std::uint32_t s_bits = 0;
    if (span > 0.0) {
      float f = d_to_f(span);
      if (static_cast<double>(f) < span) f = __uint_as_float(__float_as_uint(f) + 1u);  // nextafter up, f >= 0
      const std::uint32_t fu = __float_as_uint(f);
      s_bits = (fu >> 16) + ((fu & 0xFFFFu) != 0 ? 1u : 0u);
    }
    const float s = bf16f(s_bits);
    std::uint32_t nib[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      nib[k] = s_bits == 0 || k >= n ? 0u
                                     : static_cast<std::uint32_t>(f_rint(clampf(f_div(f_sub(bf16f(w[k]), m), s), 0.0f, 15.0f)));
    std::uint8_t* qp = q + r * row_bytes + c0 / 2;
    if constexpr (kVec) {
      if (n > 0) {
        std::uint32_t packed = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) packed |= nib[k] << (4 * k);
        *reinterpret_cast<std::uint32_t*>(qp) = packed;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (2 * j < n) qp[j] = static_cast<std::uint8_t>(nib[2 * j] | (nib[2 * j + 1] << 4));  // nib is 0 past n
    }
    if (hl == 0) {
      gscale[u] = static_cast<std::uint16_t>(s_bits);
      gmin[u] = static_cast<std::uint16_t>(min_bits);
    }
  }
}

// ---- dequantize ----------------------------------------------------------------------------------

// Index -> (row, column chunk): 32-bit division when the counts allow (always, for this model).
__device__ __forceinline__ void split_index(std::int64_t i, std::int64_t per_row, bool small, std::int64_t& r,
                                            std::int64_t& c) {
  if (small) {
    const std::uint32_t ri = static_cast<std::uint32_t>(i) / static_cast<std::uint32_t>(per_row);
    r = ri;
    c = static_cast<std::uint32_t>(i) - ri * static_cast<std::uint32_t>(per_row);
  } else {
    r = i / per_row;
    c = i - r * per_row;
  }
}

// The fp32 value of one q code against its row scale (int8, fp8), as dequantize_row computes it.
template <QuantKind K>
__device__ __forceinline__ float dq_row_elem(std::uint32_t code, float s) {
  if constexpr (K == QuantKind::fp8_row) {
    return f_mul(e4m3_to_float(code), s);
  } else {
    return f_mul(static_cast<float>(static_cast<std::int8_t>(static_cast<std::uint8_t>(code))), s);
  }
}

// kVec: cols % 8 == 0, q 8-byte (int8 / fp8) or 4-byte (int4) aligned, dst 16-byte aligned.
template <QuantKind K, bool kVec>
__global__ void __launch_bounds__(kThreads) dequantize_kernel(QuantMatrix mat, std::int64_t rows, std::int64_t cols,
                                                              std::uint16_t* __restrict__ dst) {
  const std::int64_t per_row = kVec ? cols / 8 : cols;
  const std::int64_t total = rows * per_row;
  const bool small = total <= 0xFFFFFFFFll;
  const std::int64_t groups = (cols + kQuantGroup - 1) / kQuantGroup;
  const std::int64_t row_bytes = K == QuantKind::int4_group ? (cols + 1) / 2 : cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total; i += stride) {
    std::int64_t r, c;
    split_index(i, per_row, small, r, c);
    const std::uint8_t* qrow = mat.q + r * row_bytes;
    if constexpr (kVec) {
      c *= 8;
      float v[8];
      if constexpr (K == QuantKind::int4_group) {
        const std::uint32_t x = __ldg(reinterpret_cast<const unsigned int*>(qrow + c / 2));
        const std::int64_t k = r * groups + c / kQuantGroup;
        const float s = bf16f(__ldg(mat.group_scale + k)), mn = bf16f(__ldg(mat.group_min + k));
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = f_add(f_mul(static_cast<float>((x >> (4 * j)) & 0xFu), s), mn);
      } else {
        const uint2 x = __ldg(reinterpret_cast<const uint2*>(qrow + c));
        const float s = __ldg(mat.row_scale + r);
        if constexpr (K == QuantKind::fp8_row) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float2 f = e4m3x2_to_float2(((j < 2 ? x.x : x.y) >> (16 * (j & 1))) & 0xFFFFu);
            v[2 * j] = f_mul(f.x, s);
            v[2 * j + 1] = f_mul(f.y, s);
          }
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            v[j] = dq_row_elem<K>((x.x >> (8 * j)) & 0xFFu, s);
            v[j + 4] = dq_row_elem<K>((x.y >> (8 * j)) & 0xFFu, s);
          }
        }
      }
      *reinterpret_cast<uint4*>(dst + r * cols + c) =
          make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
    } else {
      float v;
      if constexpr (K == QuantKind::int4_group) {
        const std::uint32_t b = qrow[c / 2];
        const std::int64_t k = r * groups + c / kQuantGroup;
        v = f_add(f_mul(static_cast<float>((c & 1) ? b >> 4 : b & 0xFu), bf16f(mat.group_scale[k])),
                  bf16f(mat.group_min[k]));
      } else {
        v = dq_row_elem<K>(qrow[c], mat.row_scale[r]);
      }
      dst[r * cols + c] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
  }
}

bool aligned(const void* p, std::uintptr_t a) { return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0; }

int blocks_for(std::int64_t work_threads) {
  return static_cast<int>(std::clamp<std::int64_t>((work_threads + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

template <QuantKind K>
void dequantize_as(const QuantMatrix& m, std::int64_t rows, std::int64_t cols, std::uint16_t* dst,
                   cudaStream_t stream) {
  const std::uintptr_t qa = K == QuantKind::int4_group ? 4 : 8;
  if (cols % 8 == 0 && aligned(m.q, qa) && aligned(dst, 16)) {
    dequantize_kernel<K, true><<<blocks_for(rows * (cols / 8)), kThreads, 0, stream>>>(m, rows, cols, dst);
  } else {
    dequantize_kernel<K, false><<<blocks_for(rows * cols), kThreads, 0, stream>>>(m, rows, cols, dst);
  }
}

}  // namespace

std::size_t launch_quantize(const __nv_bfloat16* src, std::int64_t rows, std::int64_t cols, QuantKind kind,
                            const QuantOut& out, QuantStatus* status, cudaStream_t stream) {
  const bool int4 = kind == QuantKind::int4_group;
  if (rows < 0 || cols < 0 || status == nullptr ||
      (kind != QuantKind::int8_row && kind != QuantKind::fp8_row && !int4))
    return 0;
  const bool empty = rows == 0 || (int4 && cols == 0);  // int8 / fp8 rows of no columns still get s = 0
  if (!empty && cols > 0 && (src == nullptr || out.q == nullptr)) return 0;
  if (!empty && (int4 ? out.group_scale == nullptr || out.group_min == nullptr : out.row_scale == nullptr)) return 0;
  cudaMemsetAsync(status, 0xFF, sizeof(QuantStatus), stream);  // kQuantNoError in both fields
  std::size_t bytes = sizeof(QuantStatus);
  if (empty) return bytes;
  const auto* s = reinterpret_cast<const std::uint16_t*>(src);
  const auto r = static_cast<std::size_t>(rows), c = static_cast<std::size_t>(cols);
  bytes += r * c * 2 + r * static_cast<std::size_t>(quant_row_bytes(kind, cols));
  if (int4) {
    bytes += r * static_cast<std::size_t>(quant_groups(cols)) * 4;
    const int blocks = blocks_for(((rows * quant_groups(cols) + 1) / 2) * 32);
    if (cols % 8 == 0 && aligned(src, 16) && aligned(out.q, 4)) {
      quantize_int4_kernel<true><<<blocks, kThreads, 0, stream>>>(s, rows, cols, out.q, out.group_scale,
                                                                  out.group_min, status);
    } else {
      quantize_int4_kernel<false><<<blocks, kThreads, 0, stream>>>(s, rows, cols, out.q, out.group_scale,
                                                                   out.group_min, status);
    }
    return bytes;
  }
  bytes += r * sizeof(float);
  const int blocks = blocks_for(rows * 32);
  const bool vec = cols % 8 == 0 && aligned(src, 16) && aligned(out.q, 8);
  if (kind == QuantKind::fp8_row) {
    if (vec) {
      quantize_row_kernel<true, true><<<blocks, kThreads, 0, stream>>>(s, rows, cols, out.q, out.row_scale, status);
    } else {
      quantize_row_kernel<true, false><<<blocks, kThreads, 0, stream>>>(s, rows, cols, out.q, out.row_scale, status);
    }
  } else {
    if (vec) {
      quantize_row_kernel<false, true><<<blocks, kThreads, 0, stream>>>(s, rows, cols, out.q, out.row_scale, status);
    } else {
      quantize_row_kernel<false, false><<<blocks, kThreads, 0, stream>>>(s, rows, cols, out.q, out.row_scale,
                                                                         status);
    }
  }
  return bytes;
}

std::size_t launch_dequantize(const QuantMatrix& m, std::int64_t rows, std::int64_t cols, __nv_bfloat16* dst,
                              cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || dst == nullptr || m.q == nullptr) return 0;
  const auto r = static_cast<std::size_t>(rows), c = static_cast<std::size_t>(cols);
  auto* d = reinterpret_cast<std::uint16_t*>(dst);
  switch (m.kind) {
    case QuantKind::int8_row:
    case QuantKind::fp8_row:
      if (m.row_scale == nullptr) return 0;
      if (m.kind == QuantKind::int8_row) {
        dequantize_as<QuantKind::int8_row>(m, rows, cols, d, stream);
      } else {
        dequantize_as<QuantKind::fp8_row>(m, rows, cols, d, stream);
      }
      return r * c + r * sizeof(float) + r * c * 2;
    case QuantKind::int4_group:
      if (m.group_scale == nullptr || m.group_min == nullptr) return 0;
      dequantize_as<QuantKind::int4_group>(m, rows, cols, d, stream);
      return r * ((c + 1) / 2) + r * static_cast<std::size_t>(quant_groups(cols)) * 4 + r * c * 2;
  }
  return 0;
}

}  // namespace cosmos::kernels
