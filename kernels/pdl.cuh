// Programmatic dependent launch (Hopper, sm_90+): a kernel launched with launch_pdl() may start
// while the kernel before it on the stream is still finishing, so its launch and prologue (for
// example loading weights, which no kernel writes) overlap the previous kernel's tail.
//
// Contract for every kernel launched with launch_pdl():
//   - call pdl_wait() before touching any global memory that another kernel writes or reads
//     (activations, KV cache, metadata, outputs); before it, only immutable data such as weights
//     may be read;
//   - call pdl_launch_dependents() when the next kernel may be scheduled (early is fine: the next
//     kernel still waits in its own pdl_wait() for this one to complete and flush).
// On GPUs before sm_90 (and when pdl is disabled) both are no-ops and launches serialize as usual.
#pragma once

#include <utility>

#include <cuda_runtime.h>

namespace cosmos::kernels {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Process-wide switch (off by default): the CUDA backend turns it on for sm_90+ devices; tests can
// run the same kernels with and without it.
void set_pdl_enabled(bool on);
bool pdl_enabled();

// Launches `kernel` with the programmatic-stream-serialization attribute when pdl is enabled.
template <typename... KArgs, typename... Args>
cudaError_t launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                       Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace cosmos::kernels
