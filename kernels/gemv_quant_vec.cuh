// kernels/gemv_quant.cu's vector kernel, gemv_q_vec (the design and the arithmetic: the top comment
// of gemv_quant.cu). Included by gemv_quant.cu only, inside its anonymous namespace, after QParams,
// the formats, kWarps, kI4K, the staging modes (kXL1, kXSmem, kXSmemBig) and the gemv_common
// helpers are in scope.
#pragma once

#include "kernels/gemv_quant_parts.cuh"  // warp_sum4, kMinBlocks, staged_plane
#include "kernels/gemv_quant_sums.cuh"   // the kSums instantiations and int4's wide o kernel
#include "kernels/gemv_quant_x16.cuh"    // kX16: x given as bf16

// Vector path. Shared memory: kStage != kXL1: x (times the norm weight when kNorm, whose 1 / rms the
// epilogue applies; pre-scaled for int4) as [kP][ps] float4 (float4 k of vector i at k * ps + i: a
// warp's 16-byte reads are consecutive, no bank conflicts), ps = staged_plane(vecs, kP) >= vecs; then, int4, the per-group sums of x (times
// 2^(K - 149)) [groups].
// kWide: built for 2 blocks per SM (128 registers) whatever the weights take, x staged in batches of 4
// (int4 o at a long context, see narrow_kernel in gemv_quant.cu). kSums: int8 / fp8 with x as the
// decode attention's sums, divided after the staging (kernels/gemv_quant_sums.cuh). kX16: x given as
// bf16 (QGemvArgs::x16), staged as the fp32 x is (kernels/gemv_quant_x16.cuh); the big staging only.
template <typename F, bool kNorm, bool kSwiglu, int kStage, int kR, int kU, bool kPipe, int kBW = kWarps, int kFixedCols = 0,
          bool kWide = false, bool kSums = false, bool kX16 = false>
