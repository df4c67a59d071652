// GPU sampling: see sampling.cuh for the semantics, the passes and their cost.
//
// Layout: every pass is launched on a grid (blocks per row, rows); block b of a row handles logits
// [b * 1024, (b + 1) * 1024), 4 consecutive ones per thread (one float4; per-thread order is index
// order, which the first-index argmax and the tie ranks rely on). A pass writes per-block partial
// results (sums, histograms) to the workspace; the next pass reduces them at its start (see
// "passes" below). The kernels form one programmatic-dependent-launch chain (kernels/pdl.cuh): each
// waits for the previous one before touching memory, and lets the next one launch right away.
#include "kernels/sampling.cuh"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>

#include <curand_philox4x32_x.h>

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kItems = 4;   // one float4 per thread and pass
constexpr int kChunk = kThreads * kItems;  // logits per block (149 blocks per row for 152064)
constexpr int kBins = 2048;                // radix digits: key bits 31..21, 20..10 (11 bits), 9..0 (10)
constexpr int kPenaltyIds = 32768;  // prep: ids per block (a shared-memory bitset of 4 KB)
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
  // that derives it in its prologue), and read only by later passes.
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
  unsigned* counters;            // [rows][kCounters]                        zeroed each launch
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
  float* probs;
  int rows, vocab;
  bool all_greedy, top_k, top_p;  // top_k / top_p: their passes run
};

struct Layout {
  std::size_t counters, hist_k, hist_p, zero_end, state, part_d, part_a, part_tf, part_f, part_i, tie_cnt, wbuf,
      total;
  int nb;
};

Layout layout(int rows, int vocab) {
  Layout l{};
  l.nb = vocab > 0 ? (vocab + kChunk - 1) / kChunk : 1;
  const std::size_t r = static_cast<std::size_t>(rows > 0 ? rows : 1);
  const std::size_t nb = static_cast<std::size_t>(l.nb);
  std::size_t at = 0;
  auto take = [&at](std::size_t bytes) {
    const std::size_t p = at;
    at += (bytes + 255) / 256 * 256;
    return p;
  };
  l.counters = take(r * kCounters * sizeof(unsigned));
  l.hist_k = take(r * 3 * kBins * sizeof(unsigned));
  l.hist_p = take(r * 3 * kBins * sizeof(unsigned long long));
  l.zero_end = at;
  l.state = take(r * sizeof(RowState));
  l.part_d = take(r * nb * sizeof(double));
  l.part_a = take(r * nb * sizeof(double));
  l.part_tf = take(r * nb * sizeof(double));
  l.part_f = take(r * nb * sizeof(float));
  l.part_i = take(r * nb * sizeof(int));
  l.tie_cnt = take(r * nb * sizeof(int));
  l.wbuf = take(r * static_cast<std::size_t>(vocab > 0 ? vocab : 1) * sizeof(float));
  l.total = at;
  return l;
}

