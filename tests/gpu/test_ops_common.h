// Shared by the test_gpu_ops sources (test_ops_elementwise.cpp, test_ops_rope.cpp,
// test_ops_matmul.cpp, test_ops_misc.cpp; one test binary): the host helpers and the fixture the
// small-kernel tests use.
// Everything here is inline (or a class or template), so several translation units can include it.
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
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/device_info.cuh"
#include "kernels/elem_type.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::gpu_ops_test {

using kernels::ElemType;

inline constexpr double kU = 0x1p-24;         // fp32 unit roundoff
inline constexpr double kHalfUlpBf16 = 0x1p-8;  // bf16: 8 significant bits
inline constexpr double kHalfUlpF16 = 0x1p-11;  // fp16: 11 significant bits
inline constexpr int kGuard = 64;             // poisoned elements after every output

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
  float uniform() { return static_cast<float>(bits() >> 40) / static_cast<float>(1 << 24); }  // [0, 1)
  int below(int n) { return static_cast<int>(bits() % static_cast<std::uint64_t>(n)); }
};

inline float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

// Round to nearest even (finite values), the rounding of test_model.cpp's to_bf16.
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

inline float f16_to_float(std::uint16_t b) { return static_cast<float>(std::bit_cast<_Float16>(b)); }

inline std::uint16_t float_to_f16(float f) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f)); }

// A bf16 (raw bits) of `v`, and the float it holds.
inline std::uint16_t rbf(float v) { return float_to_bf16(v); }

// Concatenates anything streamable (GCC 12 warns, wrongly, on "literal" + std::string at -O3).
template <typename... A>
std::string cat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}

inline const char* type_name(ElemType t) { return t == ElemType::f32 ? "f32" : (t == ElemType::bf16 ? "bf16" : "f16"); }

// Element i of a downloaded output of type t.
inline double load(const std::vector<unsigned char>& raw, ElemType t, std::size_t i) {
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
inline bool poisoned(const std::vector<unsigned char>& raw, ElemType t, std::size_t i) {
  const std::size_t sz = kernels::elem_size(t);
  for (std::size_t b = 0; b < sz; ++b)
    if (raw[sz * i + b] != 0xFF) return false;
  return true;
}

// What an fp32 result (exact value `ref`, kernel error at most `e32`) stored as `t` must be within.
struct Expect {
  double want, tol;
};
inline Expect stored(ElemType t, double ref, double e32) {
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

// A device output of run-time element type, as raw bytes, starting `offset` elements into its
// allocation (an offset of one element misaligns it for the kernels' vector paths).
struct DevOut {
  ElemType type = ElemType::f32;
  DevBuf<unsigned char> buf;
  std::size_t n = 0, offset = 0;
  void alloc(ElemType t, std::size_t count, std::size_t offset_elems = 0) {
    type = t;
    n = count;
    offset = offset_elems;
    buf.alloc(count * kernels::elem_size(t), offset_elems * kernels::elem_size(t), kGuard * kernels::elem_size(t));
  }
  void* ptr() const { return buf.ptr; }
  std::vector<unsigned char> download() const { return buf.download(); }
  // Expects the `offset` elements before the output to be still poisoned.
  void expect_head(const std::string& what) const {
    const std::vector<unsigned char> all = buf.download_all();
    for (std::size_t i = 0; i < offset; ++i)
      if (!poisoned(all, type, i)) {
        ADD_FAILURE() << what << ": write before the start, at -" << (offset - i);
        return;
      }
  }
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

inline const __nv_bfloat16* as_bf16(const std::uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }

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

}  // namespace cosmos::gpu_ops_test
