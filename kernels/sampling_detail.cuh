// Private to the GPU sampling op: the definitions its passes share (constants, the workspace and
// per-row state structs, device helpers) and the host launchers of the passes. Included only by
// kernels/sampling.cu (launch_sample, the workspace layout), sampling_passes.cu (prep, stats,
// top-k, total, top-p, tie) and sampling_draw.cu (final, probs); see sampling.cuh for the
// semantics, the passes and their cost.
//
// Layout: every pass is launched on a grid (blocks per row, rows); block b of a row handles logits
// [b * 1024, (b + 1) * 1024), 4 consecutive ones per thread (one float4; per-thread order is index
// order, which the first-index argmax and the tie ranks rely on). A pass writes per-block partial
// results (sums, histograms) to the workspace; the next pass reduces them at its start (see
// "passes" below). The kernels form one programmatic-dependent-launch chain (kernels/pdl.cuh): each
// waits for the previous one before touching memory, and lets the next one launch right away.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <cuda_runtime.h>
#include <curand_philox4x32_x.h>

#include "kernels/pdl.cuh"
#include "kernels/sampling.cuh"

namespace cosmos::kernels::sampling_detail {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kItems = 4;   // one float4 per thread and pass
constexpr int kChunk = kThreads * kItems;  // logits per block (149 blocks per row for 152064)
constexpr int kBins = 2048;                // radix digits: key bits 31..21, 20..10 (11 bits), 9..0 (10)
constexpr int kPenaltyIds = 32768;  // prep: ids per block (a shared-memory bitset of 4 KB)
constexpr int kHistBatch = 8;       // history ids loaded per thread at once (prep, stats)
constexpr int kCounters = 4;  // per row: the ticket counters of stats and final
constexpr unsigned kFull = 0xffffffffu;
constexpr float kInf = std::numeric_limits<float>::infinity();

enum : int { kSingle = 0, kPosInf = 1, kSample = 2 };
enum : int { kCtrStats, kCtrFinal };

// Per-row results passed from pass to pass (written by a pass's last block).
struct RowState {
  int mode;   // kSingle: the answer is `token`; kPosInf: uniform over the +inf logits; kSample
  int token;
  float M;    // the max processed logit (after temperature)
  int use_topk, use_topp, use_minp;
  float thr;  // top-p: fp32(1 - top_p)
  float min_p;
  // Each field is written once per launch, by one pass (stats' last block, or block 0 of the pass
  // that derives it in its prologue), and read only by later passes; except mode, which top-p's
  // pass 0 sets to kSingle for a dominant token (token: stats' first maximum).
  unsigned k_prefix0, k_rem0;  // top-k select after digit 1: key prefix, rank left inside it (stats)
  unsigned k_prefix1, k_rem1;  // ... after digit 2 (topk pass 2)
  unsigned kth_key;            // candidates: key >= kth_key; 0: all (total)
  double T;                    // sum of the candidates' weights (topp pass 0)
  int p_none;                  // no cumulative sum exceeds thr: keep only the top token (topp 1, tie)
  unsigned p_prefix1, p_prefix2;          // top-p select: key prefix after digits 1, 2 (topp 1, 2)
  unsigned long long p_below1, p_below2;  // fixed-point mass of candidates below the prefix
  unsigned pkey;               // the boundary key: below it removed, above it kept (topp 1 or tie)
  unsigned long long p_below;  // mass below pkey (tie)
  int m;                       // tokens at pkey removed, the m lowest ids (final)
  float w_min;                 // min-p: the smallest weight kept (final)
  double Tf;                   // the final total (final's last block)
};

struct Ws {
  unsigned* counters;            // [rows][kCounters]  zeroed by prep; stats' counter left at zero
  unsigned* hist_k;              // [rows][3][kBins] top-k digit counts      zeroed
  unsigned long long* hist_p;    // [rows][3][kBins] top-p digit masses      zeroed
  RowState* state;               // [rows]
  double* part_d;                // [rows][nb] per-block partials: T (total)
  double* part_a;                // [rows][nb] weight above pkey (tie)
  double* part_tf;               // [rows][nb] final total (final)
  float* part_f;                 // [rows][nb]
  int* part_i;                   // [rows][nb]
  int* tie_cnt;                  // [rows][nb]
  float* wbuf;                   // [rows][vocab] candidate weights (0: not a candidate)
  int nb;
};

struct Job {
  float* logits;
  const SampleParams* params;
  const int* history;
  const int* hoff;
  int* out_ids;
  int* next_ids;  // optional second copy of out_ids
  int* hist_append;  // optional (one row): the id also at hist_append[hoff[1]]
  float* probs;
  int rows, vocab;
  bool all_greedy, top_k, top_p;  // top_k / top_p: their passes run
  bool stats_penalty;  // all-greedy launches skip prep: stats applies the repetition penalty itself
};

// fp32(1 - top_p) with top_p's shortest round-trip decimal, like the CPU Sampler (which prints it
// with std::to_chars): the decimal is the first n-place rounding of top_p that reads back as top_p.
// top_p * 10^n is exact in double for n <= 12 (24-bit mantissa times 5^n < 2^28), and r / 10^n is
// the correctly rounded double of the decimal, as std::from_chars gives.
inline __host__ __device__ float top_p_threshold(float top_p) {
  double decimal = static_cast<double>(top_p);
  double scale = 1.0;
  for (int n = 1; n <= 12; ++n) {
    scale *= 10.0;
    const double r = round(static_cast<double>(top_p) * scale) / scale;
    if (static_cast<float>(r) == top_p) {
      decimal = r;
      break;
    }
  }
  return static_cast<float>(1.0 - decimal);
}

struct Eff {
  float t;
  int k;
  float top_p, min_p, rp;
};

// The CPU Sampler's clamping of invalid parameters.
inline __device__ Eff effective(const SampleParams& p) {
  Eff e;
  e.t = isnan(p.temperature) ? 1.0f : p.temperature;
  e.k = p.top_k > 0 ? p.top_k : 0;
  e.top_p = isnan(p.top_p) ? 1.0f : fminf(fmaxf(p.top_p, 0.0f), 1.0f);
  e.min_p = isnan(p.min_p) ? 0.0f : fminf(fmaxf(p.min_p, 0.0f), 1.0f);
  e.rp = (p.repetition_penalty > 0.0f && !isinf(p.repetition_penalty)) ? p.repetition_penalty : 1.0f;
  return e;
}

// Order-preserving key of a (non-NaN) float: a < b as floats <=> key(a) < key(b); -0 counts as +0,
// as float comparisons do.
__device__ __forceinline__ unsigned key_of(float y) {
  unsigned b = __float_as_uint(y);
  if ((b << 1) == 0u) b = 0u;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float float_of_key(unsigned k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// exp(y - M) in fp32: the subtraction in fp32 as on the CPU, exp in double, rounded once.
__device__ __forceinline__ float weight_of(float y, float M) {
  return static_cast<float>(exp(static_cast<double>(y - M)));
}

// The softmax output as torch gives it: fp32(w / T).
__device__ __forceinline__ float prob_of(float w, double T) {
  return static_cast<float>(static_cast<double>(w) / T);
}

// p in 2^-60 fixed point: exact for p >= 2^-36 (a float's 24 bits), so sums are exact and
// order-independent; p <= 1, and the sum of all p stays below 2^61.
__device__ __forceinline__ unsigned long long fixed_of(float p) {
  return static_cast<unsigned long long>(static_cast<double>(p) * 0x1p60);
}

// HF's top-p test on a cumulative sum: removed while fp32(cum) <= thr.
__device__ __forceinline__ bool crosses(unsigned long long cum, float thr) {
  return static_cast<float>(static_cast<double>(cum) * 0x1p-60) > thr;
}

// Exp(1) noise for tokens i0..i0+3 of the draw (seed, step), i0 % 4 == 0: one Philox4x32-10 call,
// 24 random bits per token, u in (0, 1).
__device__ __forceinline__ void exp_noise4(unsigned long long seed, unsigned long long step, int i0, float (&e)[4]) {
  const uint4 ctr = make_uint4(static_cast<unsigned>(i0) >> 2, 0x5eed5eedu, static_cast<unsigned>(step),
                               static_cast<unsigned>(step >> 32));
  const uint2 key = make_uint2(static_cast<unsigned>(seed), static_cast<unsigned>(seed >> 32));
  const uint4 r = curand_Philox4x32_10(ctr, key);
  const unsigned bits[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int c = 0; c < 4; ++c) e[c] = -logf((static_cast<float>(bits[c] >> 8) + 0.5f) * 0x1p-24f);
}

// The smallest weight w with fp32(w / Tp) >= scaled (fp32(w / Tp) is monotone in w), so that min-p's
// test is one fp32 comparison per token.
inline __device__ float min_p_weight(float scaled, double Tp) {
  if (!(scaled > 0.0f)) return 0.0f;
  float c = static_cast<float>(static_cast<double>(scaled) * Tp);
  while (c > 0.0f && prob_of(nextafterf(c, 0.0f), Tp) >= scaled) c = nextafterf(c, 0.0f);
  while (prob_of(c, Tp) < scaled) c = nextafterf(c, kInf);
  return c;
}

// This thread's kItems values p[i0 .. i0 + kItems): one 16-byte access when aligned and in range.
// Values past n read as `fill`; stores past n are dropped.
__device__ __forceinline__ void load_items(const float* p, int i0, int n, float (&v)[kItems], float fill) {
  static_assert(kItems == 4);
  if (i0 + kItems <= n && (reinterpret_cast<std::uintptr_t>(p + i0) & 15u) == 0) {
    const float4 q = *reinterpret_cast<const float4*>(p + i0);
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
  } else {
#pragma unroll
    for (int it = 0; it < kItems; ++it) v[it] = i0 + it < n ? p[i0 + it] : fill;
  }
}

__device__ __forceinline__ void store_items(float* p, int i0, int n, const float (&v)[kItems]) {
  if (i0 + kItems <= n && (reinterpret_cast<std::uintptr_t>(p + i0) & 15u) == 0) {
    *reinterpret_cast<float4*>(p + i0) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int it = 0; it < kItems; ++it)
      if (i0 + it < n) p[i0 + it] = v[it];
  }
}

// ---- block helpers (kThreads threads; every thread must call them) ----

template <typename T>
__device__ T block_sum(T v) {  // the sum in every thread, summed in the same order every run
  __shared__ T part[kWarps];
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(kFull, v, d);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = part[0];
  for (int w = 1; w < kWarps; ++w) r += part[w];
  return r;
}

template <typename T>
struct Best {
  T v;
  int i;
};

// The larger value; equal values: the lower index (torch.argmax's first maximum).
template <typename T>
__device__ __forceinline__ Best<T> better(Best<T> a, Best<T> b) {
  return (a.v > b.v || (a.v == b.v && a.i < b.i)) ? a : b;
}

template <typename T>
__device__ Best<T> block_best(Best<T> b) {
  __shared__ T pv[kWarps];
  __shared__ int pi[kWarps];
  for (int d = 16; d > 0; d >>= 1) {
    const Best<T> o{__shfl_xor_sync(kFull, b.v, d), __shfl_xor_sync(kFull, b.i, d)};
    b = better(b, o);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    pv[threadIdx.x >> 5] = b.v;
    pi[threadIdx.x >> 5] = b.i;
  }
  __syncthreads();
  Best<T> r{pv[0], pi[0]};
  for (int w = 1; w < kWarps; ++w) r = better(r, Best<T>{pv[w], pi[w]});
  return r;
}

inline __device__ int block_exclusive_sum(int v) {
  __shared__ int part[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int incl = v;
  for (int d = 1; d < 32; d <<= 1) {
    const int t = __shfl_up_sync(kFull, incl, d);
    if (lane >= d) incl += t;
  }
  __syncthreads();
  if (lane == 31) part[warp] = incl;
  __syncthreads();
  int off = 0;
  for (int w = 0; w < warp; ++w) off += part[w];
  return off + incl - v;
}

// True in the last block of the row to get here: all the row's blocks have written their partial
// results and histogram atomics, and they are visible to it (read them with __ldcg). The barrier
// orders the block's writes before thread 0's fence and ticket (release); thread 0's fence after
// the ticket and the barrier order the reads after it (acquire), as CUTLASS's semaphores do.
inline __device__ bool arrive_last(unsigned* counter) {
  __shared__ unsigned ticket;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    ticket = atomicAdd(counter, 1u);
    __threadfence();
  }
  __syncthreads();
  return ticket == gridDim.x - 1;
}

template <typename T>
__device__ T sum_parts(const T* p, int n) {  // sum of the row's n block partials, in a fixed order
  T s = 0;
  for (int b = threadIdx.x; b < n; b += kThreads) s += __ldcg(p + b);
  return block_sum(s);
}

template <typename T>
__device__ T block_exclusive_scan(T v, T& total) {  // exclusive prefix sum in thread order, and the total
  __shared__ T part[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T incl = v;
  for (int d = 1; d < 32; d <<= 1) {
    const T t = __shfl_up_sync(kFull, incl, d);
    if (lane >= d) incl += t;
  }
  __syncthreads();
  if (lane == 31) part[warp] = incl;
  __syncthreads();
  T off = 0;
  total = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) off += part[w];
    total += part[w];
  }
  return off + incl - v;
}

// All threads: counts s[0..n) in shared memory (n = 2048 or 1024), 1 <= target <= sum. Thread t owns
// bins [t q, (t + 1) q). Returns (in every thread) the largest bin b with sum(s[b..n)) >= target,
// and above = sum(s[b+1..n)).
inline __device__ void select_from_top(const unsigned* s, int n, unsigned target, int& bin, unsigned& above) {
  __shared__ int s_bin;
  __shared__ unsigned s_above;
  const int q = n / kThreads, lo = static_cast<int>(threadIdx.x) * q;
  unsigned mine = 0;
  for (int b = lo; b < lo + q; ++b) mine += s[b];
  unsigned total;
  const unsigned before = block_exclusive_scan(mine, total);
  const unsigned from_here = total - before;  // sum(s[lo..n))
  if (threadIdx.x == 0) {
    s_bin = 0;
    s_above = 0;
  }
  __syncthreads();
  if (from_here >= target && from_here - mine < target) {  // exactly one owner
    unsigned acc = from_here - mine;
    for (int b = lo + q - 1; b >= lo; --b) {
      if (acc + s[b] >= target) {
        s_bin = b;
        s_above = acc;
        break;
      }
      acc += s[b];
    }
  }
  __syncthreads();
  bin = s_bin;
  above = s_above;
}

// All threads: fixed-point masses s[0..n) in ascending key order after `below`. Returns the smallest
// bin b where the cumulative sum crosses thr and new_below = below + sum(s[0..b)); false when none
// does. Same ownership as select_from_top.
inline __device__ bool select_mass_from_bottom(const unsigned long long* s, int n, unsigned long long below, float thr,
                                               int& bin, unsigned long long& new_below) {
  __shared__ int s_bin;
  __shared__ unsigned long long s_below;
  const int q = n / kThreads, lo = static_cast<int>(threadIdx.x) * q;
  unsigned long long mine = 0;
  for (int b = lo; b < lo + q; ++b) mine += s[b];
  unsigned long long total;
  const unsigned long long before = below + block_exclusive_scan(mine, total);
  if (threadIdx.x == 0) s_bin = -1;
  __syncthreads();
  if (crosses(before + mine, thr) && !crosses(before, thr)) {  // the first crossing: one owner
    unsigned long long acc = before;
    for (int b = lo; b < lo + q; ++b) {
      if (crosses(acc + s[b], thr)) {
        s_bin = b;
        s_below = acc;
        break;
      }
      acc += s[b];
    }
  }
  __syncthreads();
  if (s_bin < 0) return false;
  bin = s_bin;
  new_below = s_below;
  return true;
}

// ---- passes ----
// Each starts with pdl_wait(): nothing is read or written before the previous pass is complete.
// A pass's per-row result (a digit of a select, a sum) is derived at the start of the next pass by
// every block, identically (same data, same order), and block 0 stores it in RowState for the
// passes after; only stats and final end with a last-block reduction (their results are needed
// when no pass follows).
// The pass kernels are in sampling_passes.cu (prep .. tie) and sampling_draw.cu (final, probs).

// Row pointers and this thread's first index.
struct Slice {
  std::size_t off;  // row * vocab
  int base;         // first logit of this thread
};

__device__ __forceinline__ Slice slice(const Job& j) {
  return Slice{static_cast<std::size_t>(blockIdx.y) * j.vocab,
               static_cast<int>(blockIdx.x) * kChunk + static_cast<int>(threadIdx.x) * kItems};
}

__device__ __forceinline__ bool block0_thread0() { return blockIdx.x == 0 && threadIdx.x == 0; }

// The row's id into out_ids (and next_ids, and the history, when asked): one thread per row.
__device__ __forceinline__ void write_id(const Job& j, int row, int id) {
  j.out_ids[row] = id;
  if (j.next_ids) j.next_ids[row] = id;
  if (j.hist_append) j.hist_append[j.hoff[1]] = id;
}

template <typename T>
__device__ void load_hist(T* dst, const T* src, int n) {
  for (int b = threadIdx.x; b < n; b += kThreads) dst[b] = src[b];
  __syncthreads();
}

template <typename T>
__device__ void zero_hist(T* h) {
  for (int b = threadIdx.x; b < kBins; b += kThreads) h[b] = 0;
  __syncthreads();
}

template <typename T>
__device__ void flush_hist(T* dst, const T* h, int n) {
  __syncthreads();
  for (int b = threadIdx.x; b < n; b += kThreads)
    if (h[b]) atomicAdd(&dst[b], h[b]);
}

// ---- host launchers of the passes ----
// Each launches its kernel with launch_pdl() on `grid` (blocks per row, rows; prep: see
// launch_sample), kThreads threads per block and no dynamic shared memory, and returns
// launch_pdl()'s result.

// sampling_passes.cu
cudaError_t launch_prep_pass(dim3 grid, cudaStream_t stream, const Job& j, uint4* zero, std::size_t words,
                             bool penalty);
cudaError_t launch_stats_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w);
cudaError_t launch_topk_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w, int pass);
cudaError_t launch_total_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w);
cudaError_t launch_topp_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w, int pass);
cudaError_t launch_tie_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w);

// sampling_draw.cu
cudaError_t launch_final_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w);
cudaError_t launch_probs_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w);

}  // namespace cosmos::kernels::sampling_detail
