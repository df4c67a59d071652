// COSMOS_QGEMV_TUNING (kernels/qgemv_tuning_spec.h) reaches the quantized products' plans
// (kernels/gemv_quant.cu): a shape's entry sets that shape's knobs, on top of bench_gemv_quant's
// (set_gemv_quant_tuning), and leaves other shapes to their automatic plan. The variants' results
// are checked by test_gpu_gemv_quant, which runs every knob; this checks only that the entry is
// taken. A binary of its own: the variable is read at the process's first plan.
#include <cstdint>
#include <cstdlib>

#include <gtest/gtest.h>

#include "cosmos/quant.h"
#include "kernels/device_info.cuh"
#include "kernels/gemv_quant.cuh"
#include "gemv_quant_test_common.h"

namespace cosmos {
namespace {

using namespace gemv_quant_test;

kernels::QGemvArgs args_of(const DevQuant& w, const float* x, float* y, int rows, int cols) {
  kernels::QGemvArgs a;
  a.w = w.mat;
  a.x = x;
  a.y = y;
  a.rows = rows;
  a.cols = cols;
  return a;
}

TEST(GpuQGemvTuningEnv, AShapesEntrySetsItsKnobsOnly) {
  const auto q = kernels::query_gpus();
  if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  // down: 8 loads per row in its automatic plan (the int4 kernel of 16 warps per SM); o at a short
  // context: the 4-blocks-per-SM kernel (wide 0; test_gpu_gemv_quant checks that).
  ASSERT_EQ(setenv("COSMOS_QGEMV_TUNING", "down/loads=4;o/wide=1;down/bad=1", 1), 0);
  Rng rng(20261206u);
  constexpr int kH = 3584, kF = 18944;
  const HostQuant down(QuantFormat::int4_group, kH, kF, rng), o(QuantFormat::int4_group, kH, kH, rng);
  DevQuant dd, dof;
  dd.upload(down.m);
  dof.upload(o.m);
  DevBuf<float> x, y;
  x.alloc(kF);
  y.alloc(kH);
  const kernels::QGemvTuning down_plan = kernels::gemv_quant_plan(args_of(dd, x.ptr, y.ptr, kH, kF));
  EXPECT_EQ(down_plan.loads, 4);
  EXPECT_EQ(kernels::gemv_quant_plan(args_of(dof, x.ptr, y.ptr, kH, kH)).wide, 1);
  // bench_gemv_quant's knobs for every shape: the entry's key still wins for its shape, and the
  // other keys come from the knobs.
  kernels::QGemvTuning all;
  all.loads = 8;
  all.pipeline = 0;
  kernels::set_gemv_quant_tuning(all);
  const kernels::QGemvTuning both = kernels::gemv_quant_plan(args_of(dd, x.ptr, y.ptr, kH, kF));
  EXPECT_EQ(both.loads, 4);
  EXPECT_EQ(both.pipeline, 0);
  kernels::set_gemv_quant_tuning({});
}

}  // namespace
}  // namespace cosmos
