// The small-batch kernel's fp8 instantiations (kernels/gemm_q_small_kernel.cuh), one translation
// unit per format so they compile in parallel.
#include "kernels/gemm_q_small_kernel.cuh"
#include "kernels/gemm_q_small_xs_kernel.cuh"

namespace cosmos::kernels::qsmall {

template <>
Kernel pick<kF8>(int nt, int ks, int km, bool ring) {
  return pick_format<kF8>(nt, ks, km, ring);
}

template <>
Kernel pick_col_split<kF8>(int nt, int ks, int km) {
  return pick_col_split_format<kF8>(nt, ks, km);
}

template <>
Kernel pick_xs<kF8>(int nt, int km) {
  return pick_xs_format<kF8>(nt, km);
}

}  // namespace cosmos::kernels::qsmall
