// launch_gemv_quant (int8, fp8 E4M3 and int4 weights) against a float64 CPU reference: random fp32
// weights quantized by the engine's cosmos::quantize_rows (the CPU backend's very bytes) and the
// reference computed in double from cosmos::dequantize_row values and the same fp32 x. Fresh random
// inputs for every case; the 7B decode shapes (q/k/v with norm + bias, o with the residual aliasing
// y, gate/up with norm + SwiGLU, down with 74 KB of x, lm_head with norm) and odd shapes
// (the element-wise path: cols not a multiple of the vector width, int4 with odd cols or a short
// last group, misaligned pointers; the vector path with 1, 3 or 7 rows, with x read through L1);
// PDL off and on, under the automatic launch knobs and then under every QGemvTuning combination
// (those resolving to the same launch run once; the reference is computed once per case); outputs
// NaN-poisoned and a poisoned guard after y that must stay untouched. Then
// chains of dependent launches with PDL on (eager and in a CUDA graph), which fail if a kernel reads
// its input before the previous kernel has finished writing it.
//
// Tolerance, per output (u = 2^-24). Both sides use the same quantized bytes and fp32 x, so the
// differences are fp32 roundings. Let A = sum_c |s q_c| |xn_c| (int8 / fp8: s the row scale) or
// sum_c (|s_g q_c| + |m_g|) |xn_c| (int4), the magnitudes the kernel's sums actually carry (int4's
// s (q . x) + m sum(x) split can be far larger than |w x| when m cancels s q):
//   - products and sums: a product passes through at most N = ceil(cols / 32) + 64 fp32 roundings:
//     the element-wise kernel's lane sum of ceil(cols / 32) terms, 5 shuffle levels and the epilogue;
//     the vector kernel's fewer (16 or 32 per 16-byte vector, ceil(cols / 512) vectors per lane,
//     the scale FFMA, the shuffles); int4's group sums of x (4-term sums and 5 shuffle levels, <= 8
//     roundings relative to sum |x| over the group); the reference's own fp32 dequantization
//     (fl(q s) for int8 / fp8, fl(fl(q s) + m) for int4: <= 2 u (|q s| + |m|)) and the element-wise
//     kernel's fmaf(q, s, m). First-order bound of recursive summation: N u A;
//   - fused RMSNorm: xn carries a relative error of at most (cols / 256 + 24) u (as test_gemv.cpp);
//   - SwiGLU: silu' <= 1.1, so 1.1 |up| err_g + |silu(g)| err_u + 8 u |y|; bias and residual adds:
//     one rounding each.
//   - int4 on tensor cores (gemv_q4_mma.cu): x enters as bf16 hi + lo, |x - hi - lo| <= 2^-18 |x|
//     = 64 u |x| (kTcX u A); the mma sums carry s (128 + q) |x| (the weights offset by 128), with at
//     most kTcOffset = 16 roundings (2 per mma in a chain of 4, the chains' and the columns' sums,
//     the subtraction of 128 X'), so B = sum_c s_g (128 + q_c) |xn_c| adds kTcOffset u B.
// The bound is doubled for margin. A real bug (a wrong nibble, scale, group or x element) errs by
// about |w x| on many terms; the relative L2 error over all outputs must also stay below 1e-5 (with
// at least 16 outputs: for one output it is that output's error relative to a value that can cancel).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cosmos/quant.h"
#include "kernels/device_info.cuh"
#include "kernels/gemv_quant.cuh"
#include "kernels/pdl.cuh"

namespace cosmos {
namespace {

constexpr double kU = 1.0 / (1 << 24);
constexpr double kTcX = 64;       // int4 tensor-core kernel: x as bf16 hi + lo (see the top comment)
constexpr double kTcOffset = 16;  // its roundings of the offset sums

// Fast deterministic uniform random numbers in [-1, 1) (splitmix64).
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed) {}
  float next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) / static_cast<float>(1 << 23) - 1.0f;
  }
};