// fp32(1 - top_p) with top_p's shortest round-trip decimal, like the CPU Sampler (which prints it
// with std::to_chars): the decimal is the first n-place rounding of top_p that reads back as top_p.
// top_p * 10^n is exact in double for n <= 12 (24-bit mantissa times 5^n < 2^28), and r / 10^n is
// the correctly rounded double of the decimal, as std::from_chars gives.
__host__ __device__ float top_p_threshold(float top_p) {
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
__device__ Eff effective(const SampleParams& p) {
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
__device__ float min_p_weight(float scaled, double Tp) {
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

__device__ int block_exclusive_sum(int v) {
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
__device__ bool arrive_last(unsigned* counter) {
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
__device__ void select_from_top(const unsigned* s, int n, unsigned target, int& bin, unsigned& above) {
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
__device__ bool select_mass_from_bottom(const unsigned long long* s, int n, unsigned long long below, float thr,
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

// Zeroes the ticket counters and histograms (`words` 16-byte words, grid-stride over all blocks),
// then the repetition penalty, each distinct history id once: block b of a row owns the ids
// [b * kPenaltyIds, (b + 1) * kPenaltyIds), reads the whole history, and the entry that sets an
// id's bit in the block's shared bitset applies the penalty to it.
__global__ void __launch_bounds__(kThreads) prep_kernel(Job j, uint4* zero, std::size_t words, bool penalty) {
  pdl_wait();
  pdl_launch_dependents();
  const std::size_t flat = (static_cast<std::size_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kThreads + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * gridDim.y * kThreads;
  for (std::size_t i = flat; i < words; i += stride) zero[i] = make_uint4(0u, 0u, 0u, 0u);
  if (!penalty) return;
  const int row = blockIdx.y;
  const float rp = effective(j.params[row]).rp;
  if (rp == 1.0f) return;
  __shared__ unsigned bits[kPenaltyIds / 32];
  for (int i = threadIdx.x; i < kPenaltyIds / 32; i += kThreads) bits[i] = 0;
  __syncthreads();
  const int lo = static_cast<int>(blockIdx.x) * kPenaltyIds;
  const int hi = min(j.vocab, lo + kPenaltyIds);
  const int begin = j.hoff[row], end = j.hoff[row + 1];
  float* x = j.logits + static_cast<std::size_t>(row) * j.vocab;
  constexpr int kBatch = 8;  // independent loads in flight per thread
  for (int i0 = begin; i0 < end; i0 += kThreads * kBatch) {
    int ids[kBatch];
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      const int i = i0 + q * kThreads + static_cast<int>(threadIdx.x);
      ids[q] = i < end ? j.history[i] : -1;
    }
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      const int id = ids[q];
      if (id < lo || id >= hi) {
        ids[q] = -1;
        continue;
      }
      const unsigned bit = 1u << ((id - lo) & 31);
      if (atomicOr(&bits[(id - lo) >> 5], bit) & bit) ids[q] = -1;  // another entry has it
    }
    float v[kBatch];
#pragma unroll
    for (int q = 0; q < kBatch; ++q) v[q] = ids[q] >= 0 ? x[ids[q]] : 0.0f;
#pragma unroll
    for (int q = 0; q < kBatch; ++q)
      if (ids[q] >= 0) x[ids[q]] = v[q] < 0.0f ? v[q] * rp : v[q] / rp;
  }
}

// NaN -> -inf, max and first argmax (before the temperature), logits / t written back, the first
// top-k digit's histogram. Last block: the row's mode (greedy rows get their id here) and the
// first top-k digit.
__global__ void __launch_bounds__(kThreads) stats_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float* x = j.logits + sl.off;
  float v[kItems];
  load_items(x, sl.base, j.vocab, v, -kInf);
  const Eff e = effective(j.params[row]);
  const bool greedy = j.all_greedy || e.t <= 0.0f;
  const bool divide = !greedy && e.t != 1.0f;
  const bool topk = j.top_k && !greedy && e.k > 0 && e.k < j.vocab;
  __shared__ unsigned hist[kBins];
  if (topk) zero_hist(hist);
  Best<float> best{-kInf, INT_MAX};
  bool any_nan = false;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    if (isnan(v[it])) {
      v[it] = -kInf;
      any_nan = true;
    }
    if (v[it] > best.v) best = Best<float>{v[it], sl.base + it};  // index order: the first maximum
    if (divide) {
      v[it] = v[it] / e.t;
      if (isnan(v[it])) v[it] = -kInf;  // only for t = inf (rejected by validate())
    }
    if (topk && sl.base + it < j.vocab) atomicAdd(&hist[key_of(v[it]) >> 21], 1u);
  }
  if (any_nan || divide) store_items(x, sl.base, j.vocab, v);
  best = block_best(best);
  const std::size_t first = static_cast<std::size_t>(row) * w.nb;
  if (threadIdx.x == 0) {
    w.part_f[first + blockIdx.x] = best.v;
    w.part_i[first + blockIdx.x] = best.i;
  }
  unsigned* ghist = w.hist_k + static_cast<std::size_t>(row) * 3 * kBins;
  if (topk) flush_hist(ghist, hist, kBins);
  if (!arrive_last(&w.counters[row * kCounters + kCtrStats])) return;

  Best<float> r{-kInf, INT_MAX};
  for (int b = threadIdx.x; b < w.nb; b += kThreads)
    r = better(r, Best<float>{__ldcg(&w.part_f[first + b]), __ldcg(&w.part_i[first + b])});
  r = block_best(r);
  RowState s{};
  s.mode = kSingle;
  s.token = 0;
  const float xmax = r.v;
  if (xmax == -kInf) {
    s.token = 0;  // no usable logit
  } else if (greedy) {
    s.token = r.i;
  } else if (xmax == kInf) {
    s.mode = kPosInf;
  } else if (e.t != 1.0f && isinf(xmax / e.t)) {
    s.token = r.i;  // overflow: the t -> 0 limit is greedy
  } else {
    s.mode = kSample;
    s.M = e.t != 1.0f ? xmax / e.t : xmax;
    s.use_topk = topk;
    s.use_topp = j.top_p && e.top_p < 1.0f;
    s.use_minp = e.min_p > 0.0f;
    s.thr = s.use_topp ? top_p_threshold(e.top_p) : 0.0f;
    s.min_p = e.min_p;
  }
  if (s.use_topk) {  // uniform in the block
    for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = __ldcg(&ghist[b]);
    __syncthreads();
    int bin;
    unsigned above;
    select_from_top(hist, kBins, static_cast<unsigned>(e.k), bin, above);
    s.k_prefix0 = static_cast<unsigned>(bin) << 21;
    s.k_rem0 = static_cast<unsigned>(e.k) - above;
  }
  if (threadIdx.x == 0) {
    if (s.mode == kSingle) j.out_ids[row] = s.token;
    w.state[row] = s;
  }
}

// Top-k select, digit 2 (pass 1: key bits 20..10) and digit 3 (pass 2: bits 9..0; its prologue
// finishes digit 2).
__global__ void __launch_bounds__(kThreads) topk_kernel(Job j, Ws w, int pass) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  const RowState st = w.state[row];
  if (st.mode != kSample || !st.use_topk) return;
  __shared__ unsigned hist[kBins];
  unsigned* ghist = w.hist_k + static_cast<std::size_t>(row) * 3 * kBins;
  unsigned prefix = st.k_prefix0;
  if (pass == 2) {
    load_hist(hist, ghist + kBins, kBins);
    int bin;
    unsigned above;
    select_from_top(hist, kBins, st.k_rem0, bin, above);
    prefix |= static_cast<unsigned>(bin) << 10;
    if (block0_thread0()) {
      w.state[row].k_prefix1 = prefix;
      w.state[row].k_rem1 = st.k_rem0 - above;
    }
  }
  zero_hist(hist);
  const unsigned mask = pass == 1 ? 0xffe00000u : 0xfffffc00u;
  const int shift = pass == 1 ? 10 : 0;
  const unsigned dmask = pass == 1 ? 0x7ffu : 0x3ffu;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const unsigned k = key_of(y[it]);
    if (sl.base + it < j.vocab && (k & mask) == prefix) atomicAdd(&hist[(k >> shift) & dmask], 1u);
  }
  flush_hist(ghist + pass * kBins, hist, static_cast<int>(dmask) + 1);
}

// The candidates' weights w = fp32(exp(y - M)) (kept by top-k; 0 otherwise, -inf and underflow too)
// into wbuf, computed once for all later passes, and the blocks' sums of them. Its prologue
// finishes the top-k select: the k-th largest key.
__global__ void __launch_bounds__(kThreads) total_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  const RowState st = w.state[row];
  if (st.mode != kSample) return;
  unsigned kth = 0;
  if (st.use_topk) {
    __shared__ unsigned hist[kBins];
    load_hist(hist, w.hist_k + (static_cast<std::size_t>(row) * 3 + 2) * kBins, 1024);
    int bin;
    unsigned above;
    select_from_top(hist, 1024, st.k_rem1, bin, above);
    kth = st.k_prefix1 | static_cast<unsigned>(bin);
    if (block0_thread0()) w.state[row].kth_key = kth;
  }
  double sum = 0.0;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    wv[it] = key_of(y[it]) >= kth ? weight_of(y[it], st.M) : 0.0f;
    sum += wv[it];
  }
  store_items(w.wbuf + sl.off, sl.base, j.vocab, wv);
  sum = block_sum(sum);
  if (threadIdx.x == 0) w.part_d[static_cast<std::size_t>(row) * w.nb + blockIdx.x] = sum;
}