__global__ void __launch_bounds__(kBW * 32, kWide ? 2 : kMinBlocks<F, kStage, kR, kU> * kWarps / kBW) gemv_q_vec(const QParams p) {
  constexpr int kNW = kBW, kNT = kBW * 32;  // warps and threads of this kernel's blocks
  constexpr bool kSt = kStage != kXL1;
  static_assert(!kSums || (!F::kGroups && kSt && !kNorm && !kSwiglu), "kSums: 8-bit, x staged, no norm, no SwiGLU");
  static_assert(!kX16 || (kStage != kXL1 && !kNorm && !kSwiglu && !kSums && !kWide && (F::kDp == (kStage == kXSmemBig) || !F::kGroups)),
                "kX16: x staged, no norm, no SwiGLU, no sums; int4 by integer dot products in the big staging, else on the fp32 path");
  constexpr int kP = F::kCols / 4;   // float4s of x per vector
  // Staged planes: kP of float4s, or with kDp (x as 16-bit fixed point) kWords of uint4s.
  constexpr int kPl = F::kDp ? F::kWords : kP;
  static_assert(!F::kDp || kStage != kXL1, "kDp: x is quantized while it is staged");
  constexpr int kStep = 32 * kU;     // vectors per row per step
  constexpr int kVG = F::kVecPerGroup;  // int4: vectors per group
  constexpr int kGS = F::kGroups ? (kU + kVG - 1) / kVG : 1;  // int4: groups per lane per step (32 kU / kVG groups)
  static_assert(!F::kGroups || 32 % kVG == 0, "int4: a step must be whole groups");
  // kExact: rows of whole steps, no bounds checks. plan_fmt takes 7 loads (I4N, and int8 / fp8 with
  // kU = 7) only where a row is a whole number of steps (cols a multiple of 3,584), so no vector and
  // no group of a step is past the end of a row (the checks' compares, branches and per-load
  // address arithmetic were ~0.3 of the int4 gate/up's 3.5 instructions per weight). I4N at 4 rows
  // per item only: at 2 (64 registers) ptxas then spills (with kFixedCols the compiler folds the
  // checks itself, see kModelCols). Measured (session 35): int4
  // gate/up 24.6 -> 22.8 us and lm_head 84.0 -> 77.5 alone; int4 decode @0 580.3 -> 592.1 tok/s,
  // @4096 489.2 -> 500.2 (engine A/B, means of 4 rounds).
  constexpr bool kExact = (std::is_base_of_v<I4N, F> && kR == 4) || (!F::kGroups && kU == 7);  // I4N, I4ND
  constexpr int kStepGroups = 32 * kU / kVG;  // kExact: groups per step, lanes < this hold one each
  static_assert(!kExact || !F::kGroups || (kGS == 1 && kStepGroups <= 32), "I4N: one group per lane and step");
  static_assert(!kSwiglu || kR == 2 || kR == 4, "SwiGLU items are kR / 2 gate rows and their up rows");
  static_assert(kR == 1 || kR == 2 || kR == 4, "1, 2 or 4 rows per item");
  constexpr int kOuts = kSwiglu ? kR / 2 : kR;  // outputs per item
  constexpr int kPairs = (kR + 1) / 2;          // int4: registers of packed bf16 group scales per group
  KTRACE_BLOCK(p.rows, p.cols);  // a diagnostic build's timestamps (kernels/ktrace.cuh), else nothing
  extern __shared__ float4 smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  // kFixedCols > 0: the row width as a constant (the 7B model's 3,584), so the row and group strides,
  // the vectors per row and the staged planes' stride fold into immediates.
  const int cols = kFixedCols > 0 ? kFixedCols : p.cols;
  const int vecs = cols / F::kCols;
  const int n4 = cols >> 2;
  const int ps = staged_plane(vecs, kPl);
  const int row_bytes = kFixedCols > 0 ? vecs * static_cast<int>(sizeof(typename F::Vec)) : p.row_bytes;
  [[maybe_unused]] const int groups = kFixedCols > 0 ? (kFixedCols + kQuantGroup - 1) / kQuantGroup : p.groups;
  float* xsum = reinterpret_cast<float*>(smem + (kSt ? kPl * ps : 0));
  // kDp: [groups] the per-group scale xs_g of the staged fixed-point x, after the group sums.
  [[maybe_unused]] float* xscale = xsum + groups;
  [[maybe_unused]] const uint4* xdp = reinterpret_cast<const uint4*>(smem);  // kDp: [kWords][ps] uint4
  const int stride = gridDim.x * kNW;
  int t = blockIdx.x + gridDim.x * warp;

  // Row r of item `it`: SwiGLU, gate rows kOuts it + r (r < kOuts) and their up rows (r >= kOuts, + F);
  // else rows kR it + r. Rows past the end are clamped to the last one (an odd count's last item).
  auto row_of = [&](int it, int r) -> int {
    if constexpr (kSwiglu && kOuts == 1) {
      return it + r * p.half;
    } else if constexpr (kSwiglu) {
      const int o = kOuts * it + r % kOuts;
      return (o < p.outs ? o : p.outs - 1) + (r / kOuts) * p.half;
    } else if constexpr (kR == 1) {
      return it;
    } else {
      return kR * it + r < p.rows ? kR * it + r : p.rows - 1;
    }
  };
  auto row_ptr = [&](int row) {
    return reinterpret_cast<const typename F::Vec*>(p.q + static_cast<std::size_t>(row) * row_bytes);
  };
  typename F::Vec w[kR][kU];
  [[maybe_unused]] unsigned gsv[kR][kGS], gmv[kR][kGS];  // int4: scale / minimum of group s / 4 + 32 h + lane
  // The epilogue's values of row row_of(t, lane) in lanes < kR: its bias bits in a register; int8 /
  // fp8: its scale and residual copied into shared memory with cp.async, which holds no register
  // while the loads are in flight; int4 (no row scale): its residual in a register, and no
  // cp.async.wait_all at the end of each item: int4 decode +0.3% at short context, +1.0% at 4,096
  // (session 30's engine A/B; with int8 / fp8 in registers too, int8 lost 0.8% and fp8 was level).
  constexpr bool kEpiRegs = F::kGroups;
  __shared__ float epi[kNW][kR > 2 ? kR : 2][2];  // [warp][lane][scale, residual] (not kEpiRegs)
  unsigned ebias = 0u;
  [[maybe_unused]] float eres = 0.0f;  // kEpiRegs: the residual
  auto copy4 = [&](float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
                 "l"(src)
                 : "memory");
#else
    *dst = *src;
#endif
  };
  auto load_w = [&](const typename F::Vec* rp, int r, int s, int u) {
    const int i = s + lane + 32 * u;
    w[r][u] = kExact || i < vecs ? __ldcs(rp + i) : typename F::Vec{};  // streamed once: evict-first
  };
  auto load_groups = [&](int it, int s) {
    if constexpr (F::kGroups) {
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const std::size_t base = static_cast<std::size_t>(row_of(it, r)) * groups;
#pragma unroll
        for (int h = 0; h < kGS; ++h) {
          const int g = s / kVG + 32 * h + lane;
          const bool ok = kExact ? lane < kStepGroups : g < groups;
          gsv[r][h] = ok ? __ldcs(p.gs + base + g) : 0u;
          gmv[r][h] = ok ? __ldcs(p.gm + base + g) : 0u;
        }
      }
    }
  };
  auto load_step = [&](int it, int s) {
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const auto* rp = row_ptr(row_of(it, r));
#pragma unroll
      for (int u = 0; u < kU; ++u) load_w(rp, r, s, u);
    }
    load_groups(it, s);
  };
  // The epilogue's immutable per-row values: item t's, loaded with its first step (the first item)
  // or when it starts (the next ones), so their latency overlaps the item's.
  auto load_epi = [&](int it) {
    if (lane < kR) {
      const int row = row_of(it, lane);
      if constexpr (!F::kGroups) copy4(&epi[warp][lane][0], p.row_scale + row);
      if (p.bias) ebias = __ldg(p.bias + row);  // (a 4-byte copy could read past the end)
    }
  };

  constexpr int kB = kStage == kXSmemBig ? (F::kDp ? 5 : 4) : F::kGroups && kFixedCols > 0 ? (kR == 4 || kWide ? 4 : 2) : 1;  // see the prologue
  const float4* x4 = reinterpret_cast<const float4*>(p.x);
  const uint2* g4 = reinterpret_cast<const uint2*>(p.g);
  // Weights are immutable: the first step's loads go out before waiting on the previous kernel, and
  // the norm weight's first batch too (the rest is fetched into L1).
  // The int4 normalized kernels built for whole steps (q/k/v, gate/up, lm_head: I4ND, 7 slots)
  // load 4 of their 7 slots before the wait and the other 3 right after x's first batch of loads
  // (late_w, in the prologue), so that x's loads do not queue behind all of the item's weights: in
  // the engine q/k/v's staging loop took 2.7 us, 1.4 in a timing-only build without its loads and
  // shuffles (session 38's kernel timestamps, docs/PERFORMANCE.md). int4 decode @0 707.9 -> 730.7
  // tok/s, @4096 578.6 -> 590.6 (engine A/B, means of 2 rounds).
  constexpr int kUPre = kNorm && F::kDp && kExact ? 4 : kU;
  constexpr bool kSplit = kUPre < kU;
  auto late_w = [&]() {
    if (t < p.items) {
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const auto* rp = row_ptr(row_of(t, r));
#pragma unroll
        for (int u = kUPre; u < kU; ++u) load_w(rp, r, 0, u);
      }
    }
  };
  if (t < p.items) {
    if constexpr (kSplit) {
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const auto* rp = row_ptr(row_of(t, r));
#pragma unroll
        for (int u = 0; u < kUPre; ++u) load_w(rp, r, 0, u);
      }
      load_groups(t, 0);
    } else {
      load_step(t, 0);
    }
    load_epi(t);
  }
  [[maybe_unused]] uint2 gfirst[kNorm && F::kGroups ? kB : 1];
  if constexpr (kNorm && F::kGroups) {
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int f = static_cast<int>(threadIdx.x) + b * kNT;
      gfirst[b] = f < n4 ? __ldg(g4 + f) : make_uint2(0u, 0u);
    }
    if (n4 > kB * kNT) gemv_common::prefetch_l1<kNT>(p.g + 4 * kB * kNT, 2 * cols - 8 * kB * kNT);
  } else if constexpr (kNorm) {
    gemv_common::prefetch_l1<kNT>(p.g, 2 * cols);
  }
  pdl_wait();  // from here on: x, the residual and y, which other kernels write or read
  pdl_launch_dependents();
  KTRACE_WAITED();

  // Prologue, one pass over x: staging (x times the norm weight when kNorm; int4: pre-scaled, with
  // the per-group sums), the norm's sum of squares; x read in batches of kB float4s per thread so
  // the loads overlap (74 KB of x is 18.5 float4s per thread). The norm's 1 / rms is a factor of
  // every output (the product is linear in x), so it multiplies the sums in the epilogue instead of
  // x here: no second pass over the staged x and no barrier between the two (the reduction's
  // barrier also publishes the staging). (kB: 4 in the 8-bit big staging, 5 in int4's (the down
  // projection's 18,944 columns on 512 threads in 2 batches instead of 3: int4 decode @0 726.5 ->
  // 730.3 tok/s, @4096 585.0 -> 589.1, session 39's engine A/B, means of 2 rounds; 122 registers,
  // no spills), 4 in the int4 kernels built for the 7B width at 4 rows and in o's wide kernel, 2 in
  // o's (2 rows, 64 registers), else 1: kB = 2 in the generic int4 64-register kernels made them
  // spill, gate/up 26.4 -> 31.3 us. Copying x into shared memory with cp.async instead, every copy in
  // flight at once and no register held, measured 1.5-2.3x slower on every staged matrix in sessions
  // 7 and 30: int8 q/k/v 7.8 -> 16.8 us, down 19.8 -> 44.6. The down projection's x read as bf16 in
  // as many loads (session 31, timing-only): int8 / fp8 0.1-0.45 us faster, int4 0.3 slower, so the
  // staging is bound by loads in flight, not bytes: kX16 (bf16 x) takes half the loads.)
  auto stage_at = [&](int f) -> float4& { return smem[(f % kP) * ps + f / kP]; };
  // kDp: x's group of 128 columns (the warp's 32 float4s: f in a warp is one group) as 16-bit fixed
  // point; the even lane of each pair stores the word's uint4 (plane j = word % kWords, slot vector).
  // Returns the sum of this lane's 4 fixed-point values (integers, exact in fp32: |sum| over the
  // group < 2^22) and sets xs to xs_g. The group sums are of the fixed-point x~ too, so the minimum's
  // term m sum(x~) and s sum(q x~) add up to sum((s q + m) x~): x~'s errors meet the weights w, not
  // the offset s q (0 .. 15 s), whose common part m sum(x - x~) every row shares; emulated in float64
  // on test_gemv_quant_chain's int4 chain (4 seeds), exact sums of x gave relative errors of
  // 3.8-5.7e-4, these 3.7-4.0e-5.
  // m: the group's max |x| (the warp's, every lane).
  auto stage_dp = [&](float4 x, int f, float m, bool ok, float& xs) -> float {
    if constexpr (F::kDp) {
      const bool live = m >= 0x1p-100f;  // below that the group is taken as 0
      // (approximate division, <= 2 ulp: |x| qi stays below 32767.5, and x~'s error is relative to
      // xs_g, which is m / 32767 rounded, not 1 / qi)
      const float qi = live ? __fdividef(32767.0f, m) : 0.0f;
      xs = live ? m * (1.0f / 32767.0f) : 0.0f;
      if (ok && lane == 0) xscale[f >> 5] = xs;
      constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: x qi + kMagic holds round(x qi) in its low 16 bits
      const float q0 = fmaf(x.x, qi, kMagic), q1 = fmaf(x.y, qi, kMagic), q2 = fmaf(x.z, qi, kMagic),
                  q3 = fmaf(x.w, qi, kMagic);
      const uint4 word = dp_x(__float_as_uint(q0), __float_as_uint(q1), __float_as_uint(q2), __float_as_uint(q3));
      const int wi = f >> 1;
      if (ok && (f & 1) == 0) reinterpret_cast<uint4*>(smem)[(wi % F::kWords) * ps + wi / F::kWords] = word;
      return ((q0 - kMagic) + (q1 - kMagic)) + ((q2 - kMagic) + (q3 - kMagic));
    } else {
      return 0.0f;
    }
  };
  // x times the norm weight (bf16).
  auto gmul4 = [&](float4 v, uint2 gb) {
    return make_float4(bf16f(gb.x & 0xFFFFu) * v.x, bf16f(gb.x >> 16) * v.y, bf16f(gb.y & 0xFFFFu) * v.z,
                       bf16f(gb.y >> 16) * v.w);
  };
  [[maybe_unused]] float inv = 1.0f;
  [[maybe_unused]] __shared__ float xpart[F::kOffset ? kNW : 1];  // kOffset: the warps' sums of x
  [[maybe_unused]] float xs = 0.0f;                                  // kOffset: this thread's
  // kSums: the divisors [2][groups] and the groups' sums of x (gemv_quant_sums.cuh)
  constexpr int kSG = kSums ? gemv_quant_sums::kMaxGroups : 1;
  [[maybe_unused]] __shared__ float s_div[2 * kSG], s_gx[kSG];
  // int4: a batch in phases, each over its kB float4s: the loads, then the arithmetic (the norm
  // weight of the first batch is in registers, loaded before the wait), the group maxima's shuffles
  // interleaved, then the stores. No branch around a float4's work (a float4 past the end is zeros
  // and stores nothing), so the kB chains of dependent shuffles overlap instead of running one
  // after another in the branches a per-float4 `if` makes. The kernels' timestamps in the engine
  // (kernels/ktrace.cuh, session 38) had put the staging loop at 2.1-3.6 us of every product's
  // prologue (q/k/v 3.0-3.4 us against 2.0 for its whole main loop), and the per-float4 form with
  // kB = 4 measured no faster than kB = 1 in the engine (q/k/v 5.78 us alone against session 37's
  // 6.06). In phases, alone (bench_gemv_quant, graph + PDL; session 37's figures first, another
  // H200): q/k/v 6.06 -> 4.39 us, down 15.09 -> 14.62, o 3.83 -> 3.75, gate/up 20.76 -> 20.25,
  // lm_head 72.32 -> 71.27; int4 decode @0 681.1 -> 701.7 tok/s, @4096 562.9 -> 575.4 (engine A/B,
  // means of 3 rounds). 8-bit keeps the per-float4 form (below): in phases its down
  // product took 19.5 -> 27.4 us alone (int8; not analysed).
  if constexpr (kNorm || kSt || F::kGroups || F::kOffset) {
    float ss = 0.0f;
    if constexpr (kX16) {
      // (8-bit: 5 loads per batch, 9.25 per thread on the down product's 18,944 columns; o's 3,584
      // columns one batch of 2 at 64 registers, as int4's kB)
      const uint4* x8 = reinterpret_cast<const uint4*>(p.x);
      if constexpr (F::kDp) {
        gemv_quant_x16::stage_dp<kB, kNT, F::kWords>(x8, cols >> 3, reinterpret_cast<uint4*>(smem), ps, xscale, xsum);
      } else if constexpr (F::kGroups) {
        gemv_quant_x16::stage_groups<kB, kNT>(x8, cols >> 3, stage_at, xsum, [](float4 v, bool upper) { return F::prescale(v, upper); });
      } else {
        xs = gemv_quant_x16::stage_plain<kStage == kXSmemBig ? 5 : 2, kNT>(x8, cols >> 3, stage_at, [](float4 v) {
          if constexpr (F::kPrescale) return F::prescale(v, false);
          else return v;
        });
      }
    } else if constexpr (F::kGroups) {
      bool first = true;
      for (int f0 = threadIdx.x; f0 < n4; f0 += kB * kNT) {
        float4 v[kB];
        bool ok[kB];
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const int f = f0 + b * kNT;
          ok[b] = f < n4;  // warp-uniform (n4 is a multiple of 32: a warp holds one whole group)
          // staged: read once, keep it out of L1
          v[b] = ok[b] ? (kSt ? __ldcg(x4 + f) : x4[f]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        if constexpr (kWide) {
          // x as the decode attention's sums (QGemvArgs::x_div): a warp's float4s are one group of
          // 128 columns, one head. The divisors come into shared memory by one warp's coalesced
          // loads, then a block barrier (gemv_quant_sums.cuh has why and what it measured); the x
          // loads above are in flight across it. Every thread runs this loop exactly once (the
          // static_assert), so the barrier is uniform. The division is gemv_quant_sums::divide4.
          if (p.xdiv) {
            static_assert(kFixedCols / 4 >= kNT && kFixedCols / 4 <= kB * kNT, "kWide: one staging batch per thread");
            constexpr int kGroupsW = (kFixedCols + kQuantGroup - 1) / kQuantGroup;
            __shared__ float sdiv[2 * kGroupsW];  // [2][groups]: d0 of every group, then d1
            if (warp == 0) gemv_quant_sums::load_sum_divisors(p.xdiv, kGroupsW, lane, sdiv);
            __syncthreads();
            float d0[kB], d1[kB];
#pragma unroll
            for (int b = 0; b < kB; ++b) {
              const int g = (f0 + b * kNT) >> 5;
              d0[b] = ok[b] ? sdiv[g] : 1.0f;
              d1[b] = ok[b] ? sdiv[groups + g] : 0.0f;
            }
#pragma unroll
            for (int b = 0; b < kB; ++b) v[b] = gemv_quant_sums::divide4(v[b], d0[b], d1[b], x4 + n4 + f0 + b * kNT);
          }
        }
        if constexpr (kSplit) {
          // Every thread runs a first batch: kExact rows are whole sets of 3,584 columns, 896 or more
          // float4s of x for 256 threads.
          if (first) late_w();
        }
        float part[kB];                  // the float4s' sums, for the group sums
        [[maybe_unused]] float gxs[kB] = {};  // kDp: the groups' xs_g
        if constexpr (kNorm) {
#pragma unroll
          for (int b = 0; b < kB; ++b) {
            const int f = f0 + b * kNT;
            ss += v[b].x * v[b].x + v[b].y * v[b].y + v[b].z * v[b].z + v[b].w * v[b].w;
            v[b] = gmul4(v[b], first ? gfirst[b] : ok[b] ? __ldg(g4 + f) : make_uint2(0u, 0u));
          }
        }
        if constexpr (F::kDp) {
          // The group maxima by one warp reduction each (REDUX, sm_80+): |x|'s bit pattern orders as
          // its value (no sign bit), so the unsigned maximum is fmaxf's, bit for bit.
          float m[kB];
#pragma unroll
          for (int b = 0; b < kB; ++b) {
            const float a = fmaxf(fmaxf(fabsf(v[b].x), fabsf(v[b].y)), fmaxf(fabsf(v[b].z), fabsf(v[b].w)));
            m[b] = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(a)));
          }
#pragma unroll
          for (int b = 0; b < kB; ++b) part[b] = stage_dp(v[b], f0 + b * kNT, m[b], ok[b], gxs[b]);
        } else {
#pragma unroll
          for (int b = 0; b < kB; ++b) {
            const int f = f0 + b * kNT;
            part[b] = ((v[b].x + v[b].y) + v[b].z) + v[b].w;
            if constexpr (kSt) {
              if (ok[b]) stage_at(f) = F::prescale(v[b], f & 1);
            }
          }
        }
        // The group sums: 2^(K - 149) times the sum on the fp32 path; kDp: xs_g times the sum of x~,
        // whose parts are integers (|sum| < 2^22, exact in fp32 either way): one integer warp
        // reduction (REDUX) each, the same value as the float butterfly's.
        if constexpr (F::kDp) {
#pragma unroll
          for (int b = 0; b < kB; ++b) {
            const int sb = __reduce_add_sync(0xffffffffu, __float2int_rn(part[b]));
            if (lane == 0 && ok[b]) xsum[(f0 + b * kNT) >> 5] = static_cast<float>(sb) * gxs[b];
          }
        } else if constexpr (kB >= 4) {  // the first 4 in one butterfly, a fifth (int4 down) by itself
          const float p4[4] = {part[0], part[1], part[2], part[3]};
          const float sum = warp_sum4(p4);
          const int bl = static_cast<int>((lane >> 3) & 3);
          const int f = f0 + bl * kNT;
          const float sc = F::kDp ? (bl == 0 ? gxs[0] : bl == 1 ? gxs[1] : bl == 2 ? gxs[2] : gxs[3]) : 0x1p-53f;
          if ((lane & 7) == 0 && f < n4) xsum[f >> 5] = sum * sc;
#pragma unroll
          for (int b = 4; b < kB; ++b) {
            const float sb = warp_sum(part[b]);
            if (lane == 0 && ok[b]) xsum[(f0 + b * kNT) >> 5] = sb * (F::kDp ? gxs[b] : 0x1p-53f);
          }
        } else {
#pragma unroll
          for (int b = 0; b < kB; ++b) {
            const float sum = warp_sum(part[b]);
            if (lane == 0 && ok[b]) xsum[(f0 + b * kNT) >> 5] = sum * (F::kDp ? gxs[b] : 0x1p-53f);
          }
        }
        first = false;
      }
    } else {
      // 8-bit: the float4s one after another (in the big staging ptxas unrolls this loop to 3
      // batches, 12 loads in flight; the int4 form above made the int8 down projection 19.5 -> 27.4
      // us alone). kSums: s0 staged as it is, and the divisors for divide_staged.
      if constexpr (kSums) {
        if (warp == 0) gemv_quant_sums::load_sum_divisors(p.xdiv, n4 >> 5, lane, s_div);
      }
      for (int f0 = threadIdx.x; f0 < n4; f0 += kB * kNT) {
        float4 v[kB];
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const int f = f0 + b * kNT;
          if (f < n4) v[b] = kSt ? __ldcg(x4 + f) : x4[f];  // staged: read once, keep it out of L1
        }
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const int f = f0 + b * kNT;
          if (f < n4) {
            float4 x = v[b];
            if constexpr (kNorm) {
              ss += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
              x = gmul4(x, __ldg(g4 + f));
            }
            if constexpr (kSums) {
              stage_at(f) = x;
            } else {
              if constexpr (F::kOffset) xs += ((x.x + x.y) + x.z) + x.w;
              if constexpr (kSt && F::kPrescale) stage_at(f) = F::prescale(x, false);
              else if constexpr (kSt) stage_at(f) = x;
            }
          }
        }
      }
    }
    KTRACE_LOOP();
    if constexpr (F::kOffset) {
      xs = warp_sum(xs);
      if (lane == 0) xpart[warp] = xs;
    }
    if constexpr (kNorm) inv = block_inv_rms<kNW>(ss, cols, p.eps);  // its __syncthreads publishes the staging
  }
  if constexpr (!kNorm && (kSt || F::kGroups || F::kOffset)) __syncthreads();
  // kOffset: -128 sum(x) (x times the norm weight), the sums' offset, in every lane of every warp.
  [[maybe_unused]] float xoff = 0.0f;
  if constexpr (F::kOffset) xoff = -128.0f * warp_sum(lane < kNW ? xpart[lane] : 0.0f);
  if constexpr (kSums) {
    gemv_quant_sums::divide_staged<F, kNT>(stage_at, x4, n4, s_div, n4 >> 5, s_gx);
    __syncthreads();
    if constexpr (F::kOffset) {
      float sx = 0.0f;
      for (int g = lane; g < (n4 >> 5); g += 32) sx += s_gx[g];
      xoff = -128.0f * warp_sum(sx);
    }
  }
  KTRACE_PROLOGUE();

  // x values for word j of vector i (F::kXW float4s).
  auto xword = [&](int i, int j, float4* xw) {
#pragma unroll
    for (int h = 0; h < F::kXW; ++h) {
      const int k = F::kXW * j + h;
      if constexpr (kSt) {
        xw[h] = smem[k * ps + i];
      } else {
        const int f = kP * i + k;
        float4 v = x4[f];
        if constexpr (kNorm) v = gmul4(v, __ldg(g4 + f));
        if constexpr (F::kPrescale) v = F::prescale(v, h == 1);
        xw[h] = v;
      }
    }
  };

  for (; t < p.items;) {
    // Output of lane r < kOuts: swiglu: kOuts t + r; else row kR t + r (clamped to a valid one).
    if (lane < kOuts && p.residual) {
      if constexpr (kEpiRegs) eres = __ldcg(p.residual + row_of(t, lane));
      else copy4(&epi[warp][lane][1], p.residual + row_of(t, lane));
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (p.l2_next && lane == 0 && t + stride < p.items) {
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const std::uint8_t* row = p.q + static_cast<std::size_t>(row_of(t + stride, r)) * row_bytes;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row), "r"(static_cast<unsigned>(row_bytes))
                     : "memory");  // row_bytes: a multiple of 16 on the vector path
      }
    }
