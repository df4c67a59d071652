#include "kernels/attention.cuh"

#include <cfloat>

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHeadDim = 256;

__device__ float block_reduce(float v, float* tmp, bool is_max) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0) tmp[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = tmp[0];
  for (int w = 1; w < kThreads / 32; ++w) r = is_max ? fmaxf(r, tmp[w]) : r + tmp[w];
  __syncthreads();
  return r;
}

template <typename KV, typename Out>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a) {
  pdl_wait();
  pdl_launch_dependents();
  // One dynamic buffer, laid out explicitly: q [kMaxHeadDim] | reduction scratch [32] | scores [max_ctx].
  extern __shared__ float smem[];
  float* qs = smem;
  float* tmp = smem + kMaxHeadDim;
  float* scores = tmp + 32;
  const int t = blockIdx.x, head = blockIdx.y;
  const int kvh = head / (a.heads / a.kv_heads);
  const int len = a.ctx_len[t];
  const std::int32_t* table = a.block_tables + a.table_offset[t];
  const int kvd = a.kv_heads * a.head_dim;
  const float* qh = a.q + (static_cast<std::size_t>(t) * a.heads + head) * a.head_dim;
  for (int d = threadIdx.x; d < a.head_dim; d += kThreads) qs[d] = qh[d];
  __syncthreads();
  float mx = -FLT_MAX;
  for (int j = threadIdx.x; j < len; j += kThreads) {
    const std::size_t slot = static_cast<std::size_t>(table[j / a.block_size]) * a.block_size + j % a.block_size;
    const KV* kj = static_cast<const KV*>(a.k_cache) + slot * kvd + kvh * a.head_dim;
    float dot = 0.0f;
    for (int d = 0; d < a.head_dim; ++d) dot += qs[d] * load_elem(kj, d);
    scores[j] = dot * a.scale;
    mx = fmaxf(mx, scores[j]);
  }
  mx = block_reduce(mx, tmp, true);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < len; j += kThreads) {
    const float e = expf(scores[j] - mx);
    scores[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, tmp, false);
  const float inv = 1.0f / sum;
  Out* oh = static_cast<Out*>(a.out) + (static_cast<std::size_t>(t) * a.heads + head) * a.head_dim;
  for (int d = threadIdx.x; d < a.head_dim; d += kThreads) {
    float acc = 0.0f;
    for (int j = 0; j < len; ++j) {
      const std::size_t slot = static_cast<std::size_t>(table[j / a.block_size]) * a.block_size + j % a.block_size;
      acc += scores[j] * load_elem(static_cast<const KV*>(a.v_cache), slot * kvd + kvh * a.head_dim + d);
    }
    store_elem(oh, d, acc * inv);
  }
}

}  // namespace

int attention_max_context() {
  int device = 0, optin = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  return (optin - (kMaxHeadDim + 32 + 4) * 4) / 4;
}

static std::size_t attention_smem_bytes(int max_ctx) {
  // +4 floats of slack: the compiler's unrolled read of the scores may load up to 3 floats past
  // the last one it uses (compute-sanitizer flagged it; the values are never used).
  return (static_cast<std::size_t>(max_ctx) + 4 + kMaxHeadDim + 32) * sizeof(float);
}

static int g_attention_smem_limit = 48 * 1024;  // the kernels' current dynamic shared-memory limit

template <typename KV, typename Out>
static bool raise_smem(int smem) {
  return cudaFuncSetAttribute(attention_kernel<KV, Out>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) ==
         cudaSuccess;
}

void prepare_attention(int max_ctx) {
  const int smem = static_cast<int>(attention_smem_bytes(max_ctx));
  if (smem <= g_attention_smem_limit) return;
  if (raise_smem<float, float>(smem) && raise_smem<float, __nv_bfloat16>(smem) && raise_smem<float, __half>(smem) &&
      raise_smem<__nv_bfloat16, float>(smem) && raise_smem<__nv_bfloat16, __nv_bfloat16>(smem) &&
      raise_smem<__nv_bfloat16, __half>(smem))
    g_attention_smem_limit = smem;
}

template <typename KV>
static void launch_kv(const AttentionArgs& a, std::size_t smem, cudaStream_t stream) {
  const dim3 grid(a.n, a.heads);
  switch (a.out_type) {
    case ElemType::f32: launch_pdl(attention_kernel<KV, float>, grid, kThreads, smem, stream, a); break;
    case ElemType::bf16: launch_pdl(attention_kernel<KV, __nv_bfloat16>, grid, kThreads, smem, stream, a); break;
    case ElemType::f16: launch_pdl(attention_kernel<KV, __half>, grid, kThreads, smem, stream, a); break;
  }
}

std::size_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return 0;
  const std::size_t smem = attention_smem_bytes(a.max_ctx);
  prepare_attention(a.max_ctx);
  if (a.kv_type == ElemType::bf16)
    launch_kv<__nv_bfloat16>(a, smem, stream);
  else
    launch_kv<float>(a, smem, stream);
  // Each (token, head) reads its context's K and V rows once (no reuse across the 7 query heads yet).
  std::size_t ctx_total = 0;  // not known on the host without the lengths; report q/out plus an estimate
  ctx_total = static_cast<std::size_t>(a.n) * a.heads * a.max_ctx * a.head_dim * 2 * elem_size(a.kv_type);
  return ctx_total + static_cast<std::size_t>(a.n) * a.heads * a.head_dim * 8;
}

}  // namespace cosmos::kernels