// T = the sum of the candidates' weights, from total's block sums in a fixed order.
__device__ double row_total(const Ws& w, int row) {
  const double* p = w.part_d + static_cast<std::size_t>(row) * w.nb;
  double s = 0.0;
  for (int b = threadIdx.x; b < w.nb; b += kThreads) s += p[b];
  return block_sum(s);
}

// Top-p select on the probability mass p = fp32(w / T) in ascending key order, digit `pass + 1`
// (0: key bits 31..21, 1: 20..10, 2: 9..0); the prologue finishes the digit before (pass 0: T).
__global__ void __launch_bounds__(kThreads) topp_kernel(Job j, Ws w, int pass) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  load_items(w.wbuf + sl.off, sl.base, j.vocab, wv, 0.0f);
  const RowState st = w.state[row];
  if (st.mode != kSample || !st.use_topp) return;
  if (pass == 2 && st.p_none) return;
  __shared__ unsigned long long hist[kBins];
  unsigned long long* ghist = w.hist_p + static_cast<std::size_t>(row) * 3 * kBins;
  RowState& out = w.state[row];
  double T;
  unsigned prefix = 0;
  if (pass == 0) {
    T = row_total(w, row);
    if (block0_thread0()) out.T = T;
  } else {
    T = st.T;
    load_hist(hist, ghist + (pass - 1) * kBins, kBins);
    int bin = 0;
    unsigned long long below = 0;
    const bool found = select_mass_from_bottom(hist, kBins, pass == 1 ? 0ull : st.p_below1, st.thr, bin, below);
    if (!found) {  // fp32(total) <= thr (pass 1 only; pass 2 finds a digit by construction): keep the top
      if (block0_thread0()) {
        out.p_none = 1;
        out.pkey = key_of(st.M);
      }
      return;
    }
    prefix = pass == 1 ? static_cast<unsigned>(bin) << 21 : st.p_prefix1 | (static_cast<unsigned>(bin) << 10);
    if (block0_thread0()) {
      if (pass == 1) {
        out.p_prefix1 = prefix;
        out.p_below1 = below;
      } else {
        out.p_prefix2 = prefix;
        out.p_below2 = below;
      }
    }
  }
  zero_hist(hist);
  const unsigned mask = pass == 0 ? 0u : pass == 1 ? 0xffe00000u : 0xfffffc00u;
  const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
  const unsigned dmask = pass == 2 ? 0x3ffu : 0x7ffu;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const unsigned k = key_of(y[it]);
    if (!(wv[it] > 0.0f) || (k & mask) != prefix) continue;
    const unsigned long long fx = fixed_of(prob_of(wv[it], T));
    if (fx) atomicAdd(&hist[(k >> shift) & dmask], fx);
  }
  flush_hist(ghist + pass * kBins, hist, static_cast<int>(dmask) + 1);
}