#endif
    float acc[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = 0.0f;
    for (int s = 0;;) {
      // The next load position: this item's next step or the next item's first.
      const bool last = s + kStep >= vecs;
      const int ns = last ? 0 : s + kStep;
      const int nt = last ? t + stride : t;
      const bool more = nt < p.items;
      // int4: the scales of group s / kVG + 32 h + lane, rows 2 q and 2 q + 1 packed in sp[q][h].
      [[maybe_unused]] unsigned sp[kPairs][kGS];
      if constexpr (F::kGroups) {
#pragma unroll
        for (int h = 0; h < kGS; ++h) {
#pragma unroll
          for (int q = 0; q < kPairs; ++q)
            sp[q][h] = kR == 1 ? gsv[0][h] : __byte_perm(gsv[2 * q][h], gsv[(2 * q + 1) % kR][h], 0x5410);
          if (kExact ? lane < kStepGroups : s / kVG + 32 * h + lane < groups) {
            const float xs = xsum[s / kVG + 32 * h + lane];
#pragma unroll
            for (int r = 0; r < kR; ++r) acc[r] = fmaf(bf16f(gmv[r][h]), xs, acc[r]);
          }
        }
        if constexpr (kPipe) {
          if (more) load_groups(nt, ns);
        }
      }
      [[maybe_unused]] const int nit = more ? nt : t;  // the item of the refills
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int i = s + lane + 32 * u;
        [[maybe_unused]] unsigned su[kPairs] = {};
        if constexpr (F::kGroups) {  // the group of vector i, (lane + 32 u) / kVG from the step's first
#pragma unroll
          for (int q = 0; q < kPairs; ++q) su[q] = __shfl_sync(0xffffffffu, sp[q][u / kVG], lane / kVG + (32 / kVG) * (u % kVG));
        }
        if (kExact || i < vecs) {
          float d[kR];
          if constexpr (F::kDp) {
            // Per row: H = sum q h, L = sum q l over the vector's columns, then (256 H + L) xs_g.
            int hs[kR];
            unsigned ls[kR];
#pragma unroll
            for (int r = 0; r < kR; ++r) hs[r] = 0, ls[r] = 0u;
#pragma unroll
            for (int j = 0; j < F::kWords; ++j) {
              const uint4 xq = xdp[j * ps + i];  // h even, h odd, l even, l odd
#pragma unroll
              for (int r = 0; r < kR; ++r) {
                const unsigned wv = word(w[r][u], j);
                const unsigned ev = wv & 0x0F0F0F0Fu, od = (wv >> 4) & 0x0F0F0F0Fu;
                hs[r] = __dp4a(static_cast<int>(ev), static_cast<int>(xq.x), hs[r]);
                hs[r] = __dp4a(static_cast<int>(od), static_cast<int>(xq.y), hs[r]);
                ls[r] = __dp4a(ev, xq.z, ls[r]);
                ls[r] = __dp4a(od, xq.w, ls[r]);
              }
            }
            const float xg = xscale[i / kVG];
#pragma unroll
            for (int r = 0; r < kR; ++r) d[r] = __int2float_rn(hs[r] * 256 + static_cast<int>(ls[r])) * xg;
          } else {
#pragma unroll
            for (int r = 0; r < kR; ++r) d[r] = 0.0f;
#pragma unroll
            for (int j = 0; j < F::kWords; ++j) {
              float4 xw[F::kXW];
              xword(i, j, xw);
#pragma unroll
              for (int r = 0; r < kR; ++r) d[r] = F::dot_word(word(w[r][u], j), xw, d[r]);
            }
          }
          if constexpr (F::kGroups) {
#pragma unroll
            for (int r = 0; r < kR; ++r)
              acc[r] = fmaf(__uint_as_float((r & 1) ? su[r / 2] & 0xFFFF0000u : su[r / 2] << 16), d[r], acc[r]);
          } else {
#pragma unroll
            for (int r = 0; r < kR; ++r) acc[r] += d[r];
          }
        }
        if constexpr (kPipe) {
          if (more) {
#pragma unroll
            for (int r = 0; r < kR; ++r) load_w(row_ptr(row_of(nit, r)), r, ns, u);
          }
        }
      }
      if (last) {
        if constexpr (!kPipe) {
          if (more) load_step(nt, 0);  // next item's first step, before the reduction
        }
        break;
      }
      if constexpr (!kPipe) load_step(t, ns);
      s = ns;
    }
    // Every lane gets the sums; lane r < kR finishes row r: scale, bias, then (swiglu, lanes r <
    // kOuts, with the up row's value from lane r + kOuts) the activation, the residual.
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = warp_sum(acc[r]);
    float v = acc[0];
