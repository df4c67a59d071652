// kernels/gemv_quant.cu's staging of x given as bf16 (QGemvArgs::x16): the down projection's input,
// which the gate/up product writes as bf16 (QGemvArgs::y16). A 16-byte load then carries 8 columns
// instead of 4, so a block issues half the loads for the same x: int4's down product (18,944
// columns on 512 threads) stages in one batch of 5 loads per thread where fp32 x took two. Included
// by gemv_quant_vec.cuh only, inside gemv_quant.cu's anonymous namespace, for the down-shaped kernels
// (x staged at 2 blocks per SM) and the o-shaped ones (the attention's output, written as bf16 at
// short contexts), with the same staged layouts as their fp32 loops.
#pragma once

namespace gemv_quant_x16 {

// The 8 columns of a uint4 of bf16 as floats (column 2k in the low half of word k: exact).
__device__ __forceinline__ void unpack8(const uint4& u, float (&v)[8]) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[2 * k] = __uint_as_float(w[k] << 16);
    v[2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
  }
}

// A batch of kB uint4s of x per thread (8 columns each, kNT apart from e0): zeros and ok false past
// n8, whole warps (the shuffles after it take every lane; n8 a multiple of 16: ok is uniform over
// each half-warp). Read once: kept out of L1.
template <int kB, int kNT>
__device__ __forceinline__ void load_batch(const uint4* x8, int n8, int e0, uint4 (&u)[kB], bool (&ok)[kB]) {
#pragma unroll
  for (int b = 0; b < kB; ++b) {
    const int e = e0 + b * kNT;
    ok[b] = e < n8;
    u[b] = ok[b] ? __ldcg(x8 + e) : make_uint4(0u, 0u, 0u, 0u);
  }
}

// Each of the kB values summed over its half-warp (a group of 128 columns), in every lane of it.
template <int kB, typename T>
__device__ __forceinline__ void half_warp_sums(T (&part)[kB]) {
#pragma unroll
  for (int s = 8; s >= 1; s >>= 1) {
#pragma unroll
    for (int b = 0; b < kB; ++b) part[b] += __shfl_xor_sync(0xffffffffu, part[b], s);
  }
}

// int4's integer kernels (kDp): x~ = xs_g (256 h + l) per group of 128 columns, staged as the fp32
// loop's stage_dp stages it (gemv_quant_vec.cuh: one uint4 per 8-column word, [word % kWords][ps]),
// with the per-group scale xs_g in xscale[g] and xs_g times the sum of x~ in xsum[g]. A lane holds
// one whole word (8 columns), so it packs the word's bytes itself (stage_dp's dp_x takes two lanes);
// a half-warp holds one group (16 x 8 columns): its maximum and sum by 4 shuffle rounds (the fp32
// loop's one-warp REDUX has a group per warp). n8: columns / 8, a multiple of 16 (whole groups).
template <int kB, int kNT, int kWords>
__device__ __forceinline__ void stage_dp(const uint4* x8, int n8, uint4* xdp, int ps, float* xscale, float* xsum) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: x qi + kMagic holds round(x qi) in its low 16 bits
  const int lane = static_cast<int>(threadIdx.x & 31);
  // Whole warps run each batch (the shuffles take every lane): the loop runs on the warp's first
  // column, and a lane past the end loads zeros and stores nothing.
  for (int w0 = static_cast<int>(threadIdx.x) - lane; w0 < n8; w0 += kB * kNT) {
    const int e0 = w0 + lane;
    uint4 u[kB];
    bool ok[kB];
    load_batch<kB, kNT>(x8, n8, e0, u, ok);
    // The lane's max |x| on the bf16 bits (sign off, they order as the values: one VMNMX per pair
    // of words), then as a float.
    float m[kB];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      constexpr unsigned kAbs = 0x7FFF7FFFu;
      const unsigned h = __vmaxu2(__vmaxu2(u[b].x & kAbs, u[b].y & kAbs), __vmaxu2(u[b].z & kAbs, u[b].w & kAbs));
      m[b] = __uint_as_float(max(h & 0xFFFFu, h >> 16) << 16);
    }