// The tokens at the boundary key pkey (ties, removed by ascending id): their count per block, and
// the weight above pkey. The prologue finishes the top-p select: pkey and the mass below it.
__global__ void __launch_bounds__(kThreads) tie_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  load_items(w.wbuf + sl.off, sl.base, j.vocab, wv, 0.0f);
  const RowState st = w.state[row];
  if (st.mode != kSample || !st.use_topp) return;
  unsigned pkey = st.pkey;
  if (!st.p_none) {
    __shared__ unsigned long long hist[kBins];
    load_hist(hist, w.hist_p + (static_cast<std::size_t>(row) * 3 + 2) * kBins, 1024);
    int bin = 0;
    unsigned long long below = 0;
    const bool found = select_mass_from_bottom(hist, 1024, st.p_below2, st.thr, bin, below);
    pkey = found ? st.p_prefix2 | static_cast<unsigned>(bin) : key_of(st.M);  // not found: impossible
    if (block0_thread0()) {
      w.state[row].pkey = pkey;
      w.state[row].p_below = below;
      if (!found) w.state[row].p_none = 1;
    }
  }
  int cnt = 0;
  double above = 0.0;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const unsigned k = key_of(y[it]);
    if (!(wv[it] > 0.0f) || k < pkey) continue;
    if (k == pkey) {
      ++cnt;
    } else {
      above += wv[it];
    }
  }
  cnt = block_sum(cnt);
  above = block_sum(above);
  if (threadIdx.x == 0) {
    const std::size_t at = static_cast<std::size_t>(row) * w.nb + blockIdx.x;
    w.tie_cnt[at] = cnt;
    w.part_a[at] = above;
  }
}