#pragma unroll
    for (int r = 1; r < kR; ++r) v = lane == r ? acc[r] : v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (!kEpiRegs) asm volatile("cp.async.wait_all;" ::: "memory");  // this thread's copies of epi
#endif
    if constexpr (F::kGroups) {
      if constexpr (!F::kDp) v *= 0x1p53f;  // 2^(149 - K)
    } else {
      if constexpr (F::kOffset) v = fmaf(v, 0x1p53f, xoff);  // sum((q + 128) x) - 128 sum(x)
      if (lane < kR) v *= epi[warp][lane][0];
    }
    if constexpr (kNorm) v *= inv;  // the norm's 1 / rms (the prologue staged x times the norm weight)
    if (p.bias) v += bf16f(ebias);
    if constexpr (kSwiglu) {
      const float up = __shfl_down_sync(0xffffffffu, v, kOuts);
      const int o = kOuts == 1 ? t : kOuts * t + lane;
      if (lane < kOuts && (kOuts == 1 || o < p.outs)) {  // (one output per item: t < items = outputs)
        v = v / (1.0f + expf(-v)) * up;
        if (p.residual) v += kEpiRegs ? eres : epi[warp][lane][1];
        if (p.y16) p.y16[o] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
        else p.y[o] = v;
      }
    } else {
      const int row = kR * t + lane;
      if (lane < kR && row < p.rows) {
        if (p.residual) v += kEpiRegs ? eres : epi[warp][lane][1];
        p.y[row] = v;
      }
    }
    t += stride;
    if (t < p.items) load_epi(t);  // the next item's, now that this one's are used
  }
  KTRACE_FINISH();
}
