// Per-block timestamps of the decode chain's kernels: a diagnostic build (CMake option COSMOS_KTRACE,
// off by default; without it every KTRACE_* macro is empty). It shows where a kernel's time goes in
// the engine, under PDL, next to its real neighbours, which neither the kernel benchmarks (one kernel
// chained with itself) nor ncu (kernels serialized) can: when each block starts, passes the PDL wait,
// ends its prologue and ends. tests/gpu/ktrace.py turns the records into a table per kernel.
//
// Each instrumented block writes one record as it ends (thread 0, after the block's last barrier):
// the global timer (ns, comparable across SMs) at its start and end, and its SM's clock (cycles from
// its start, exact within the block) after the wait, after the staging loop and after the prologue.
// Records of one translation unit go to a device buffer of kCap entries (later blocks are dropped)
// and, when the environment names COSMOS_KTRACE_DIR, to <dir>/<name>.bin at process exit (raw Rec).
//
// Use (the GPU machine; tests/gpu/ktrace.py's header has the commands):
//   cmake --preset gpu -B build/gpu-ktrace -DCOSMOS_KTRACE=ON && cmake --build build/gpu-ktrace --target cosmos_cuda
//   COSMOS_CUDA_MODULE=<that libcosmos-cuda.so> COSMOS_KTRACE_DIR=/tmp/kt cosmos-cli bench ... --gen 32 --reps 1
//   tests/gpu/ktrace.py /tmp/kt/*.bin
// The trace costs ~2% of decode speed (one atomic and one 72-byte store per block).
#pragma once
#ifdef COSMOS_KTRACE
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace cosmos::kernels::ktrace {

struct Rec {
  unsigned long long g0, g1;       // global timer at the block's start and end (ns)
  long long c_wait, c_pro, c_end;  // SM cycles from the start: after the PDL wait, the prologue, the end
  long long sm, a, b;              // SM id; the kernel (gemv: rows, cols; decode attention: -1, grid z * 1000 + y)
  long long c_loop;                // SM cycles from the start to the end of the prologue's staging loop
};
static_assert(sizeof(Rec) == 72, "tests/gpu/ktrace.py reads 72-byte records");

constexpr unsigned kCap = 1u << 20;  // 72 MB of device memory per instrumented translation unit
static __device__ Rec g_rec[kCap];
static __device__ unsigned g_n;

__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ long long cycles() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

// One block's record, written by thread 0 when the object leaves scope (on every return path).
struct Block {
  unsigned long long g0;
  long long c0, cw = 0, cl = 0, cp = 0;
  long long a, b;
  __device__ Block(long long a_, long long b_) : g0(gtime()), c0(cycles()), a(a_), b(b_) {}
  __device__ ~Block() {
    if (threadIdx.x == 0) {
      // The end's clocks before the atomic: its L2 round trip (0.5-1 us, longer under load) is the
      // trace's own cost, not the block's (before session 65 every end included it).
      const unsigned long long g1 = gtime();
      const long long ce = cycles() - c0;
      const unsigned id = atomicAdd(&g_n, 1u);
      if (id < kCap) g_rec[id] = Rec{g0, g1, cw, cp, ce, static_cast<long long>(smid()), a, b, cl};
    }
  }
  __device__ void waited() { cw = cycles() - c0; }
  __device__ void loop() { cl = cycles() - c0; }
  __device__ void prologue() { cp = cycles() - c0; }
};

static const char*& dump_name() {
  static const char* n = nullptr;
  return n;
}
static void dump() {
  const char* dir = std::getenv("COSMOS_KTRACE_DIR");
  if (!dir || cudaDeviceSynchronize() != cudaSuccess) return;
  unsigned n = 0;
  if (cudaMemcpyFromSymbol(&n, g_n, sizeof n) != cudaSuccess) return;
  if (n > kCap) {
    std::fprintf(stderr, "ktrace: %s: %u blocks, the first %u kept\n", dump_name(), n, kCap);
    n = kCap;
  }
  std::vector<Rec> v(n);
  if (n && cudaMemcpyFromSymbol(v.data(), g_rec, n * sizeof(Rec)) != cudaSuccess) return;
  const std::string path = std::string(dir) + "/" + dump_name() + ".bin";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(v.data(), sizeof(Rec), n, f) != n) {
    std::fprintf(stderr, "ktrace: cannot write %s\n", path.c_str());
  } else {
    std::fprintf(stderr, "ktrace: %u records -> %s\n", n, path.c_str());
  }
  if (f) std::fclose(f);
}
// Called by a launcher: registers the dump at the first launch, after the CUDA runtime registered
// its own exit handlers, so that it runs before them.
static void arm(const char* name) {
  static bool armed = false;
  if (armed) return;
  armed = true;
  dump_name() = name;
  std::atexit(dump);
}

}  // namespace cosmos::kernels::ktrace

#define KTRACE_BLOCK(a, b) ::cosmos::kernels::ktrace::Block kt_block_((a), (b))
#define KTRACE_WAITED() kt_block_.waited()
#define KTRACE_LOOP() kt_block_.loop()
#define KTRACE_PROLOGUE() kt_block_.prologue()
#define KTRACE_FINISH() __syncthreads()  // the block's end: the record is written as kt_block_ leaves scope
#define KTRACE_ARM(name) ::cosmos::kernels::ktrace::arm(name)
#else
#define KTRACE_BLOCK(a, b) ((void)0)
#define KTRACE_WAITED() ((void)0)
#define KTRACE_LOOP() ((void)0)
#define KTRACE_PROLOGUE() ((void)0)
#define KTRACE_FINISH() ((void)0)
#define KTRACE_ARM(name) ((void)0)
#endif