// The ties at pkey before this block (for their ranks), and all of them.
__device__ void tie_counts(const Ws& w, int row, int& before, int& all) {
  const int* c = w.tie_cnt + static_cast<std::size_t>(row) * w.nb;
  int b_sum = 0, a_sum = 0;
  for (int b = threadIdx.x; b < w.nb; b += kThreads) {
    a_sum += c[b];
    if (b < static_cast<int>(blockIdx.x)) b_sum += c[b];
  }
  before = block_sum(b_sum);
  all = block_sum(a_sum);
}

// The final weights of this thread's tokens (w: the candidate weights in, the kept ones out):
// top-p keeps keys above pkey and the ties of rank >= m, min-p weights >= w_min. Calls block helpers
// when top-p is on (uniform per row).
__device__ void final_weights(const RowState& st, int m, float w_min, int ties_before, const float (&y)[kItems],
                              float (&wv)[kItems]) {
  bool tie[kItems];
  int ties = 0;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    tie[it] = false;
    if (!(wv[it] > 0.0f)) continue;
    if (st.use_topp) {
      const unsigned k = key_of(y[it]);
      if (k < st.pkey) {
        wv[it] = 0.0f;
        continue;
      }
      if (k == st.pkey) {
        tie[it] = true;  // ranked among the ties even if min-p drops it
        ++ties;
      }
    }
    if (wv[it] < w_min) wv[it] = 0.0f;
  }
  if (st.use_topp) {
    int rank = ties_before + block_exclusive_sum(ties);
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      if (!tie[it]) continue;
      if (rank < m) wv[it] = 0.0f;
      ++rank;
    }
  }
}

