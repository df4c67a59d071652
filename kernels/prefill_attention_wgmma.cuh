// The Hopper variant of the causal prefill attention (kernels/prefill_attention_wgmma.cu): the same
// arguments, grid and results as kernels/prefill_attention.cu, with the two products on warpgroup MMA
// (wgmma) instead of per-warp mma.sync. Built only as sm_90a code, when the build's CUDA architectures
// include 90 (COSMOS_HAVE_SM90A); kernels/prefill_attention.cu decides when to call it.
#pragma once

#include <cuda_runtime.h>

#include "kernels/prefill_attention.cuh"

namespace cosmos::kernels {

// Launches the wgmma kernel (head_dim 64 or 128; the caller checked the shape and that the current GPU
// is sm_90). Grid (heads, max_q_len / 128 rounded up, seqs), 256 threads (two warpgroups of 64 query
// rows each), 65 KB of dynamic shared memory for head_dim 128 (33 KB for 64).
void launch_prefill_attention_wgmma(const PrefillAttentionArgs& args, cudaStream_t stream);

}  // namespace cosmos::kernels
