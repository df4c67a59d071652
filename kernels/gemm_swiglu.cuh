// The MLP's gate/up product with SwiGLU in its epilogue, for passes of several tokens (prefill):
//   out[t, i] = silu(x[t] . w[i]) * (x[t] . w[ff + i])
// with the dot products accumulated in fp32 on tensor cores and silu(g) * u evaluated in fp32 with
// the fast exponential and division (__expf, __fdividef: within (6 + 1.2 |g|) 2^-23 relative), then
// rounded once to the output type. kernels/swiglu.cu evaluates g / (1 + expf(-g)) * u from g and u
// already rounded to 16 bits: the two paths agree to the output's rounding, not bit for bit.
// Against cuBLASLt's product followed by launch_swiglu, the [n, 2 ff] gate/up matrix is never
// written or read back (the 7B prefill of 2,048 tokens: 155 MB written and 155 MB read per layer),
// and g and u are not rounded to 16 bits before the activation.
//
// Hopper only (sm_90a code: TMA copies into a 4-stage shared-memory ring, warpgroup MMA, one
// producer warpgroup and two consumer warpgroups, blocks in clusters of two that share the weight
// tiles through TMA multicast); gemm_swiglu_available() says whether this
// process can run it. Shapes: ff % 128 == 0, k % 8 == 0 (rows of 16-byte multiples, as TMA needs).
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace cosmos::kernels {

struct GemmSwigluArgs {
  const void* x = nullptr;  // [n, k] bf16 or fp16: the normed hidden states, 16-byte aligned
  const void* w = nullptr;  // [2 ff, k] same type: gate rows 0 .. ff - 1, then the up rows
  void* out = nullptr;      // [n, ff] same type: the down product's input
  int n = 0, ff = 0, k = 0;
  bool f16 = false;  // fp16 inputs and output (else bf16); fp16 output saturates to +-65504
  int cluster = 2;   // 2: blocks in pairs sharing the weight copies (TMA multicast); 1: each copies its own
};

// An sm_90 GPU is current and this build has the sm_90a code.
bool gemm_swiglu_available();
bool gemm_swiglu_supports(int ff, int k);

// Launched with programmatic dependent launch where pdl_enabled() (waits for the previous kernel
// before reading x). Returns the bytes moved (x, w and out once each), or 0 when it launched nothing:
// not available, unsupported shape, a misaligned pointer, the driver's tensor-map encoder missing or
// refusing, or the launch itself refused (its error is consumed: none is left for the caller).
std::size_t launch_gemm_swiglu(const GemmSwigluArgs& a, cudaStream_t stream);

}  // namespace cosmos::kernels
