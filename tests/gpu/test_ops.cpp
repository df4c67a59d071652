// The small kernels against float64 CPU references: embedding, rms_norm, swiglu, rope_kv (M-RoPE
// and the paged KV cache), matmul_bf16, GemmLt (cuBLASLt), launch_fill_test_weights (bit-exact
// against the file generator), the dtype conversions on misaligned pointers, and a chain of
// dependent PDL launches.
//
// Every case draws fresh random inputs, poisons its outputs with NaN (0xFF bytes) first, checks
// every element that should be written and that everything else (guard elements after an output,
// rows of negative ids, cache slots nobody writes to) is still poisoned.
//
// Tolerances. The reference computes in double from the very same (already rounded) inputs the
// kernel reads, so the only differences are the kernel's own fp32 roundings (u = 2^-24, CUDA's
// expf/cosf/sinf/rsqrtf are within 2 ulp, i.e. 4u relative; the build uses no fast-math) and the
// final rounding of the output:
//   - fp32 output: an error bound derived per kernel (next to each kernel's test), doubled;
//   - bf16 output: plus half an ulp of bf16. bf16 has 8 significant bits, so round to nearest errs
//     by at most 2^-8 |v| (2^-9 would be too tight: 1 + 2^-8 lies exactly between 1 and 1 + 2^-7);
//   - fp16 output: plus half an ulp of fp16, 2^-11 |v| (11 significant bits), plus 2^-25 absolute
//     (half the subnormal spacing) below 2^-14, after saturation to +-65504 (store_elem clamps).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cosmos/model_config.h"
#include "cosmos/model_tensors.h"
#include "cosmos/test_model.h"
#include "kernels/convert_dtype.cuh"
#include "kernels/device_info.cuh"
#include "kernels/elem_type.cuh"
#include "kernels/embedding.cuh"
#include "kernels/gemm_lt.h"
#include "kernels/matmul_bf16.cuh"
#include "kernels/pdl.cuh"
#include "kernels/rms_norm.cuh"
#include "kernels/rope_kv.cuh"
#include "kernels/swiglu.cuh"
#include "kernels/test_weights.cuh"

namespace cosmos {
namespace {

using kernels::ElemType;

constexpr double kU = 0x1p-24;         // fp32 unit roundoff
constexpr double kHalfUlpBf16 = 0x1p-8;  // bf16: 8 significant bits
constexpr double kHalfUlpF16 = 0x1p-11;  // fp16: 11 significant bits
constexpr int kGuard = 64;             // poisoned elements after every output

// ---------------------------------------------------------------------------------------------
// Host helpers

// Deterministic uniform random numbers in [-1, 1) (splitmix64), as in test_gemv.cpp.
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed) {}
  std::uint64_t bits() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float next() { return static_cast<float>(bits() >> 40) / static_cast<float>(1 << 23) - 1.0f; }
  int below(int n) { return static_cast<int>(bits() % static_cast<std::uint64_t>(n)); }
};

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

// Round to nearest even (finite values), the rounding of test_model.cpp's to_bf16.
std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

float f16_to_float(std::uint16_t b) { return static_cast<float>(std::bit_cast<_Float16>(b)); }

std::uint16_t float_to_f16(float f) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f)); }

// A bf16 (raw bits) of `v`, and the float it holds.
std::uint16_t rbf(float v) { return float_to_bf16(v); }

// Concatenates anything streamable (GCC 12 warns, wrongly, on "literal" + std::string at -O3).
template <typename... A>
std::string cat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}

const char* type_name(ElemType t) { return t == ElemType::f32 ? "f32" : (t == ElemType::bf16 ? "bf16" : "f16"); }

// Element i of a downloaded output of type t.
double load(const std::vector<unsigned char>& raw, ElemType t, std::size_t i) {
  if (t == ElemType::f32) {
    float f;
    std::memcpy(&f, raw.data() + 4 * i, 4);
    return f;
  }
  std::uint16_t b;
  std::memcpy(&b, raw.data() + 2 * i, 2);
  return t == ElemType::bf16 ? bf16_to_float(b) : f16_to_float(b);
}

// Whether element i still holds the poison (all bytes 0xFF).
bool poisoned(const std::vector<unsigned char>& raw, ElemType t, std::size_t i) {
  const std::size_t sz = kernels::elem_size(t);
  for (std::size_t b = 0; b < sz; ++b)
    if (raw[sz * i + b] != 0xFF) return false;
  return true;
}

// What an fp32 result (exact value `ref`, kernel error at most `e32`) stored as `t` must be within.
struct Expect {
  double want, tol;
};
Expect stored(ElemType t, double ref, double e32) {
  switch (t) {
    case ElemType::f32: return {ref, e32};
    case ElemType::bf16:
      // Round to nearest: |bf16(v) - v| <= 2^-8 |v|, v within e32 of ref (bf16 has fp32's exponent range).
      return {ref, e32 + kHalfUlpBf16 * (std::fabs(ref) + e32)};
    case ElemType::f16: {
      // store_elem saturates to +-65504 first, then rounds to nearest: 2^-11 |v|, or 2^-25 absolute
      // among the subnormals.
      const double want = std::clamp(ref, -65504.0, 65504.0);
      return {want, e32 + kHalfUlpF16 * (std::fabs(want) + e32) + 0x1p-25};
    }
  }
  return {ref, 0};
}

// Counts and reports (the first few) elements outside their bound; NaN always fails.
struct Checker {
  explicit Checker(std::string name) : what(std::move(name)) {}
  std::string what;
  int bad = 0;
  long checked = 0;
  double worst = 0;  // largest error / bound seen
  void near(double got, double want, double tol, long a, long b = -1) {
    ++checked;
    const double err = std::fabs(got - want);
    if (!(err <= tol)) {
      if (++bad <= 8)
        ADD_FAILURE() << what << " [" << a << (b >= 0 ? cat(",", b) : std::string()) << "]: got " << got
                      << ", want " << want << " (error " << err << " > bound " << tol << ")";
    } else if (tol > 0) {
      worst = std::max(worst, err / tol);
    }
  }
  void fail(const std::string& msg) {
    if (++bad <= 8) ADD_FAILURE() << what << ": " << msg;
  }
  void finish() {
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << checked << " elements out of bounds";
    ::testing::Test::RecordProperty(cat(what, "_worst_err_over_bound"), cat(worst));
  }
};

