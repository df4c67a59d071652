// Hot CPU loops built for three x86-64 levels and picked once at load time by the CPU the engine
// runs on (GCC / Clang function multi-versioning through an ifunc): the baseline that Debian's
// packages target (SSE2, 4 floats per vector), x86-64-v3 (AVX2 + FMA, 8) and x86-64-v4 (AVX-512,
// 16). The loops are written once with `#pragma omp simd`; each clone vectorizes them at its own
// width. Summation order, and with it the last bits of a sum, depends on the clone. Elsewhere (other
// architectures, other compilers, or with COSMOS_NO_SIMD_CLONES defined) the macro is empty.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(COSMOS_NO_SIMD_CLONES)
#define COSMOS_SIMD_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define COSMOS_SIMD_CLONES
#endif
