// The small-batch kernel's int8 instantiations (kernels/gemm_q_small_kernel.cuh), one translation
// unit per format so they compile in parallel.
#include "kernels/gemm_q_small_kernel.cuh"
#include "kernels/gemm_q_small_xs_kernel.cuh"

namespace cosmos::kernels::qsmall {

template <>
Kernel pick<kI8>(int nt, int ks, int km, bool ring) {
  return pick_format<kI8>(nt, ks, km, ring);
}

template <>
Kernel pick_col_split<kI8>(int nt, int ks, int km) {
  return pick_col_split_format<kI8>(nt, ks, km);
}

template <>
Kernel pick_xs<kI8>(int nt, int km) {
  return pick_xs_format<kI8>(nt, km);
}

}  // namespace cosmos::kernels::qsmall