// The draw, an exponential race over the final weights (argmax w / E), and the final total. Its
// prologue finishes top-p (how many ties it removes) and min-p (w_min); the last block writes the id.
__global__ void __launch_bounds__(kThreads) final_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  load_items(w.wbuf + sl.off, sl.base, j.vocab, wv, 0.0f);
  const RowState st = w.state[row];
  if (st.mode == kSingle) return;
  const SampleParams p = j.params[row];
  if (st.mode == kPosInf) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) wv[it] = y[it] == kInf ? 1.0f : 0.0f;
  } else {
    // One pass over the blocks' partials (T summed in row_total's order, so equal to pass 0's T).
    const std::size_t first = static_cast<std::size_t>(row) * w.nb;
    double t_sum = 0.0, a_sum = 0.0;
    int all_sum = 0, before_sum = 0;
    for (int b = threadIdx.x; b < w.nb; b += kThreads) {
      t_sum += w.part_d[first + b];
      if (st.use_topp) {
        const int c = w.tie_cnt[first + b];
        a_sum += w.part_a[first + b];
        all_sum += c;
        if (b < static_cast<int>(blockIdx.x)) before_sum += c;
      }
    }
    const double T = block_sum(t_sum);
    double Tp = T;
    int m = 0, ties_before = 0;
    if (st.use_topp) {
      const double A = block_sum(a_sum);
      const int n_tie = block_sum(all_sum);
      ties_before = block_sum(before_sum);
      const float wstar = weight_of(float_of_key(st.pkey), st.M);
      m = n_tie - 1;
      if (!st.p_none) {
        // The ties' cumulative sums are B + (i + 1) p*: remove the largest m with fp32(B + m p*) <= thr.
        const double pstar = prob_of(wstar, T);
        const double B = static_cast<double>(st.p_below) * 0x1p-60;
        int lo = 0, hi = n_tie;
        while (lo < hi) {
          const int mid = lo + (hi - lo + 1) / 2;
          if (static_cast<float>(B + mid * pstar) <= st.thr) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        m = lo < n_tie - 1 ? lo : n_tie - 1;  // the top token always stays
      }
      if (m < 0) m = 0;
      Tp = A + static_cast<double>(n_tie - m) * wstar;
    }
    const float w_min = st.use_minp ? min_p_weight(st.min_p * static_cast<float>(1.0 / Tp), Tp) : 0.0f;
    if (block0_thread0()) {
      w.state[row].m = m;
      w.state[row].w_min = w_min;
    }
    final_weights(st, m, w_min, ties_before, y, wv);
  }
  float e[kItems];
  exp_noise4(p.seed, p.step, sl.base, e);
  double sum = 0.0;
  Best<float> best{-1.0f, INT_MAX};
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    if (!(wv[it] > 0.0f)) continue;
    sum += wv[it];
    const float r = wv[it] / e[it];
    if (r > best.v) best = Best<float>{r, sl.base + it};
  }
  sum = block_sum(sum);
  best = block_best(best);
  const std::size_t first = static_cast<std::size_t>(row) * w.nb;
  if (threadIdx.x == 0) {
    w.part_tf[first + blockIdx.x] = sum;
    w.part_f[first + blockIdx.x] = best.v;
    w.part_i[first + blockIdx.x] = best.i;
  }
  if (!arrive_last(&w.counters[row * kCounters + kCtrFinal])) return;

  const double Tf = sum_parts(w.part_tf + first, w.nb);
  Best<float> r{-1.0f, INT_MAX};
  for (int b = threadIdx.x; b < w.nb; b += kThreads)
    r = better(r, Best<float>{__ldcg(&w.part_f[first + b]), __ldcg(&w.part_i[first + b])});
  r = block_best(r);
  if (threadIdx.x == 0) {
    w.state[row].Tf = Tf;
    j.out_ids[row] = r.i == INT_MAX ? 0 : r.i;
  }
}

// probs_out: the final distribution (one-hot for greedy and degenerate rows).
__global__ void __launch_bounds__(kThreads) probs_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  load_items(w.wbuf + sl.off, sl.base, j.vocab, wv, 0.0f);
  const RowState st = w.state[row];
  if (st.mode == kSingle) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) wv[it] = sl.base + it == st.token ? 1.0f : 0.0f;
  } else {
    if (st.mode == kPosInf) {
#pragma unroll
      for (int it = 0; it < kItems; ++it) wv[it] = y[it] == kInf ? 1.0f : 0.0f;
    } else {
      int ties_before = 0, n_tie = 0;
      if (st.use_topp) tie_counts(w, row, ties_before, n_tie);
      final_weights(st, st.m, st.w_min, ties_before, y, wv);
    }
#pragma unroll
    for (int it = 0; it < kItems; ++it)
      wv[it] = wv[it] > 0.0f ? static_cast<float>(static_cast<double>(wv[it]) / st.Tf) : 0.0f;
  }
  store_items(j.probs + sl.off, sl.base, j.vocab, wv);
}

}  // namespace

float sample_top_p_threshold(float top_p) { return top_p_threshold(top_p); }