// A device buffer of `n` elements starting `offset` elements into the allocation, with `guard`
// elements after; the whole allocation is poisoned with 0xFF bytes (NaN for fp32, bf16 and fp16).
template <typename E>
struct DevBuf {
  E* base = nullptr;
  E* ptr = nullptr;
  std::size_t n = 0, offset = 0, guard = 0;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (base) cudaFree(base);
  }
  void alloc(std::size_t count, std::size_t off = 0, std::size_t guard_count = kGuard) {
    n = count;
    offset = off;
    guard = guard_count;
    ASSERT_EQ(cudaMalloc(&base, bytes()), cudaSuccess);
    poison();
  }
  std::size_t bytes() const { return std::max<std::size_t>((offset + n + guard) * sizeof(E), 16); }
  void poison() {
    ASSERT_EQ(cudaMemset(base, 0xFF, bytes()), cudaSuccess);
    ptr = base + offset;
  }
  void upload(const std::vector<E>& v) {
    ASSERT_LE(v.size(), n);
    ASSERT_EQ(cudaMemcpy(ptr, v.data(), v.size() * sizeof(E), cudaMemcpyHostToDevice), cudaSuccess);
  }
  // The n elements and the guard after them.
  std::vector<E> download() const {
    std::vector<E> v(n + guard);
    EXPECT_EQ(cudaMemcpy(v.data(), ptr, v.size() * sizeof(E), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  // The whole allocation (offset elements, n, guard).
  std::vector<E> download_all() const {
    std::vector<E> v(offset + n + guard);
    EXPECT_EQ(cudaMemcpy(v.data(), base, v.size() * sizeof(E), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

// A device output of run-time element type, as raw bytes.
struct DevOut {
  ElemType type = ElemType::f32;
  DevBuf<unsigned char> buf;
  std::size_t n = 0;
  void alloc(ElemType t, std::size_t count) {
    type = t;
    n = count;
    buf.alloc(count * kernels::elem_size(t), 0, kGuard * kernels::elem_size(t));
  }
  void* ptr() const { return buf.ptr; }
  std::vector<unsigned char> download() const { return buf.download(); }
  // Expects the guard elements after the output to be still poisoned.
  static void expect_guard(const std::vector<unsigned char>& raw, ElemType t, std::size_t count,
                           const std::string& what) {
    for (std::size_t k = 0; k < static_cast<std::size_t>(kGuard); ++k)
      if (!poisoned(raw, t, count + k)) {
        ADD_FAILURE() << what << ": write past the end, at +" << k;
        return;
      }
  }
};

const __nv_bfloat16* as_bf16(const std::uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }

class GpuOps : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
    kernels::set_pdl_enabled(false);
  }
  void TearDown() override { kernels::set_pdl_enabled(false); }
};

template <typename P>
class GpuOpsP : public GpuOps, public ::testing::WithParamInterface<P> {};

// ---------------------------------------------------------------------------------------------
// 1. embedding: out[i] = fp32(table[ids[i]]) bit for bit (the conversion is exact); rows with a
// negative id are left untouched (still poisoned).

struct EmbCase {
  int vocab, hidden, n;
};

using GpuEmbedding = GpuOpsP<EmbCase>;

TEST_P(GpuEmbedding, GathersRowsExactlyAndSkipsNegativeIds) {
  const EmbCase c = GetParam();
  Rng rng(static_cast<std::uint64_t>(c.vocab) * 31 + static_cast<std::uint64_t>(c.hidden) * 7 + c.n);
  std::vector<std::uint16_t> table(static_cast<std::size_t>(c.vocab) * c.hidden);
  for (auto& v : table) v = rbf(4.0f * rng.next());
  std::vector<std::int32_t> ids(c.n);
  for (auto& id : ids) id = rng.below(c.vocab);
  ids[0] = 0;
  if (c.n > 1) ids[1] = -1;
  if (c.n > 2) ids[c.n - 1] = c.vocab - 1;
  if (c.n > 4) ids[3] = ids[2];  // a repeated id
  if (c.n > 5) ids[4] = -7;

  DevBuf<std::uint16_t> dt;
  DevBuf<std::int32_t> di;
  DevBuf<float> dout;
  dt.alloc(table.size());
  dt.upload(table);
  di.alloc(ids.size());
  di.upload(ids);
  dout.alloc(static_cast<std::size_t>(c.n) * c.hidden);
  const std::size_t bytes = kernels::launch_embedding(as_bf16(dt.ptr), di.ptr, dout.ptr, c.n, c.hidden, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(bytes, static_cast<std::size_t>(c.n) * (4 + static_cast<std::size_t>(c.hidden) * 6));
  const std::vector<float> out = dout.download();
  Checker ck{"embedding"};
  for (int t = 0; t < c.n; ++t) {
    for (int j = 0; j < c.hidden; ++j) {
      const std::uint32_t got = std::bit_cast<std::uint32_t>(out[static_cast<std::size_t>(t) * c.hidden + j]);
      if (ids[t] < 0) {
        if (got != 0xFFFFFFFFu) ck.fail(cat("row ", t, " (id ", ids[t], ") written"));
      } else {
        const float want = bf16_to_float(table[static_cast<std::size_t>(ids[t]) * c.hidden + j]);
        ++ck.checked;
        if (got != std::bit_cast<std::uint32_t>(want))  // exact conversion: bit for bit
          ck.fail(cat("[", t, ",", j, "]: got ", std::bit_cast<float>(got), ", want ", want));
      }
    }
  }
  for (int k = 0; k < kGuard; ++k)
    if (std::bit_cast<std::uint32_t>(out[static_cast<std::size_t>(c.n) * c.hidden + k]) != 0xFFFFFFFFu)
      ck.fail(cat("write past the end at +", k));
  ck.finish();
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuEmbedding,
                         ::testing::Values(EmbCase{5, 1, 3}, EmbCase{100, 64, 7}, EmbCase{37, 77, 6},
                                           EmbCase{1000, 3584, 33}, EmbCase{3, 257, 1}),
                         [](const ::testing::TestParamInfo<EmbCase>& i) {
                           return cat("v", i.param.vocab, "_h", i.param.hidden, "_n", i.param.n);
                         });

// ---------------------------------------------------------------------------------------------
// 2. rms_norm: y = w * (x * rsqrt(mean(x^2) + eps)), x with a row stride >= d (the gap holds NaN,
// so reading it fails), y dense.
//
// fp32 error: each thread sums ceil(d/256) squares (2 roundings each without FMA), 5 shuffle levels
// and 8 warp partials follow: the sum of squares (positive terms) is within (2 ceil(d/256) + 13) u
// relative; / d and + eps add 2u, rsqrtf (2 ulp = 4u) halves that and adds 4u, then x * inv and
// * w add 2u: (ceil(d/256) + 14) u |y| in all. Bound used: 2 (ceil(d/256) + 24) u |y|.

struct NormCase {
  ElemType type;
  int n, d, x_stride;
};

using GpuRmsNorm = GpuOpsP<NormCase>;

TEST_P(GpuRmsNorm, MatchesFloat64Reference) {
  const NormCase c = GetParam();
  const float eps = 1e-6f;
  Rng rng(static_cast<std::uint64_t>(c.n) * 1009 + static_cast<std::uint64_t>(c.d) * 13 + c.x_stride +
          static_cast<std::uint64_t>(c.type) * 100003);
  std::vector<float> x(static_cast<std::size_t>(c.n) * c.x_stride, std::numeric_limits<float>::quiet_NaN());
  for (int t = 0; t < c.n; ++t) {
    const float scale = t % 3 == 0 ? 40.0f : (t % 3 == 1 ? 0.01f : 2.0f);  // rows of different magnitude
    for (int i = 0; i < c.d; ++i) x[static_cast<std::size_t>(t) * c.x_stride + i] = scale * rng.next();
  }
  std::vector<std::uint16_t> w(c.d);
  for (auto& v : w) v = rbf(1.0f + 0.5f * rng.next());

  DevBuf<float> dx;
  DevBuf<std::uint16_t> dw;
  DevOut dy;
  dx.alloc(x.size());
  dx.upload(x);
  dw.alloc(w.size());
  dw.upload(w);
  dy.alloc(c.type, static_cast<std::size_t>(c.n) * c.d);
  const std::size_t bytes =
      kernels::launch_rms_norm(dx.ptr, c.x_stride, as_bf16(dw.ptr), dy.ptr(), c.type, c.n, c.d, eps, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GT(bytes, 0u);
  const std::vector<unsigned char> y = dy.download();

  Checker ck{std::string("rms_norm_") + type_name(c.type)};
  const double rel = 2.0 * (std::ceil(c.d / 256.0) + 24) * kU;
  for (int t = 0; t < c.n; ++t) {
    const float* xr = x.data() + static_cast<std::size_t>(t) * c.x_stride;
    double ss = 0;
    for (int i = 0; i < c.d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const double inv = 1.0 / std::sqrt(ss / c.d + static_cast<double>(eps));
    for (int i = 0; i < c.d; ++i) {
      const double ref = static_cast<double>(bf16_to_float(w[i])) * (xr[i] * inv);
      const Expect e = stored(c.type, ref, rel * std::fabs(ref));
      ck.near(load(y, c.type, static_cast<std::size_t>(t) * c.d + i), e.want, e.tol, t, i);
    }
  }
  DevOut::expect_guard(y, c.type, static_cast<std::size_t>(c.n) * c.d, ck.what);
  ck.finish();
}

std::vector<NormCase> norm_cases() {
  const NormCase shapes[] = {
      {ElemType::f32, 1, 3584, 3584},  {ElemType::f32, 5, 3584, 3600},   {ElemType::f32, 7, 77, 77},
      {ElemType::f32, 3, 77, 80},      {ElemType::f32, 2, 1, 1},         {ElemType::f32, 4, 1, 5},
      {ElemType::f32, 64, 1000, 1003}, {ElemType::f32, 3, 18944, 18944}, {ElemType::f32, 2, 255, 256},
      {ElemType::f32, 9, 257, 4608},
  };
  std::vector<NormCase> v;
  for (const ElemType t : {ElemType::f32, ElemType::bf16, ElemType::f16})
    for (NormCase c : shapes) {
      c.type = t;
      v.push_back(c);
    }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuRmsNorm, ::testing::ValuesIn(norm_cases()),
                         [](const ::testing::TestParamInfo<NormCase>& i) {
                           return cat(type_name(i.param.type), "_n", i.param.n, "_d", i.param.d, "_stride",
                                      i.param.x_stride);
                         });

// ---------------------------------------------------------------------------------------------
// 3. swiglu: out[t, i] = silu(gu[t, i]) * gu[t, ff + i].
//
// fp32 error: expf within 2 ulp (4u relative), 1 + e adds u (and passes on at most the 4u of e),
// the division (IEEE) and the product u each: 7u |out| (g itself is exact). Bound used: 16u |out|.
// The first two elements of every case are +-90000 (gate 300, up +-300), beyond fp16's range: the
// fp16 output must saturate to exactly +-65504 (not inf).

struct SwiGluCase {
  ElemType type;
  int n, ff;
};

using GpuSwiGlu = GpuOpsP<SwiGluCase>;

TEST_P(GpuSwiGlu, MatchesFloat64Reference) {
  const SwiGluCase c = GetParam();
  Rng rng(static_cast<std::uint64_t>(c.n) * 7919 + static_cast<std::uint64_t>(c.ff) * 3 +
          static_cast<std::uint64_t>(c.type) * 1000003);
  const std::size_t w2 = 2 * static_cast<std::size_t>(c.ff);
  std::vector<float> gu(static_cast<std::size_t>(c.n) * w2);
  for (int t = 0; t < c.n; ++t)
    for (int i = 0; i < c.ff; ++i) {
      gu[t * w2 + i] = 8.0f * rng.next();       // gate: silu's whole shape, both tails
      gu[t * w2 + c.ff + i] = 4.0f * rng.next();  // up
    }
  gu[0] = 300.0f;
  gu[c.ff] = 300.0f;
  if (c.ff > 1) {
    gu[1] = 300.0f;
    gu[c.ff + 1] = -300.0f;
  }

  DevBuf<float> dgu;
  DevOut dout;
  dgu.alloc(gu.size());
  dgu.upload(gu);
  const std::size_t outs = static_cast<std::size_t>(c.n) * c.ff;
  dout.alloc(c.type, outs);
  const std::size_t bytes = kernels::launch_swiglu(dgu.ptr, dout.ptr(), c.type, c.n, c.ff, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(bytes, outs * (8 + kernels::elem_size(c.type)));
  const std::vector<unsigned char> out = dout.download();

  Checker ck{std::string("swiglu_") + type_name(c.type)};
  for (int t = 0; t < c.n; ++t)
    for (int i = 0; i < c.ff; ++i) {
      const double g = gu[t * w2 + i], u = gu[t * w2 + c.ff + i];
      const double ref = g / (1.0 + std::exp(-g)) * u;
      const Expect e = stored(c.type, ref, 16 * kU * std::fabs(ref));
      ck.near(load(out, c.type, static_cast<std::size_t>(t) * c.ff + i), e.want, e.tol, t, i);
    }
  if (c.type == ElemType::f16) {
    std::uint16_t b0, b1;
    std::memcpy(&b0, out.data(), 2);
    EXPECT_EQ(b0, 0x7BFF) << "+90000 must saturate to fp16 65504";
    if (c.ff > 1) {
      std::memcpy(&b1, out.data() + 2, 2);
      EXPECT_EQ(b1, 0xFBFF) << "-90000 must saturate to fp16 -65504";
    }
  }
  DevOut::expect_guard(out, c.type, outs, ck.what);
  ck.finish();
}

std::vector<SwiGluCase> swiglu_cases() {
  // (70, 18944): 1.3 M outputs, more than the 4096 x 256 threads launched: the grid-stride loop.
  const std::pair<int, int> shapes[] = {{1, 1}, {3, 77}, {2, 5}, {16, 3584}, {33, 1001}, {70, 18944}};
  std::vector<SwiGluCase> v;
  for (const ElemType t : {ElemType::f32, ElemType::bf16, ElemType::f16})
    for (const auto& [n, ff] : shapes) v.push_back({t, n, ff});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuSwiGlu, ::testing::ValuesIn(swiglu_cases()),
                         [](const ::testing::TestParamInfo<SwiGluCase>& i) {
                           return cat(type_name(i.param.type), "_n", i.param.n, "_ff", i.param.ff);
                         });

// ---------------------------------------------------------------------------------------------
// 4. rope_kv: q and k rotated (half-split pairs x[i], x[i + half]); frequency i (0 <= i < half,
// units of frequency pairs) takes its angle from position t when i < section0, h when i <
// section0 + section1, else w; v copied; k and v stored at cache slot slots[token].
//
// The angle f = float(pos) * inv_freq[i] is one fp32 product, rounded identically on the host, so
// the reference takes cos/sin in double of that same float f. fp32 error of y1 = x1 c - x2 s:
// cosf/sinf within 2 ulp (<= 2u absolute, |c|, |s| <= 1), the products and the difference u each:
// <= 5u (|x1| + |x2|), with x1, x2 the bias-added fp32 inputs (that sum is also done in fp32 on the
// host). Bound used: 16u (|x1| + |x2|). v is a copy (plus bias): exact, bit for bit.

struct RopeCase {
  ElemType q_type, kv_type;
  int heads, kv_heads, head_dim, section0, section1, n;
  bool bias;
};

using GpuRopeKv = GpuOpsP<RopeCase>;

TEST_P(GpuRopeKv, MatchesFloat64ReferenceAndWritesOnlyItsSlots) {
  const RopeCase c = GetParam();
  const int D = c.head_dim, half = D / 2, qd = c.heads * D, kvd = c.kv_heads * D, width = qd + 2 * kvd;
  const int block_size = 16;
  const int n_slots = ((3 * c.n + 16) + block_size - 1) / block_size * block_size;
  Rng rng(static_cast<std::uint64_t>(c.n) * 131 + static_cast<std::uint64_t>(D) * 17 + c.heads * 3 + c.section0 +
          (c.bias ? 5000 : 0) + static_cast<std::uint64_t>(c.q_type) * 100 + static_cast<std::uint64_t>(c.kv_type) * 1000);
  std::vector<float> qkv(static_cast<std::size_t>(c.n) * width), bias(width);
  for (auto& v : qkv) v = 3.0f * rng.next();
  for (auto& v : bias) v = 0.5f * rng.next();
  std::vector<std::int32_t> pos(3 * static_cast<std::size_t>(c.n));
  for (int t = 0; t < c.n; ++t) {
    // t != h != w; token 0 at the origin of time, the last one far out (large angles).
    pos[3 * t] = t == 0 ? 0 : (t == c.n - 1 ? 32000 : rng.below(4096));
    pos[3 * t + 1] = pos[3 * t] + 1 + rng.below(50);
    pos[3 * t + 2] = pos[3 * t] + 60 + rng.below(50);
  }
  std::vector<float> inv_freq(half);
  for (int j = 0; j < half; ++j)
    inv_freq[j] = 1.0f / std::pow(1e6f, static_cast<float>(2 * j) / static_cast<float>(D));
  // Each token goes to a distinct, shuffled slot; the other slots must stay poisoned.
  std::vector<std::int32_t> perm(n_slots);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 gen(static_cast<unsigned>(c.n * 7 + D));
  std::shuffle(perm.begin(), perm.end(), gen);
  const std::vector<std::int32_t> slots(perm.begin(), perm.begin() + c.n);

  DevBuf<float> dqkv, dbias, dinv;
  DevBuf<std::int32_t> dpos, dslots;
  DevOut dq, dk, dv;
  dqkv.alloc(qkv.size());
  dqkv.upload(qkv);
  dbias.alloc(bias.size());
  dbias.upload(bias);
  dinv.alloc(inv_freq.size());
  dinv.upload(inv_freq);
  dpos.alloc(pos.size());
  dpos.upload(pos);
  dslots.alloc(slots.size());
  dslots.upload(slots);
  dq.alloc(c.q_type, static_cast<std::size_t>(c.n) * qd);
  dk.alloc(c.kv_type, static_cast<std::size_t>(n_slots) * kvd);
  dv.alloc(c.kv_type, static_cast<std::size_t>(n_slots) * kvd);

  kernels::RopeKvArgs a;
  a.qkv = dqkv.ptr;
  a.bias = c.bias ? dbias.ptr : nullptr;
  a.positions = dpos.ptr;
  a.inv_freq = dinv.ptr;
  a.slots = dslots.ptr;
  a.q = dq.ptr();
  a.q_type = c.q_type;
  a.k_cache = dk.ptr();
  a.v_cache = dv.ptr();
  a.kv_type = c.kv_type;
  a.n = c.n;
  a.heads = c.heads;
  a.kv_heads = c.kv_heads;
  a.head_dim = D;
  a.section0 = c.section0;
  a.section1 = c.section1;
  EXPECT_GT(kernels::launch_rope_kv(a, nullptr), 0u);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<unsigned char> q = dq.download(), k = dk.download(), v = dv.download();

  Checker cq{std::string("rope_q_") + type_name(c.q_type)}, ckk{std::string("rope_k_") + type_name(c.kv_type)},
      cv{std::string("rope_v_") + type_name(c.kv_type)};
  std::vector<bool> used(n_slots, false);
  for (int t = 0; t < c.n; ++t) {
    used[slots[t]] = true;
    const float* row = qkv.data() + static_cast<std::size_t>(t) * width;
    auto in = [&](int idx) { return c.bias ? row[idx] + bias[idx] : row[idx]; };  // fp32, as the kernel
    for (int head = 0; head < c.heads + c.kv_heads; ++head) {
      const bool is_q = head < c.heads;
      const int off = is_q ? head * D : qd + (head - c.heads) * D;
      for (int i = 0; i < half; ++i) {
        const int which = i < c.section0 ? 0 : (i < c.section0 + c.section1 ? 1 : 2);
        const float f = static_cast<float>(pos[3 * t + which]) * inv_freq[i];
        const double cs = std::cos(static_cast<double>(f)), sn = std::sin(static_cast<double>(f));
        const float x1 = in(off + i), x2 = in(off + i + half);
        const double y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
        const double e32 = 16 * kU * (std::fabs(x1) + std::fabs(x2));
        if (is_q) {
          const std::size_t o = static_cast<std::size_t>(t) * qd + head * D;
          const Expect e1 = stored(c.q_type, y1, e32), e2 = stored(c.q_type, y2, e32);
          cq.near(load(q, c.q_type, o + i), e1.want, e1.tol, t, head * D + i);
          cq.near(load(q, c.q_type, o + i + half), e2.want, e2.tol, t, head * D + i + half);
        } else {
          const std::size_t o = static_cast<std::size_t>(slots[t]) * kvd + (head - c.heads) * D;
          const Expect e1 = stored(c.kv_type, y1, e32), e2 = stored(c.kv_type, y2, e32);
          ckk.near(load(k, c.kv_type, o + i), e1.want, e1.tol, t, (head - c.heads) * D + i);
          ckk.near(load(k, c.kv_type, o + i + half), e2.want, e2.tol, t, (head - c.heads) * D + i + half);
        }
      }
    }
    for (int i = 0; i < kvd; ++i) {
      // The kernel's expression, evaluated in fp32 on the host: the same bits.
      const float want_exact = row[qd + kvd + i] + (c.bias ? bias[qd + kvd + i] : 0.0f);
      const std::size_t o = static_cast<std::size_t>(slots[t]) * kvd + i;
      if (c.kv_type == ElemType::f32) {
        float got;
        std::memcpy(&got, v.data() + 4 * o, 4);
        cv.near(got, want_exact, 0.0, t, i);
        if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(want_exact)) cv.fail("v bits differ");
      } else {
        std::uint16_t got;
        std::memcpy(&got, v.data() + 2 * o, 2);
        cv.near(bf16_to_float(got), bf16_to_float(float_to_bf16(want_exact)), 0.0, t, i);
      }
    }
  }
  // Slots no token maps to: untouched.
  for (int s = 0; s < n_slots; ++s) {
    if (used[s]) continue;
    for (int i = 0; i < kvd; ++i) {
      const std::size_t o = static_cast<std::size_t>(s) * kvd + i;
      if (!poisoned(k, c.kv_type, o)) {
        ckk.fail(cat("slot ", s, " (no token's) written"));
        break;
      }
      if (!poisoned(v, c.kv_type, o)) {
        cv.fail(cat("slot ", s, " (no token's) written"));
        break;
      }
    }
  }
  DevOut::expect_guard(q, c.q_type, static_cast<std::size_t>(c.n) * qd, cq.what);
  DevOut::expect_guard(k, c.kv_type, static_cast<std::size_t>(n_slots) * kvd, ckk.what);
  DevOut::expect_guard(v, c.kv_type, static_cast<std::size_t>(n_slots) * kvd, cv.what);
  cq.finish();
  ckk.finish();
  cv.finish();
}

std::vector<RopeCase> rope_cases() {
  std::vector<RopeCase> v;
  for (const ElemType qt : {ElemType::f32, ElemType::bf16, ElemType::f16})
    for (const ElemType kt : {ElemType::f32, ElemType::bf16})
      for (const bool bias : {false, true}) {
        v.push_back({qt, kt, 28, 4, 128, 16, 24, 9, bias});   // the 7B model's M-RoPE sections
        v.push_back({qt, kt, 28, 4, 128, 128, 0, 3, bias});   // plain RoPE: section0 = head_dim, all t
        v.push_back({qt, kt, 4, 2, 16, 2, 3, 5, bias});       // the tiny test model
      }
  v.push_back({ElemType::f32, ElemType::f32, 28, 4, 128, 16, 24, 1, true});
  v.push_back({ElemType::f32, ElemType::bf16, 28, 4, 128, 16, 24, 37, true});
  v.push_back({ElemType::bf16, ElemType::bf16, 3, 1, 10, 1, 2, 7, true});  // odd head counts, half = 5
  v.push_back({ElemType::f32, ElemType::f32, 12, 2, 64, 0, 32, 4, false});  // section0 = 0: no t at all
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuRopeKv, ::testing::ValuesIn(rope_cases()),
                         [](const ::testing::TestParamInfo<RopeCase>& i) {
                           const RopeCase& c = i.param;
                           return cat(i.index, "_q", type_name(c.q_type), "_kv", type_name(c.kv_type), "_h", c.heads,
                                      "_kvh", c.kv_heads, "_d", c.head_dim, "_s", c.section0, "x", c.section1, "_n",
                                      c.n, c.bias ? "_bias" : "");
                         });

// ---------------------------------------------------------------------------------------------
// 5. matmul_bf16 (SIMT reference matmul): y = x W^T (+ bias) (+ residual, possibly aliasing y).
//
// fp32 error: each output is one thread's sequential sum over k (first-order bound cols u sum|w x|),
// then + bias and + residual (u each on the running value): <= (cols + 2) u sum|w x| +
// 2u (|bias| + |residual|). Bound used: twice that. Plus a relative L2 error over all outputs below
// 2e-5 (a sequential fp32 sum over 3584 random terms errs by about sqrt(K / 2) u = 2.5e-6 relative),
// which a single wrong or missing term in every output (about 1 / sqrt(cols) relative) would exceed.

struct MatmulCase {
  int n, rows, cols;
  bool bias, residual, alias;
};

using GpuMatmulBf16 = GpuOpsP<MatmulCase>;

TEST_P(GpuMatmulBf16, MatchesFloat64Reference) {
  const MatmulCase c = GetParam();
  Rng rng(static_cast<std::uint64_t>(c.n) * 100 + static_cast<std::uint64_t>(c.rows) * 10007 +
          static_cast<std::uint64_t>(c.cols) * 7 + (c.bias ? 1 : 0) + (c.residual ? 2 : 0) + (c.alias ? 4 : 0));
  const float ws = std::sqrt(3.0f / static_cast<float>(c.cols));
  std::vector<std::uint16_t> w(static_cast<std::size_t>(c.rows) * c.cols), b(c.rows);
  std::vector<float> x(static_cast<std::size_t>(c.n) * c.cols), res(static_cast<std::size_t>(c.n) * c.rows);
  for (auto& v : w) v = rbf(ws * rng.next());
  for (auto& v : b) v = rbf(rng.next());
  for (auto& v : x) v = 2.0f * rng.next();
  for (auto& v : res) v = rng.next();

  DevBuf<std::uint16_t> dw, db;
  DevBuf<float> dx, dres, dy;
  dw.alloc(w.size());
  dw.upload(w);
  db.alloc(b.size());
  db.upload(b);
  dx.alloc(x.size());
  dx.upload(x);
  dres.alloc(res.size());
  dres.upload(res);
  dy.alloc(res.size());
  if (c.alias) dy.upload(res);
  kernels::MatmulArgs a;
  a.x = dx.ptr;
  a.w = as_bf16(dw.ptr);
  a.bias = c.bias ? as_bf16(db.ptr) : nullptr;
  a.residual = c.residual ? (c.alias ? dy.ptr : dres.ptr) : nullptr;
  a.y = dy.ptr;
  a.n = c.n;
  a.rows = c.rows;
  a.cols = c.cols;
  EXPECT_GT(kernels::launch_matmul_bf16(a, nullptr), 0u);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> y = dy.download();

  Checker ck{"matmul_bf16"};
  std::vector<float> wf(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) wf[i] = bf16_to_float(w[i]);
  double num = 0, den = 0;
  for (int t = 0; t < c.n; ++t)
    for (int r = 0; r < c.rows; ++r) {
      const float* wr = wf.data() + static_cast<std::size_t>(r) * c.cols;
      const float* xr = x.data() + static_cast<std::size_t>(t) * c.cols;
      double acc = 0, mag = 0;
      for (int k = 0; k < c.cols; ++k) {
        const double p = static_cast<double>(wr[k]) * xr[k];
        acc += p;
        mag += std::fabs(p);
      }
      double extra = 0;
      if (c.bias) {
        acc += bf16_to_float(b[r]);
        extra += std::fabs(bf16_to_float(b[r]));
      }
      const std::size_t idx = static_cast<std::size_t>(t) * c.rows + r;
      if (c.residual) {
        acc += res[idx];
        extra += std::fabs(res[idx]);
      }
      const double tol = 2 * ((c.cols + 2) * kU * mag + 2 * kU * extra) + 1e-30;
      ck.near(y[idx], acc, tol, t, r);
      num += (y[idx] - acc) * (y[idx] - acc);
      den += acc * acc;
    }
  for (int k = 0; k < kGuard; ++k)
    if (std::bit_cast<std::uint32_t>(y[res.size() + k]) != 0xFFFFFFFFu)
      ck.fail(cat("write past the end at +", k));
  if (!std::isnan(num)) {
    EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), 2e-5);
  }
  ck.finish();
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuMatmulBf16,
                         ::testing::Values(MatmulCase{1, 1, 1, false, false, false},
                                           MatmulCase{1, 65, 33, true, false, false},
                                           MatmulCase{5, 7, 1, true, true, true},
                                           MatmulCase{16, 64, 32, false, false, false},
                                           MatmulCase{17, 130, 31, true, true, true},
                                           MatmulCase{33, 64, 1003, false, true, false},
                                           MatmulCase{3, 129, 77, true, true, false},
                                           MatmulCase{40, 300, 3584, true, true, true},
                                           MatmulCase{19, 4608, 3584, true, false, false}),
                         [](const ::testing::TestParamInfo<MatmulCase>& i) {
                           const MatmulCase& c = i.param;
                           return cat("n", c.n, "_", c.rows, "x", c.cols, c.bias ? "_bias" : "",
                                      c.residual ? (c.alias ? "_resalias" : "_res") : "");
                         });

// ---------------------------------------------------------------------------------------------
// 6. GemmLt (cuBLASLt): y[n, rows] = x[n, cols] W[rows, cols]^T (+ y when accumulate), bf16 or fp16
// inputs, fp32 accumulation and output.
//
// The products of two bf16 (8 + 8 significant bits) or two fp16 (11 + 11) values are exact in
// fp32, so the only error is the fp32 accumulation over cols terms in whatever order (and split-K)
// the algorithm uses; tensor cores may truncate instead of rounding when they add, so each addition
// costs at most one ulp (2u) of the running sum: |err| <= 2 cols u sum|w x| (first order), plus
// 2u (|y| + |residual|) for beta = 1. Bound used: twice that. Plus a relative L2 error over all
// outputs below 1e-4 (typical errors are near sqrt(cols) u), which a missing term or wrong element
// would exceed. Shapes: cols a multiple of 8 (16-byte aligned rows of W and x, the layouts the
// engine uses and for which cuBLASLt always has tensor-core algorithms), rows a multiple of 8 too
// (y's leading dimension 16-byte aligned); n free (1, 7, 128, 300).

struct GemmCase {
  ElemType type;
  int n, rows, cols;
  bool accumulate;
};

using GpuGemmLt = GpuOpsP<GemmCase>;

TEST_P(GpuGemmLt, MatchesFloat64Reference) {
  const GemmCase c = GetParam();
  Rng rng(static_cast<std::uint64_t>(c.n) * 999983 + static_cast<std::uint64_t>(c.rows) * 97 + c.cols +
          (c.accumulate ? 55 : 0) + static_cast<std::uint64_t>(c.type) * 12345);
  const bool f16 = c.type == ElemType::f16;
  auto round_in = [&](float v) { return f16 ? float_to_f16(v) : float_to_bf16(v); };
  auto value = [&](std::uint16_t bits) { return f16 ? f16_to_float(bits) : bf16_to_float(bits); };
  const float ws = std::sqrt(3.0f / static_cast<float>(c.cols));
  std::vector<std::uint16_t> w(static_cast<std::size_t>(c.rows) * c.cols), x(static_cast<std::size_t>(c.n) * c.cols);
  std::vector<float> res(static_cast<std::size_t>(c.n) * c.rows);
  for (auto& v : w) v = round_in(ws * rng.next());
  for (auto& v : x) v = round_in(2.0f * rng.next());
  for (auto& v : res) v = rng.next();

  DevBuf<std::uint16_t> dw, dx;
  DevBuf<float> dy;
  DevBuf<unsigned char> workspace;
  dw.alloc(w.size());
  dw.upload(w);
  dx.alloc(x.size());
  dx.upload(x);
  dy.alloc(res.size());
  if (c.accumulate) dy.upload(res);
  const std::size_t ws_bytes = std::size_t{32} << 20;
  workspace.alloc(ws_bytes, 0, 0);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    kernels::GemmLt gemm;
    const std::string init_err = gemm.init(workspace.ptr, ws_bytes);
    ASSERT_EQ(init_err, "");
    const std::string err = gemm.run(dw.ptr, dx.ptr, dy.ptr, c.n, c.rows, c.cols, c.accumulate, c.type, stream);
    ASSERT_EQ(err, "");
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  cudaStreamDestroy(stream);
  const std::vector<float> y = dy.download();

  Checker ck{std::string("gemm_lt_") + type_name(c.type)};
  std::vector<float> wf(w.size()), xf(x.size());
  for (std::size_t i = 0; i < w.size(); ++i) wf[i] = value(w[i]);
  for (std::size_t i = 0; i < x.size(); ++i) xf[i] = value(x[i]);
  double num = 0, den = 0;
  for (int t = 0; t < c.n; ++t) {
    const float* xr = xf.data() + static_cast<std::size_t>(t) * c.cols;
    for (int r = 0; r < c.rows; ++r) {
      const float* wr = wf.data() + static_cast<std::size_t>(r) * c.cols;
      double acc = 0, mag = 0;
      for (int k = 0; k < c.cols; ++k) {
        const double p = static_cast<double>(wr[k]) * xr[k];
        acc += p;
        mag += std::fabs(p);
      }
      const std::size_t idx = static_cast<std::size_t>(t) * c.rows + r;
      double tol = 2 * 2 * c.cols * kU * mag;
      if (c.accumulate) {
        acc += res[idx];
        tol += 2 * 2 * kU * (std::fabs(acc) + std::fabs(res[idx]));
      }
      ck.near(y[idx], acc, tol + 1e-30, t, r);
      num += (y[idx] - acc) * (y[idx] - acc);
      den += acc * acc;
    }
  }
  for (int k = 0; k < kGuard; ++k)
    if (std::bit_cast<std::uint32_t>(y[res.size() + k]) != 0xFFFFFFFFu)
      ck.fail(cat("write past the end at +", k));
  if (!std::isnan(num)) {
    EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), 1e-4);
  }
  ck.finish();
}

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> v;
  for (const ElemType t : {ElemType::bf16, ElemType::f16})
    for (const int n : {1, 7, 128, 300})
      for (const auto& [rows, cols] : {std::pair{24, 72}, std::pair{136, 40}, std::pair{8, 8}})
        for (const bool acc : {false, true}) v.push_back({t, n, rows, cols, acc});
  // The 7B q/k/v shape (rows 4608 = 3584 + 2 * 512, cols 3584).
  v.push_back({ElemType::bf16, 7, 4608, 3584, false});
  v.push_back({ElemType::bf16, 128, 4608, 3584, true});
  v.push_back({ElemType::f16, 1, 4608, 3584, true});
  v.push_back({ElemType::f16, 300, 200, 3584, false});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemmLt, ::testing::ValuesIn(gemm_cases()),
                         [](const ::testing::TestParamInfo<GemmCase>& i) {
                           const GemmCase& c = i.param;
                           return cat(type_name(c.type), "_n", c.n, "_", c.rows, "x", c.cols, c.accumulate ? "_acc" : "");
                         });

// ---------------------------------------------------------------------------------------------
// 7. launch_fill_test_weights: bit-exact against the file generator (test_weight_value, rounded to
// bf16 to nearest even as make-test-model writes it; fp16 = the bf16 value converted to nearest),
// for one tensor of each kind, with the key/kind/fan-in test_weight_spec derives from the real
// tensor. Small tensors are compared whole; the embedding (9.7 M elements) at its head, its tail
// and every 997th element.

struct FillCase {
  ElemType type;
  std::uint64_t seed;
};

using GpuFillTestWeights = GpuOpsP<FillCase>;

TEST_P(GpuFillTestWeights, BitExactAgainstTheFileGenerator) {
  const FillCase fc = GetParam();
  auto config = preset_config("tiny");
  ASSERT_TRUE(config.ok());
  std::vector<ExpectedTensor> tensors = text_model_tensors(*config);
  for (auto& t : vision_tensors(*config)) tensors.push_back(std::move(t));
  struct Want {
    const char* name;
    int kind;
  };
  const Want wants[] = {
      {"model.layers.0.input_layernorm.weight", 0},
      {"model.norm.weight", 0},
      {"model.layers.1.self_attn.q_proj.bias", 1},
      {"model.embed_tokens.weight", 2},
      {"model.layers.1.mlp.down_proj.weight", 3},   // fan-in = intermediate_size
      {"model.layers.0.self_attn.k_proj.weight", 3},  // fan-in = hidden_size
      {"visual.patch_embed.proj.weight", 3},          // 5-d: fan-in = channels * temporal * patch^2
  };
  for (const Want& want : wants) {
    SCOPED_TRACE(want.name);
    const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const ExpectedTensor& t) { return t.name == want.name; });
    ASSERT_NE(it, tensors.end());
    const TestWeightSpec spec = test_weight_spec(fc.seed, *it);
    ASSERT_EQ(spec.kind, want.kind);
    std::uint64_t fan_in = 1;
    for (std::size_t d = 1; d < it->shape.size(); ++d) fan_in *= static_cast<std::uint64_t>(it->shape[d]);
    if (spec.kind == 3) {
      EXPECT_EQ(spec.fan_in, fan_in);
    }
    const std::size_t n = it->numel();

    DevBuf<std::uint16_t> dout;
    dout.alloc(n);
    const std::size_t bytes =
        kernels::launch_fill_test_weights(dout.ptr, fc.type, n, spec.key, spec.kind, spec.fan_in, nullptr);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(bytes, n * 2);
    const std::vector<std::uint16_t> out = dout.download();

    std::vector<std::size_t> idx;
    if (n <= (std::size_t{1} << 20)) {
      idx.resize(n);
      std::iota(idx.begin(), idx.end(), std::size_t{0});
    } else {
      for (std::size_t i = 0; i < 4096; ++i) idx.push_back(i);
      for (std::size_t i = 4096; i < n - 4096; i += 997) idx.push_back(i);
      for (std::size_t i = n - 4096; i < n; ++i) idx.push_back(i);
    }
    int bad = 0;
    for (const std::size_t i : idx) {
      const float v = test_weight_value(fc.seed, it->name, spec.kind, i, fan_in);
      const std::uint16_t b = float_to_bf16(v);
      const std::uint16_t expect = fc.type == ElemType::f16 ? float_to_f16(bf16_to_float(b)) : b;
      if (out[i] != expect && ++bad <= 5)
        ADD_FAILURE() << "element " << i << ": 0x" << std::hex << out[i] << " vs 0x" << expect << std::dec
                      << " (value " << v << ")";
    }
    EXPECT_EQ(bad, 0) << bad << " of " << idx.size() << " elements differ";
    for (int k = 0; k < kGuard; ++k)
      if (out[n + k] != 0xFFFF) {
        ADD_FAILURE() << "write past the end at +" << k;
        break;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, GpuFillTestWeights,
                         ::testing::Values(FillCase{ElemType::bf16, 0}, FillCase{ElemType::bf16, 12345},
                                           FillCase{ElemType::f16, 0}, FillCase{ElemType::f16, 0xDEADBEEFull}),
                         [](const ::testing::TestParamInfo<FillCase>& i) {
                           return cat(type_name(i.param.type), "_seed", i.param.seed);
                         });

// The norm kind's value 1 + 0.1 u, with a product and a sum (two roundings, the host's ISO C++
// arithmetic that wrote the files) or one fused multiply-add, rounds to a different bf16 for a few
// of the 2^24 possible u. Random elements almost never hit them, so this test aims at every one:
// splitmix64 is a bijection, so inverting it gives the key (and so the seed) whose element 0 draws
// exactly that u. A few ordinary u (both ends of the range, the middle) ride along.

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull, kMix1 = 0xBF58476D1CE4E5B9ull, kMix2 = 0x94D049BB133111EBull;

constexpr std::uint64_t inverse_odd(std::uint64_t a) {
  std::uint64_t x = a;  // right to 3 bits for odd a; each Newton step doubles them
  for (int k = 0; k < 5; ++k) x *= 2 - a * x;
  return x;
}
static_assert(inverse_odd(kMix1) * kMix1 == 1 && inverse_odd(kMix2) * kMix2 == 1);

std::uint64_t splitmix64(std::uint64_t z) {
  z ^= z >> 30;
  z *= kMix1;
  z ^= z >> 27;
  z *= kMix2;
  z ^= z >> 31;
  return z;
}

// Inverse of y = x ^ (x >> s).
std::uint64_t unxorshift(std::uint64_t y, int s) {
  std::uint64_t x = y;
  for (int k = s; k < 64; k += s) x ^= y >> k;
  return x;
}

std::uint64_t unsplitmix64(std::uint64_t z) {
  z = unxorshift(z, 31);
  z *= inverse_odd(kMix2);
  z = unxorshift(z, 27);
  z *= inverse_odd(kMix1);
  return unxorshift(z, 30);
}

TEST_F(GpuOps, FillTestWeightsNormKindBitExactWhereFmaWouldRoundDifferently) {
  auto config = preset_config("tiny");
  ASSERT_TRUE(config.ok());
  const std::vector<ExpectedTensor> tensors = text_model_tensors(*config);
  const auto it = std::find_if(tensors.begin(), tensors.end(),
                               [](const ExpectedTensor& t) { return t.name == "model.norm.weight"; });
  ASSERT_NE(it, tensors.end());
  const TestWeightSpec spec0 = test_weight_spec(0, *it);  // key = 0 ^ fnv1a64(name)
  ASSERT_EQ(spec0.kind, 0);

  std::vector<std::uint32_t> ks = {0, 1u << 23, (1u << 24) - 1, 4194304, 12582911};
  std::size_t edges = 0;
  for (std::uint32_t k = 0; k < (1u << 24); ++k) {
    const float u = static_cast<float>(k) / 8388608.0f - 1.0f;
    volatile float product = 0.1f * u;  // volatile: rounded to fp32 before the sum
    const float separate = 1.0f + product, fused = std::fmaf(0.1f, u, 1.0f);
    if (float_to_bf16(separate) != float_to_bf16(fused)) {
      ks.push_back(k);
      ++edges;
    }
  }
  RecordProperty("fma_rounding_edges", static_cast<int>(edges));
  EXPECT_GT(edges, 0u);

  DevBuf<std::uint16_t> dout;
  dout.alloc(1);
  int bad = 0;
  for (const std::uint32_t k : ks) {
    // Element 0 draws bits = splitmix64(key + kGolden); u = (bits >> 40) / 2^23 - 1.
    const std::uint64_t bits = (static_cast<std::uint64_t>(k) << 40) | 0x5A5A5A5A5Aull;
    const std::uint64_t key = unsplitmix64(bits) - kGolden;
    ASSERT_EQ(splitmix64(key + kGolden), bits);
    const std::uint64_t seed = key ^ spec0.key;
    ASSERT_EQ(test_weight_spec(seed, *it).key, key);
    const float u = static_cast<float>(k) / 8388608.0f - 1.0f;
    volatile float product = 0.1f * u;
    const float host = test_weight_value(seed, it->name, 0, 0, 1);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(host), std::bit_cast<std::uint32_t>(1.0f + product))
        << "the file generator's value for u = " << u << " is not 1.0f + 0.1f * u rounded twice";
    const std::uint16_t want = float_to_bf16(host);

    dout.poison();
    kernels::launch_fill_test_weights(dout.ptr, ElemType::bf16, 1, key, 0, 1, nullptr);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<std::uint16_t> out = dout.download();
    if (out[0] != want && ++bad <= 10)
      ADD_FAILURE() << "u = " << u << " (k = " << k << "): GPU 0x" << std::hex << out[0] << ", file 0x" << want
                    << std::dec << " (1 + 0.1 u: " << (1.0f + product) << " rounded twice, " << std::fmaf(0.1f, u, 1.0f)
                    << " fused)";
    EXPECT_EQ(out[1], 0xFFFF) << "write past the end";
  }
  EXPECT_EQ(bad, 0) << bad << " of " << ks.size() << " values differ from the files";
}

// ---------------------------------------------------------------------------------------------
// 8. Conversions. bf16 -> fp16 over every bf16 bit pattern (plus a tail, so n is odd): on 16-byte
// aligned pointers (the uint4 path), on odd element offsets (the scalar path), on an aligned input
// with a misaligned output, and on a 16-byte aligned sub-pointer; all equal the aligned result bit
// for bit (NaN: both NaN), which equals the host's round-to-nearest (values beyond fp16's range
// become inf). fp16 -> fp32 over every fp16 bit pattern, exact, also from an odd offset. The
// element before a sub-pointer and the guard after stay poisoned.

using GpuConvertOps = GpuOps;

bool same_f16(std::uint16_t a, std::uint16_t b) {
  const bool na = (a & 0x7C00) == 0x7C00 && (a & 0x3FF), nb = (b & 0x7C00) == 0x7C00 && (b & 0x3FF);
  return na || nb ? na && nb : a == b;
}

TEST_F(GpuConvertOps, Bf16ToF16MisalignedEqualsAligned) {
  const std::size_t n = 65536 + 13;
  std::vector<std::uint16_t> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::uint16_t>(i * 40503u);  // a permutation, then 13 more
  std::vector<std::uint16_t> expect(n);
  for (std::size_t i = 0; i < n; ++i) expect[i] = float_to_f16(bf16_to_float(in[i]));

  // {input offset, output offset} in elements: 8 elements = 16 bytes keeps the vector path.
  const std::pair<std::size_t, std::size_t> offsets[] = {{0, 0}, {1, 1}, {3, 5}, {0, 1}, {1, 0}, {8, 8}};
  std::vector<std::uint16_t> aligned;
  for (const auto& [oi, oo] : offsets) {
    SCOPED_TRACE(cat("input offset ", oi, ", output offset ", oo));
    DevBuf<std::uint16_t> din, dout;
    din.alloc(n, oi);
    din.upload(in);
    dout.alloc(n, oo);
    EXPECT_EQ(kernels::launch_bf16_to_f16(din.ptr, dout.ptr, n, nullptr), 4 * n);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<std::uint16_t> all = dout.download_all();
    for (std::size_t k = 0; k < oo; ++k) EXPECT_EQ(all[k], 0xFFFF) << "write before the start, at -" << (oo - k);
    const std::vector<std::uint16_t> out(all.begin() + static_cast<std::ptrdiff_t>(oo),
                                         all.begin() + static_cast<std::ptrdiff_t>(oo + n));
    for (std::size_t k = 0; k < static_cast<std::size_t>(kGuard); ++k)
      if (all[oo + n + k] != 0xFFFF) {
        ADD_FAILURE() << "write past the end, at +" << k;
        break;
      }
    if (oi == 0 && oo == 0) aligned = out;
    int bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if ((!same_f16(out[i], aligned[i]) || !same_f16(out[i], expect[i])) && ++bad <= 5)
        ADD_FAILURE() << "element " << i << " (bf16 0x" << std::hex << in[i] << "): 0x" << out[i] << ", aligned 0x"
                      << aligned[i] << ", host 0x" << expect[i] << std::dec;
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST_F(GpuConvertOps, F16ToF32IsExact) {
  const std::size_t n = 65536 + 7;
  std::vector<std::uint16_t> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::uint16_t>(i * 40503u);
  for (const std::size_t off : {std::size_t{0}, std::size_t{1}}) {
    SCOPED_TRACE(cat("input offset ", off));
    DevBuf<std::uint16_t> din;
    DevBuf<float> dout;
    din.alloc(n, off);
    din.upload(in);
    dout.alloc(n, off);
    EXPECT_EQ(kernels::launch_f16_to_f32(din.ptr, dout.ptr, n, nullptr), 6 * n);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> all = dout.download_all();
    int bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const float got = all[off + i], want = f16_to_float(in[i]);
      const bool ok = std::isnan(want) ? std::isnan(got)
                                       : std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want);
      if (!ok && ++bad <= 5)
        ADD_FAILURE() << "element " << i << " (fp16 0x" << std::hex << in[i] << std::dec << "): " << got << " vs "
                      << want;
    }
    EXPECT_EQ(bad, 0);
    if (off) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(all[0]), 0xFFFFFFFFu) << "write before the start";
    }
    for (std::size_t k = 0; k < static_cast<std::size_t>(kGuard); ++k)
      if (std::bit_cast<std::uint32_t>(all[off + n + k]) != 0xFFFFFFFFu) {
        ADD_FAILURE() << "write past the end, at +" << k;
        break;
      }
  }
}