float bf16_to_f(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint16_t f_to_bf16(float v) {
  const __nv_bfloat16 h = __float2bfloat16(v);
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// A device buffer holding `n` elements starting `offset` elements into the allocation (offset 1 on a
// 16-byte aligned allocation makes a misaligned pointer), plus `guard` NaN-poisoned elements after.
template <typename E>
struct DevBuf {
  E* base = nullptr;
  E* ptr = nullptr;
  std::size_t n = 0;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (base) cudaFree(base);
  }
  void alloc(std::size_t count, int offset = 0, int guard = 0) {
    n = count;
    const std::size_t bytes = std::max<std::size_t>((count + offset + guard) * sizeof(E), 16);
    ASSERT_EQ(cudaMalloc(&base, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(base, 0xFF, bytes), cudaSuccess);  // NaN for floats and bf16
    ptr = base + offset;
  }
  void upload(const std::vector<E>& v) {
    ASSERT_EQ(cudaMemcpy(ptr, v.data(), v.size() * sizeof(E), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<E> download(std::size_t count) const {
    std::vector<E> v(count);
    EXPECT_EQ(cudaMemcpy(v.data(), ptr, count * sizeof(E), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

const char* fmt_name(QuantFormat f) {
  switch (f) {
    case QuantFormat::int8_row: return "int8";
    case QuantFormat::fp8_row: return "fp8";
    case QuantFormat::int4_group: return "int4";
  }
  return "?";
}
kernels::QuantKind kind_of(QuantFormat f) {
  switch (f) {
    case QuantFormat::int8_row: return kernels::QuantKind::int8_row;
    case QuantFormat::fp8_row: return kernels::QuantKind::fp8_row;
    case QuantFormat::int4_group: return kernels::QuantKind::int4_group;
  }
  return kernels::QuantKind::int8_row;
}

// A quantized matrix and, per row, its dequantized values' dot products are computed on the fly.
// Weights: uniform, scaled so each output is about as large as the inputs, some rows shifted (int4
// minimums away from -7.5 s) and every 97th row zero (scale 0).
struct HostQuant {
  QuantizedMatrix m;
  // Quantizes in chunks of rows (no full fp32 copy of lm_head-sized matrices).
  HostQuant(QuantFormat f, int rows, int cols, Rng& rng) : m(make_quantized(f, rows, cols)) {
    const float ws = std::sqrt(3.0f / static_cast<float>(cols));
    const int chunk = std::max(1, (1 << 22) / std::max(cols, 1));
    std::vector<float> src;
    for (int r0 = 0; r0 < rows; r0 += chunk) {
      const int r1 = std::min(rows, r0 + chunk);
      src.assign(static_cast<std::size_t>(r1 - r0) * cols, 0.0f);
      for (int r = r0; r < r1; ++r) {
        if (r % 97 == 5) continue;
        const float shift = (r % 5 == 1) ? 0.5f * rng.next() : 0.0f;
        float* d = src.data() + static_cast<std::size_t>(r - r0) * cols;
        for (int c = 0; c < cols; ++c) d[c] = (rng.next() + shift) * ws;
      }
      QuantizedMatrix part = make_quantized(f, r1 - r0, cols);
      const Status st = quantize_rows(reinterpret_cast<const std::byte*>(src.data()), DType::f32, part, 0, r1 - r0);
      EXPECT_TRUE(st.ok());
      std::copy(part.q.begin(), part.q.end(), m.q.begin() + static_cast<std::ptrdiff_t>(part.q.size() / (r1 - r0)) * r0);
      std::copy(part.row_scale.begin(), part.row_scale.end(), m.row_scale.begin() + (part.row_scale.empty() ? 0 : r0));
      const std::ptrdiff_t g = static_cast<std::ptrdiff_t>(m.groups());
      std::copy(part.group_scale.begin(), part.group_scale.end(), m.group_scale.begin() + (part.group_scale.empty() ? 0 : g * r0));
      std::copy(part.group_min.begin(), part.group_min.end(), m.group_min.begin() + (part.group_min.empty() ? 0 : g * r0));
    }
  }
  // Row r: dequantized values (dst), the magnitudes |s q| (+ |m| for int4) of the kernel's terms,
  // and (int4) |s| (128 + q), the terms of the tensor-core kernel's offset sums (else 0).
  void row(std::int64_t r, std::vector<float>& dst, std::vector<double>& mag, std::vector<double>& omag) const {
    const std::int64_t cols = m.cols;
    dst.resize(static_cast<std::size_t>(cols));
    mag.resize(static_cast<std::size_t>(cols));
    omag.assign(static_cast<std::size_t>(cols), 0.0);
    dequantize_row(m, r, dst.data());
    if (m.format == QuantFormat::int4_group) {
      const std::uint8_t* q = m.q.data() + r * ((cols + 1) / 2);
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::size_t k = static_cast<std::size_t>(r * m.groups() + c / kInt4GroupSize);
        const int qc = (c & 1) ? q[c / 2] >> 4 : q[c / 2] & 0xF;
        mag[c] = std::fabs(static_cast<double>(qc) * bf16_to_f(m.group_scale[k])) + std::fabs(bf16_to_f(m.group_min[k]));
        omag[c] = std::fabs(static_cast<double>(bf16_to_f(m.group_scale[k]))) * (128 + qc);
      }
    } else {
      for (std::int64_t c = 0; c < cols; ++c) mag[c] = std::fabs(static_cast<double>(dst[c]));
    }
  }
};

// The quantized matrix on the device; q starts `q_offset` bytes into its allocation.
struct DevQuant {
  DevBuf<std::uint8_t> q;
  DevBuf<float> row_scale;
  DevBuf<std::uint16_t> gs, gm;
  kernels::QuantMatrix mat;
  void upload(const QuantizedMatrix& m, int q_offset = 0) {
    q.alloc(m.q.size(), q_offset);
    q.upload(m.q);
    mat.kind = kind_of(m.format);
    mat.q = q.ptr;
    if (!m.row_scale.empty()) {
      row_scale.alloc(m.row_scale.size());
      row_scale.upload(m.row_scale);
      mat.row_scale = row_scale.ptr;
    }
    if (!m.group_scale.empty()) {
      gs.alloc(m.group_scale.size());
      gs.upload(m.group_scale);
      gm.alloc(m.group_min.size());
      gm.upload(m.group_min);
      mat.group_scale = gs.ptr;
      mat.group_min = gm.ptr;
    }
  }
};

struct Case {
  QuantFormat fmt;
  int rows, cols;
  bool bias, residual, alias, norm, swiglu, misalign;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string s = std::string(fmt_name(c.fmt)) + "_" + std::to_string(c.rows) + "x" + std::to_string(c.cols);
  if (c.bias) s += "_bias";
  if (c.residual) s += c.alias ? "_resalias" : "_res";
  if (c.norm) s += "_norm";
  if (c.swiglu) s += "_swiglu";
  if (c.misalign) s += "_misaligned";
  return s;
}

void run_case(const Case& c) {
  const int outs = c.swiglu ? c.rows / 2 : c.rows;
  const float eps = 1e-6f;
  Rng rng(static_cast<std::uint64_t>(c.rows) * 1000003u + static_cast<std::uint64_t>(c.cols) * 7919u +
          (c.norm ? 11u : 0u) + (c.swiglu ? 101u : 0u) + static_cast<std::uint64_t>(c.fmt) * 1009u);
  const HostQuant hq(c.fmt, c.rows, c.cols, rng);
  std::vector<std::uint16_t> bias(c.rows), g(c.cols);
  std::vector<float> x(c.cols), residual(outs);
  for (auto& v : bias) v = f_to_bf16(rng.next());
  for (auto& v : g) v = f_to_bf16(1.0f + 0.5f * rng.next());
  for (auto& v : x) v = 3.0f * rng.next();  // the norm input is not unit-scale
  for (auto& v : residual) v = rng.next();

  // float64 reference and per-output bounds (see the top comment)
  std::vector<double> xn(c.cols);
  double ss = 0;
  for (int i = 0; i < c.cols; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / c.cols + eps);
  for (int i = 0; i < c.cols; ++i) xn[i] = c.norm ? static_cast<double>(bf16_to_f(g[i])) * (x[i] * inv) : x[i];
  const double n_dot = std::ceil(c.cols / 32.0) + 64, n_norm = c.norm ? std::ceil(c.cols / 256.0) + 24 : 0;
  std::vector<double> dot(c.rows), err(c.rows);
  std::vector<float> wrow;
  std::vector<double> mrow, orow;
  for (int r = 0; r < c.rows; ++r) {
    hq.row(r, wrow, mrow, orow);
    double acc = 0, mag = 0, omag = 0;
    for (int i = 0; i < c.cols; ++i) {
      acc += static_cast<double>(wrow[i]) * xn[i];
      mag += mrow[i] * std::fabs(xn[i]);
      omag += orow[i] * std::fabs(xn[i]);
    }
    if (c.bias) acc += bf16_to_f(bias[r]);
    dot[r] = acc;
    err[r] = 2 * (n_dot + n_norm + kTcX) * kU * mag + 2 * kTcOffset * kU * omag + 2 * kU * std::fabs(acc);
  }
  std::vector<double> ref(outs), tol(outs);
  for (int o = 0; o < outs; ++o) {
    double v, e;
    if (c.swiglu) {
      const double gt = dot[o], up = dot[o + outs], eg = err[o], eu = err[o + outs];
      const double silu = gt / (1 + std::exp(-gt));
      v = silu * up;
      e = 1.1 * eg * (std::fabs(up) + eu) + std::fabs(silu) * eu + 2 * 8 * kU * std::fabs(v);
    } else {
      v = dot[o];
      e = err[o];
    }
    if (c.residual) {
      v += residual[o];
      e += 2 * kU * (std::fabs(v) + std::fabs(residual[o]));
    }
    ref[o] = v;
    tol[o] = e + 1e-30;
  }

  DevQuant dw;
  DevBuf<std::uint16_t> db, dg;
  DevBuf<float> dx, dres, dy;
  constexpr int kGuard = 64;  // poisoned floats after y: nothing may be written there
  dw.upload(hq.m, c.misalign ? 1 : 0);
  db.alloc(c.rows);
  db.upload(bias);
  dg.alloc(c.cols);
  dg.upload(g);
  dx.alloc(c.cols, c.misalign ? 1 : 0);
  dx.upload(x);
  dres.alloc(outs);
  dres.upload(residual);
  dy.alloc(outs, 0, kGuard);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  // The automatic knobs with PDL off and on, then every knob combination (PDL on) that resolves to
  // a launch not run yet.
  struct Run {
    kernels::QGemvTuning tuning;
    bool pdl;
    bool record;
  };
  std::vector<Run> runs = {{kernels::QGemvTuning{}, false, true}, {kernels::QGemvTuning{}, true, true}};
  for (int rows : {1, 2})
    for (int loads : {4, 7, 8})  // 7: int4's 8-byte vectors where the shape takes them
      for (int pipe : {0, 1})
        for (int l2 : {0, 1})
          for (int st : {0, 1}) runs.push_back({kernels::QGemvTuning{rows, loads, pipe, l2, st, 0, 0}, true, false});
  for (int mma : {2, 4})
    for (int tw : {4, 8}) runs.push_back({kernels::QGemvTuning{0, 0, -1, -1, -1, mma, tw}, true, false});
  std::vector<kernels::QGemvTuning> done;
  auto same = [](const kernels::QGemvTuning& a, const kernels::QGemvTuning& b) {
    return a.rows_per_item == b.rows_per_item && a.loads == b.loads && a.pipeline == b.pipeline &&
           a.l2_next == b.l2_next && a.stage_x == b.stage_x && a.mma == b.mma &&
         a.mma_tile_warps == b.mma_tile_warps;
  };
  for (const Run& run : runs) {
    const bool pdl = run.pdl;
    kernels::set_gemv_quant_tuning(run.tuning);
    kernels::QGemvArgs pa;
    pa.w = dw.mat;
    pa.x = dx.ptr;
    pa.rows = c.rows;
    pa.cols = c.cols;
    pa.norm_weight = c.norm ? reinterpret_cast<const __nv_bfloat16*>(dg.ptr) : nullptr;
    pa.swiglu = c.swiglu;
    const kernels::QGemvTuning plan = kernels::gemv_quant_plan(pa);
    if (!run.record) {
      bool seen = false;
      for (const auto& d : done) seen = seen || same(d, plan);
      if (seen) continue;
    }
    if (pdl) done.push_back(plan);
    char trace[160];
    std::snprintf(trace, sizeof trace, "pdl %s, rows %d loads %d pipeline %d l2_next %d stage_x %d mma %d/%d%s",
                  pdl ? "on" : "off", plan.rows_per_item, plan.loads, plan.pipeline, plan.l2_next, plan.stage_x,
                  plan.mma, plan.mma_tile_warps, run.record ? " (auto)" : "");
    SCOPED_TRACE(trace);
    kernels::set_pdl_enabled(pdl);
    ASSERT_EQ(cudaMemset(dy.ptr, 0xFF, (outs + kGuard) * sizeof(float)), cudaSuccess);  // NaN poison
    if (c.alias) dy.upload(residual);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    kernels::QGemvArgs a;
    a.w = dw.mat;
    a.x = dx.ptr;
    a.bias = c.bias ? reinterpret_cast<const __nv_bfloat16*>(db.ptr) : nullptr;
    a.residual = c.residual ? (c.alias ? dy.ptr : dres.ptr) : nullptr;
    a.y = dy.ptr;
    a.rows = c.rows;
    a.cols = c.cols;
    a.norm_weight = c.norm ? reinterpret_cast<const __nv_bfloat16*>(dg.ptr) : nullptr;
    a.norm_eps = eps;
    a.swiglu = c.swiglu;
    const std::size_t bytes = kernels::launch_gemv_quant(a, stream);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_GE(bytes, hq.m.bytes());
    const std::vector<float> y = dy.download(outs + kGuard);
    double num = 0, den = 0, worst = 0;
    int bad = 0;
    for (int o = 0; o < outs; ++o) {
      ASSERT_FALSE(std::isnan(y[o])) << "output " << o << " not written";
      const double d = std::fabs(y[o] - ref[o]);
      worst = std::max(worst, d / tol[o]);
      if (d > tol[o] && ++bad <= 5)
        ADD_FAILURE() << "output " << o << ": " << y[o] << " vs " << ref[o] << " (error " << d << " > bound " << tol[o]
                      << ")";
      num += d * d;
      den += ref[o] * ref[o];
    }
    for (int k = 0; k < kGuard; ++k) ASSERT_TRUE(std::isnan(y[outs + k])) << "write past the end, at +" << k;
    const double rel = std::sqrt(num / std::max(den, 1e-30));
    if (outs >= 16) {  // (a handful of outputs: the per-output bounds alone)
      EXPECT_LT(rel, 1e-5);
    }
    if (run.record) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3g / %.3g", rel, worst);
      ::testing::Test::RecordProperty(std::string("rel_l2_and_worst_err_over_bound_pdl_") + (pdl ? "on" : "off"), buf);
    }
  }
  kernels::set_gemv_quant_tuning({});
  kernels::set_pdl_enabled(false);
  cudaStreamDestroy(stream);
}

class GpuGemvQuant : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

TEST_P(GpuGemvQuant, MatchesFloat64Reference) { run_case(GetParam()); }

std::vector<Case> all_cases() {
  using F = QuantFormat;
  // rows, cols, bias, residual, alias, norm, swiglu, misalign
  const Case shapes[] = {
      // 7B decode shapes
      {F::int8_row, 4608, 3584, true, false, false, true, false, false},     // norm + q/k/v + bias
      {F::int8_row, 3584, 3584, false, true, true, false, false, false},     // o + residual (aliasing y)
      {F::int8_row, 37888, 3584, false, false, false, true, true, false},    // norm + gate/up + swiglu
      {F::int8_row, 3584, 18944, false, true, true, false, false, false},    // down + residual, x through L1
      {F::int8_row, 152064, 3584, false, false, false, true, false, false},  // norm + lm_head
      // odd shapes: the element-wise path for some or all formats
      {F::int8_row, 1, 100, false, false, false, false, false, false},
      {F::int8_row, 3, 130, true, false, false, false, false, false},
      {F::int8_row, 7, 257, false, true, false, false, false, false},
      {F::int8_row, 33, 1000, true, true, true, true, false, false},
      {F::int8_row, 74, 130, true, true, true, true, true, false},
      {F::int8_row, 9, 200, false, false, false, true, false, false},     // int4: a short last group
      {F::int8_row, 5, 3648, true, false, false, false, false, false},    // int4: a short last group
      {F::int8_row, 256, 4096, true, false, false, false, false, true},   // misaligned q and x
      {F::int8_row, 130, 3584, false, false, false, true, true, true},    // misaligned q and x
      // the vector path at the edges
      {F::int8_row, 1, 3584, false, false, false, false, false, false},   // one row: a half item
      {F::int8_row, 3, 3584, true, false, false, true, false, false},
      {F::int8_row, 7, 4096, false, true, false, false, false, false},
      {F::int8_row, 2, 16, false, false, false, false, false, false},     // int8 / fp8: one vector
      {F::int8_row, 4, 128, false, false, false, false, true, false},     // int4: one group
      {F::int8_row, 600, 1024, true, true, true, false, true, false},     // swiglu + bias + residual
      {F::int8_row, 17, 1152, true, true, true, true, false, false},      // int4 tensor cores: 9 groups, a partial tile
      {F::int8_row, 26, 640, true, true, false, true, true, false},       // int4 tensor cores: 5 groups, 13 outputs
      {F::int8_row, 40000, 512, false, false, false, true, false, false}, // many items per warp
      {F::int8_row, 64, 8192, true, false, false, true, false, false},    // x through L1, with norm
      {F::int8_row, 66, 8192, false, false, false, true, true, false},    // x through L1, norm + swiglu
      {F::int8_row, 48, 30080, false, true, true, false, false, false},   // x through L1, several steps
  };
  std::vector<Case> v;
  for (const F f : {F::int8_row, F::fp8_row, F::int4_group}) {
    for (Case c : shapes) {
      c.fmt = f;
      v.push_back(c);
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemvQuant, ::testing::ValuesIn(all_cases()), case_name);

// Launching with swiglu and an odd row count, or an empty problem, enqueues nothing and returns 0.
TEST(GpuGemvQuantArgs, RejectsOddSwigluRowsAndEmptyProblems) {
  kernels::QGemvArgs a;
  a.rows = 3;
  a.cols = 16;
  a.swiglu = true;
  EXPECT_EQ(kernels::launch_gemv_quant(a, nullptr), 0u);
  a.rows = 0;
  a.swiglu = false;
  EXPECT_EQ(kernels::launch_gemv_quant(a, nullptr), 0u);
  a.rows = 4;
  a.cols = 0;
  EXPECT_EQ(kernels::launch_gemv_quant(a, nullptr), 0u);
}

// A decode-like chain with PDL on: each launch reads what the one before wrote.
//   y1  = W1 rmsnorm(x) g1 + b1         (rows R1 >= H, cols H)
//   x  += W2 y1[0:H]                      (residual aliasing y)
//   act = swiglu(W3 rmsnorm(x) g2)        (rows 2F, cols H)
//   x  += W4 act                          (cols F: 16.5 KB of x, through L1 or staged)
// y1 and act start NaN-poisoned and x changes every iteration, so a kernel that reads its input
// before the previous kernel finished gets NaN or the previous iteration's values: both fail. The
// reference repeats the chain in float64 from the dequantized weights; the tolerance (relative L2
// 1e-4) covers fp32 rounding carried through iterations, far below one stale or missing input.
// Knob sets for the chains: the automatic ones; everything on (1 row per item, 8 loads, pipelined,
// l2_next, x staged at 2 blocks per SM); everything off (2 rows, 4 loads, x through L1); int4 on
// tensor cores (int8 / fp8: automatic).
kernels::QGemvTuning chain_tuning(int variant) {
  if (variant == 1) return kernels::QGemvTuning{1, 8, 1, 1, 1, 0, 0};
  if (variant == 2) return kernels::QGemvTuning{2, 4, 0, 0, 0, 0, 0};
  if (variant == 3) return kernels::QGemvTuning{0, 0, -1, -1, -1, 4, 4};
  return kernels::QGemvTuning{};
}

void run_chain(QuantFormat fmt, bool graph, int variant) {
  const int H = 3584, R1 = 4608, F = 4224, iters = 3;
  const float eps = 1e-6f;
  Rng rng(graph ? 77 : 78);
  const HostQuant q1(fmt, R1, H, rng), q2(fmt, H, H, rng), q3(fmt, 2 * F, H, rng), q4(fmt, H, F, rng);
  std::vector<std::uint16_t> b1(R1), g1(H), g2(H);
  for (auto& v : b1) v = f_to_bf16(0.5f * rng.next());
  for (auto& v : g1) v = f_to_bf16(1.0f + 0.5f * rng.next());
  for (auto& v : g2) v = f_to_bf16(1.0f + 0.5f * rng.next());
  std::vector<float> x0(H);
  for (auto& v : x0) v = 2.0f * rng.next();

  // float64 reference
  auto dequant = [](const HostQuant& hq) {
    std::vector<float> w(static_cast<std::size_t>(hq.m.rows) * hq.m.cols);
    for (std::int64_t r = 0; r < hq.m.rows; ++r) dequantize_row(hq.m, r, w.data() + r * hq.m.cols);
    return w;
  };
  auto matvec = [](const std::vector<float>& m, int rows, int cols, const std::vector<double>& in) {
    std::vector<double> out(rows);
    for (int r = 0; r < rows; ++r) {
      double acc = 0;
      for (int i = 0; i < cols; ++i) acc += static_cast<double>(m[static_cast<std::size_t>(r) * cols + i]) * in[i];
      out[r] = acc;
    }
    return out;
  };
  auto rmsnorm = [&](const std::vector<double>& in, const std::vector<std::uint16_t>& gw) {
    double ss = 0;
    for (double v : in) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / H + eps);
    std::vector<double> out(H);
    for (int i = 0; i < H; ++i) out[i] = static_cast<double>(bf16_to_f(gw[i])) * (in[i] * inv);
    return out;
  };
  std::vector<double> x(x0.begin(), x0.end());
  {
    const std::vector<float> w1 = dequant(q1), w2 = dequant(q2), w3 = dequant(q3), w4 = dequant(q4);
    for (int it = 0; it < iters; ++it) {
      std::vector<double> y1 = matvec(w1, R1, H, rmsnorm(x, g1));
      for (int r = 0; r < R1; ++r) y1[r] += bf16_to_f(b1[r]);
      y1.resize(H);
      const std::vector<double> d2 = matvec(w2, H, H, y1);
      for (int i = 0; i < H; ++i) x[i] += d2[i];
      const std::vector<double> gu = matvec(w3, 2 * F, H, rmsnorm(x, g2));
      std::vector<double> act(F);
      for (int j = 0; j < F; ++j) act[j] = gu[j] / (1 + std::exp(-gu[j])) * gu[F + j];
      const std::vector<double> d4 = matvec(w4, H, F, act);
      for (int i = 0; i < H; ++i) x[i] += d4[i];
    }
  }

  DevQuant dw1, dw2, dw3, dw4;
  DevBuf<std::uint16_t> db1, dg1, dg2;
  DevBuf<float> dx, dy1, dact;
  dw1.upload(q1.m);
  dw2.upload(q2.m);
  dw3.upload(q3.m);
  dw4.upload(q4.m);
  db1.alloc(R1);
  db1.upload(b1);
  dg1.alloc(H);
  dg1.upload(g1);
  dg2.alloc(H);
  dg2.upload(g2);
  dx.alloc(H);
  dx.upload(x0);
  dy1.alloc(R1);  // NaN-poisoned by alloc
  dact.alloc(F);  // likewise
  auto bf = [](const DevBuf<std::uint16_t>& b) { return reinterpret_cast<const __nv_bfloat16*>(b.ptr); };

  kernels::set_pdl_enabled(true);
  kernels::set_gemv_quant_tuning(chain_tuning(variant));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto enqueue = [&] {
    for (int it = 0; it < iters; ++it) {
      kernels::QGemvArgs a;
      a.w = dw1.mat;
      a.x = dx.ptr;
      a.bias = bf(db1);
      a.y = dy1.ptr;
      a.rows = R1;
      a.cols = H;
      a.norm_weight = bf(dg1);
      a.norm_eps = eps;
      kernels::launch_gemv_quant(a, stream);
      kernels::QGemvArgs b;
      b.w = dw2.mat;
      b.x = dy1.ptr;
      b.residual = dx.ptr;
      b.y = dx.ptr;
      b.rows = H;
      b.cols = H;
      kernels::launch_gemv_quant(b, stream);
      kernels::QGemvArgs c;
      c.w = dw3.mat;
      c.x = dx.ptr;
      c.y = dact.ptr;
      c.rows = 2 * F;
      c.cols = H;
      c.norm_weight = bf(dg2);
      c.norm_eps = eps;
      c.swiglu = true;
      kernels::launch_gemv_quant(c, stream);
      kernels::QGemvArgs d;
      d.w = dw4.mat;
      d.x = dact.ptr;
      d.residual = dx.ptr;
      d.y = dx.ptr;
      d.rows = H;
      d.cols = F;
      kernels::launch_gemv_quant(d, stream);
    }
  };
  if (graph) {
    cudaGraph_t g;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    enqueue();
    ASSERT_EQ(cudaStreamEndCapture(stream, &g), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  } else {
    enqueue();
  }
  kernels::set_gemv_quant_tuning({});
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  kernels::set_pdl_enabled(false);
  cudaStreamDestroy(stream);

  const std::vector<float> y = dx.download(H);
  double num = 0, den = 0;
  for (int i = 0; i < H; ++i) {
    ASSERT_FALSE(std::isnan(y[i])) << "x[" << i << "] is NaN: a launch read a poisoned input";
    num += (y[i] - x[i]) * (y[i] - x[i]);
    den += x[i] * x[i];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-4);
}

class GpuGemvQuantChain : public ::testing::TestWithParam<std::tuple<QuantFormat, bool, int>> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

TEST_P(GpuGemvQuantChain, DependentLaunchesWithPdlSeeTheirInputs) {
  const auto [fmt, graph, variant] = GetParam();
  run_chain(fmt, graph, variant);
}

std::string chain_name(const ::testing::TestParamInfo<std::tuple<QuantFormat, bool, int>>& i) {
  static const char* const kVariant[] = {"_auto", "_knobs_on", "_knobs_off", "_tensor_cores"};
  return std::string(fmt_name(std::get<0>(i.param))) + (std::get<1>(i.param) ? "_graph" : "_eager") +
         kVariant[std::get<2>(i.param)];
}

INSTANTIATE_TEST_SUITE_P(Chains, GpuGemvQuantChain,
                         ::testing::Combine(::testing::Values(QuantFormat::int8_row, QuantFormat::fp8_row,
                                                              QuantFormat::int4_group),
                                            ::testing::Bool(), ::testing::Values(0, 1, 2, 3)),
                         chain_name);

}  // namespace
}  // namespace cosmos