std::size_t sample_workspace_bytes(int rows, int vocab) { return layout(rows, vocab).total; }

std::size_t launch_sample(const SampleArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.rows > 65535 || !a.out_ids) return 0;
  const std::size_t ids_bytes = static_cast<std::size_t>(a.rows) * sizeof(int);
  if (a.vocab <= 0) {
    cudaMemsetAsync(a.out_ids, 0, ids_bytes, stream);
    return ids_bytes;
  }
  if (!a.logits || !a.params || !a.workspace || (a.any_penalty && !a.history_offsets)) return 0;
  const Layout l = layout(a.rows, a.vocab);
  if (a.workspace_bytes < l.total) return 0;

  auto* base = static_cast<unsigned char*>(a.workspace);
  const Ws w{reinterpret_cast<unsigned*>(base + l.counters),
             reinterpret_cast<unsigned*>(base + l.hist_k),
             reinterpret_cast<unsigned long long*>(base + l.hist_p),
             reinterpret_cast<RowState*>(base + l.state),
             reinterpret_cast<double*>(base + l.part_d),
             reinterpret_cast<double*>(base + l.part_a),
             reinterpret_cast<double*>(base + l.part_tf),
             reinterpret_cast<float*>(base + l.part_f),
             reinterpret_cast<int*>(base + l.part_i),
             reinterpret_cast<int*>(base + l.tie_cnt),
             reinterpret_cast<float*>(base + l.wbuf),
             l.nb};
  const bool sample = !a.all_greedy;
  const bool top_k = sample && a.need_sort && !a.skip_top_k;
  const bool top_p = sample && a.need_sort && !a.skip_top_p;
  const Job j{a.logits, a.params, a.history, a.history_offsets, a.out_ids, a.probs_out,
              a.rows,   a.vocab,  a.all_greedy, top_k,         top_p};
  // Zeroed each launch: the ticket counters, and the histograms when top-k / top-p run.
  const std::size_t zero = top_k || top_p ? l.zero_end : l.hist_k;
  const std::size_t words = zero / sizeof(uint4);
  const dim3 block(kThreads);
  const unsigned prep_blocks =
      a.any_penalty ? static_cast<unsigned>((a.vocab + kPenaltyIds - 1) / kPenaltyIds)
                    : static_cast<unsigned>(std::min<std::size_t>((words + kThreads - 1) / kThreads, 64));
  launch_pdl(prep_kernel, dim3(prep_blocks, a.any_penalty ? a.rows : 1), block, 0, stream, j,
             reinterpret_cast<uint4*>(base), words, a.any_penalty);

  const dim3 grid(static_cast<unsigned>(l.nb), static_cast<unsigned>(a.rows));
  launch_pdl(stats_kernel, grid, block, 0, stream, j, w);
  const std::size_t row_bytes = static_cast<std::size_t>(a.rows) * a.vocab * sizeof(float);
  std::size_t bytes = zero + 2 * row_bytes + ids_bytes;  // stats reads and writes the logits
  if (sample) {
    if (top_k) {
      launch_pdl(topk_kernel, grid, block, 0, stream, j, w, 1);
      launch_pdl(topk_kernel, grid, block, 0, stream, j, w, 2);
      bytes += 2 * row_bytes;
    }
    launch_pdl(total_kernel, grid, block, 0, stream, j, w);
    bytes += 2 * row_bytes;
    if (top_p) {
      for (int pass = 0; pass < 3; ++pass) launch_pdl(topp_kernel, grid, block, 0, stream, j, w, pass);
      launch_pdl(tie_kernel, grid, block, 0, stream, j, w);
      bytes += 8 * row_bytes;
    }
    launch_pdl(final_kernel, grid, block, 0, stream, j, w);
    bytes += 2 * row_bytes;
  }
  if (a.probs_out) {
    launch_pdl(probs_kernel, grid, block, 0, stream, j, w);
    bytes += 3 * row_bytes;
  }
  return bytes;
}

}  // namespace cosmos::kernels