// ---------------------------------------------------------------------------------------------
// 9. PDL: a chain where every launch reads what the one before wrote, repeated over iterations
// that reuse the buffers with new inputs:
//   embedding(ids_it) -> x [N, 3584]
//   rms_norm(x)       -> y1 [N, 3584] fp32 (= q | k | v of 20 + 2 x 4 heads of 128)
//   rope_kv(y1)       -> q [N, 2560] fp32, k/v cache slots it * N + t (bf16)
//   rms_norm(q)       -> y2 [N, 2560] fp32
//   swiglu(y2)        -> act_it [N, 1280] bf16 (one buffer per iteration)
// Intermediate buffers start NaN-poisoned and hold the previous iteration's values later, so a
// kernel that reads before its predecessor finished sees NaN or stale data. With PDL on, the result
// must equal the PDL-off (fully serialized) result bit for bit (all kernels are deterministic).

TEST_F(GpuOps, PdlChainMatchesSerializedLaunches) {
  const int N = 1024, H = 3584, heads = 20, kv_heads = 4, D = 128, iters = 4, vocab = 512;
  const int qd = heads * D, kvd = kv_heads * D, ff = qd / 2;
  static_assert(20 * 128 + 2 * 4 * 128 == 3584);
  Rng rng(4242);
  std::vector<std::uint16_t> table(static_cast<std::size_t>(vocab) * H), g1(H), g2(qd);
  for (auto& v : table) v = rbf(2.0f * rng.next());
  for (auto& v : g1) v = rbf(1.0f + 0.5f * rng.next());
  for (auto& v : g2) v = rbf(1.0f + 0.5f * rng.next());
  std::vector<std::int32_t> ids(static_cast<std::size_t>(iters) * N), pos(3 * static_cast<std::size_t>(N)),
      slots(static_cast<std::size_t>(iters) * N);
  for (auto& id : ids) id = rng.below(vocab);
  for (int t = 0; t < N; ++t) {
    pos[3 * t] = t;
    pos[3 * t + 1] = t / 32;
    pos[3 * t + 2] = t % 32 + 7;
  }
  for (int i = 0; i < iters * N; ++i) slots[i] = i;
  std::vector<float> inv_freq(D / 2);
  for (int j = 0; j < D / 2; ++j) inv_freq[j] = 1.0f / std::pow(1e6f, static_cast<float>(2 * j) / D);

  DevBuf<std::uint16_t> dtable, dg1, dg2, dk, dv;
  DevBuf<std::int32_t> dids, dpos, dslots;
  DevBuf<float> dinv, dx, dy1, dq, dy2;
  std::vector<DevBuf<std::uint16_t>> dact(iters);
  dtable.alloc(table.size());
  dtable.upload(table);
  dg1.alloc(g1.size());
  dg1.upload(g1);
  dg2.alloc(g2.size());
  dg2.upload(g2);
  dids.alloc(ids.size());
  dids.upload(ids);
  dpos.alloc(pos.size());
  dpos.upload(pos);
  dslots.alloc(slots.size());
  dslots.upload(slots);
  dinv.alloc(inv_freq.size());
  dinv.upload(inv_freq);
  dx.alloc(static_cast<std::size_t>(N) * H);
  dy1.alloc(static_cast<std::size_t>(N) * H);
  dq.alloc(static_cast<std::size_t>(N) * qd);
  dy2.alloc(static_cast<std::size_t>(N) * qd);
  dk.alloc(static_cast<std::size_t>(iters) * N * kvd);
  dv.alloc(static_cast<std::size_t>(iters) * N * kvd);
  for (auto& b : dact) b.alloc(static_cast<std::size_t>(N) * ff);

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  struct ChainOut {
    std::vector<std::vector<std::uint16_t>> act;
    std::vector<std::uint16_t> k, v;
  };
  auto run = [&](bool pdl) {
    ChainOut r;
    for (auto* b : {&dx, &dy1, &dq, &dy2}) b->poison();
    dk.poison();
    dv.poison();
    for (auto& b : dact) b.poison();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    kernels::set_pdl_enabled(pdl);
    for (int it = 0; it < iters; ++it) {
      kernels::launch_embedding(as_bf16(dtable.ptr), dids.ptr + static_cast<std::size_t>(it) * N, dx.ptr, N, H, stream);
      kernels::launch_rms_norm(dx.ptr, H, as_bf16(dg1.ptr), dy1.ptr, N, H, 1e-6f, stream);
      kernels::RopeKvArgs a;
      a.qkv = dy1.ptr;
      a.positions = dpos.ptr;
      a.inv_freq = dinv.ptr;
      a.slots = dslots.ptr + static_cast<std::size_t>(it) * N;
      a.q = dq.ptr;
      a.q_type = ElemType::f32;
      a.k_cache = dk.ptr;
      a.v_cache = dv.ptr;
      a.kv_type = ElemType::bf16;
      a.n = N;
      a.heads = heads;
      a.kv_heads = kv_heads;
      a.head_dim = D;
      a.section0 = 16;
      a.section1 = 24;
      kernels::launch_rope_kv(a, stream);
      kernels::launch_rms_norm(dq.ptr, qd, as_bf16(dg2.ptr), dy2.ptr, N, qd, 1e-6f, stream);
      kernels::launch_swiglu(dy2.ptr, dact[it].ptr, ElemType::bf16, N, ff, stream);
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    kernels::set_pdl_enabled(false);
    for (auto& b : dact) {
      std::vector<std::uint16_t> v = b.download();
      v.resize(b.n);
      r.act.push_back(std::move(v));
    }
    r.k = dk.download();
    r.v = dv.download();
    return r;
  };
  const ChainOut serial = run(false);
  // The serialized result is complete: no output still poisoned (bf16 NaN).
  auto count_nan = [](const std::vector<std::uint16_t>& v, std::size_t n) {
    std::size_t c = 0;
    for (std::size_t i = 0; i < n; ++i) c += (v[i] & 0x7F80) == 0x7F80 && (v[i] & 0x7F);
    return c;
  };
  for (int it = 0; it < iters; ++it) EXPECT_EQ(count_nan(serial.act[it], serial.act[it].size()), 0u) << "act " << it;
  EXPECT_EQ(count_nan(serial.k, dk.n), 0u);
  EXPECT_EQ(count_nan(serial.v, dv.n), 0u);
  // Spot check of the serialized chain's first stage against the host: v of token 0, iteration 0,
  // is rms_norm(table[ids[0]]) restricted to the v columns (the v copy is exact; bf16 rounding).
  {
    const std::uint16_t* row = table.data() + static_cast<std::size_t>(ids[0]) * H;
    double ss = 0;
    for (int i = 0; i < H; ++i) ss += static_cast<double>(bf16_to_float(row[i])) * bf16_to_float(row[i]);
    const double inv = 1.0 / std::sqrt(ss / H + 1e-6);
    Checker ck{"pdl_chain_v"};
    for (int i = 0; i < kvd; ++i) {
      const int col = qd + kvd + i;
      const double ref = static_cast<double>(bf16_to_float(g1[col])) * (bf16_to_float(row[col]) * inv);
      const Expect e = stored(ElemType::bf16, ref, 2.0 * (std::ceil(H / 256.0) + 24) * kU * std::fabs(ref));
      ck.near(bf16_to_float(serial.v[i]), e.want, e.tol, 0, i);
    }
    ck.finish();
  }
  for (int rep = 0; rep < 3; ++rep) {
    SCOPED_TRACE(cat("pdl run ", rep));
    const ChainOut pdl = run(true);
    for (int it = 0; it < iters; ++it) {
      const auto& a = serial.act[it];
      const auto& b = pdl.act[it];
      const auto mismatch = std::mismatch(a.begin(), a.end(), b.begin());
      EXPECT_TRUE(mismatch.first == a.end())
          << "iteration " << it << ": act differs first at " << (mismatch.first - a.begin()) << " of " << a.size();
    }
    EXPECT_TRUE(serial.k == pdl.k) << "k cache differs with pdl";
    EXPECT_TRUE(serial.v == pdl.v) << "v cache differs with pdl";
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace cosmos
