#include "kernels/rope_kv.cuh"

#include "kernels/pdl.cuh"

#include <algorithm>

namespace cosmos::kernels {
namespace {

// Block (token t, head): q heads first, then k heads; thread i rotates the pair (i, i + half). The
// blocks of k heads also copy that KV head's v row into the cache.
template <typename QT, typename KVT>
__global__ void rope_kv_kernel(RopeKvArgs a) {
  pdl_wait();
  pdl_launch_dependents();
  const int t = blockIdx.x, head = blockIdx.y;
  const int half = a.head_dim / 2;
  const int qd = a.heads * a.head_dim, kvd = a.kv_heads * a.head_dim;
  const float* row = a.qkv + static_cast<std::size_t>(t) * (qd + 2 * kvd);
  const float* bias = a.bias;
  const std::int32_t* pos = a.positions + 3 * t;
  const bool is_q = head < a.heads;
  const int off = is_q ? head * a.head_dim : qd + (head - a.heads) * a.head_dim;
  KVT* ko = static_cast<KVT*>(a.k_cache) + static_cast<std::size_t>(a.slots[t]) * kvd;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const int which = i < a.section0 ? 0 : (i < a.section0 + a.section1 ? 1 : 2);
    const float f = static_cast<float>(pos[which]) * a.inv_freq[i];
    float s, c;
    sincosf(f, &s, &c);
    float x1 = row[off + i], x2 = row[off + i + half];
    if (bias) {
      x1 += bias[off + i];
      x2 += bias[off + i + half];
    }
    const float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
    if (is_q) {
      QT* qo = static_cast<QT*>(a.q) + static_cast<std::size_t>(t) * qd + head * a.head_dim;
      store_elem(qo, i, y1);
      store_elem(qo, i + half, y2);
    } else {
      KVT* kh = ko + (head - a.heads) * a.head_dim;
      store_elem(kh, i, y1);
      store_elem(kh, i + half, y2);
    }
  }
  if (!is_q) {
    const int kvh = head - a.heads;
    KVT* vo = static_cast<KVT*>(a.v_cache) + static_cast<std::size_t>(a.slots[t]) * kvd + kvh * a.head_dim;
    const int vo_off = qd + kvd + kvh * a.head_dim;
    for (int i = threadIdx.x; i < a.head_dim; i += blockDim.x)
      store_elem(vo, i, row[vo_off + i] + (bias ? bias[vo_off + i] : 0.0f));
  }
}

template <typename QT>
void launch_q(const RopeKvArgs& a, cudaStream_t stream) {
  const unsigned threads = static_cast<unsigned>(std::min(std::max(a.head_dim / 2, 32), 256));
  if (a.kv_type == ElemType::bf16)
    launch_pdl(rope_kv_kernel<QT, __nv_bfloat16>, dim3(a.n, a.heads + a.kv_heads), threads, 0, stream, a);
  else
    launch_pdl(rope_kv_kernel<QT, float>, dim3(a.n, a.heads + a.kv_heads), threads, 0, stream, a);
}

}  // namespace

std::size_t launch_rope_kv(const RopeKvArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return 0;
  switch (a.q_type) {
    case ElemType::f32: launch_q<float>(a, stream); break;
    case ElemType::bf16: launch_q<__nv_bfloat16>(a, stream); break;
    case ElemType::f16: launch_q<__half>(a, stream); break;
  }
  const std::size_t width = static_cast<std::size_t>(a.heads + 2 * a.kv_heads) * a.head_dim;
  const std::size_t out = static_cast<std::size_t>(a.heads) * a.head_dim * elem_size(a.q_type) +
                          2 * static_cast<std::size_t>(a.kv_heads) * a.head_dim * elem_size(a.kv_type);
  return static_cast<std::size_t>(a.n) * (width * 4 + out + 16);
}

}  // namespace cosmos::kernels