#pragma unroll
    for (int s = 8; s >= 1; s >>= 1) {
#pragma unroll
      for (int b = 0; b < kB; ++b) m[b] = fmaxf(m[b], __shfl_xor_sync(0xffffffffu, m[b], s));
    }
    int part[kB];
    float xs[kB];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const bool live = m[b] >= 0x1p-100f;  // below that the group is taken as 0 (as stage_dp)
      const float qi = live ? __fdividef(32767.0f, m[b]) : 0.0f;
      xs[b] = live ? m[b] * (1.0f / 32767.0f) : 0.0f;
      float v[8];
      unpack8(u[b], v);
      unsigned q[8];
      float sum = 0.0f;  // integers below 2^18: exact
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float f = fmaf(v[k], qi, kMagic);
        q[k] = __float_as_uint(f);
        sum += f - kMagic;
      }
      // [l l h h] of columns 0, 2 / 1, 3 / 4, 6 / 5, 7; the word: h of the even columns, h of the
      // odd ones, l of the even ones, l of the odd ones (dp_x's layout).
      const unsigned A = __byte_perm(q[0], q[2], 0x5140), B = __byte_perm(q[1], q[3], 0x5140);
      const unsigned C = __byte_perm(q[4], q[6], 0x5140), D = __byte_perm(q[5], q[7], 0x5140);
      const int e = e0 + b * kNT;
      if (ok[b])
        xdp[(e % kWords) * ps + e / kWords] =
            make_uint4(__byte_perm(A, C, 0x7632), __byte_perm(B, D, 0x7632), __byte_perm(A, C, 0x5410), __byte_perm(B, D, 0x5410));
      part[b] = __float2int_rn(sum);
    }
    half_warp_sums<kB>(part);
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int e = e0 + b * kNT;
      if (ok[b] && (lane & 15) == 0) {
        xscale[e >> 4] = xs[b];
        xsum[e >> 4] = static_cast<float>(part[b]) * xs[b];
      }
    }
  }
}

// int4 on the fp32 path (the o product's I4N kernels): x pre-scaled by its column's position in an
// 8-column word (`pre(v, upper)`, the lane's two float4s are one word) and staged as the fp32 loop
// stages it (stage_at(f), f the float4 index), with the group sums of x times 2^-53 in xsum[g] as
// that loop has them. The sums: two 4-term sums added, then a half-warp's 4 shuffle rounds (8
// roundings relative to sum |x| over the group, as the fp32 loop's 3 + 5).
template <int kB, int kNT, typename StageAt, typename Pre>
__device__ __forceinline__ void stage_groups(const uint4* x8, int n8, StageAt&& stage_at, float* xsum, Pre&& pre) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (int w0 = static_cast<int>(threadIdx.x) - lane; w0 < n8; w0 += kB * kNT) {  // whole warps, as stage_dp
    const int e0 = w0 + lane;
    uint4 u[kB];
    bool ok[kB];
    load_batch<kB, kNT>(x8, n8, e0, u, ok);
    float part[kB];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      float v[8];
      unpack8(u[b], v);
      const int e = e0 + b * kNT;
      if (ok[b]) {
        stage_at(2 * e) = pre(make_float4(v[0], v[1], v[2], v[3]), false);
        stage_at(2 * e + 1) = pre(make_float4(v[4], v[5], v[6], v[7]), true);
      }
      part[b] = (((v[0] + v[1]) + v[2]) + v[3]) + (((v[4] + v[5]) + v[6]) + v[7]);
    }
    half_warp_sums<kB>(part);
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int e = e0 + b * kNT;
      if (ok[b] && (lane & 15) == 0) xsum[e >> 4] = part[b] * 0x1p-53f;
    }
  }
}

// int8 / fp8: x staged as fp32 float4s as the fp32 loop stages it (stage_at(f), f the float4 index,
// through `pre`: the format's pre-scale). Returns this thread's sum of x (the kOffset sums).
template <int kB, int kNT, typename StageAt, typename Pre>
__device__ __forceinline__ float stage_plain(const uint4* x8, int n8, StageAt&& stage_at, Pre&& pre) {
  float xs = 0.0f;
  for (int e0 = static_cast<int>(threadIdx.x); e0 < n8; e0 += kB * kNT) {
    uint4 u[kB];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int e = e0 + b * kNT;
      if (e < n8) u[b] = __ldcg(x8 + e);
    }
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int e = e0 + b * kNT;
      if (e < n8) {
        float v[8];
        unpack8(u[b], v);
        const float4 lo = make_float4(v[0], v[1], v[2], v[3]), hi = make_float4(v[4], v[5], v[6], v[7]);
        xs += (((v[0] + v[1]) + v[2]) + v[3]) + (((v[4] + v[5]) + v[6]) + v[7]);
        stage_at(2 * e) = pre(lo);
        stage_at(2 * e + 1) = pre(hi);
      }
    }
  }
  return xs;
}

}  // namespace gemv_quant_x16
