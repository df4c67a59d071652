#include "kernels/rope_kv.cuh"

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

template <typename QT, typename KVT>
__global__ void rope_kv_kernel(RopeKvArgs a) {
  pdl_wait();
  pdl_launch_dependents();
  const int t = blockIdx.x;
  const int half = a.head_dim / 2;
  const int qd = a.heads * a.head_dim, kvd = a.kv_heads * a.head_dim;
  const float* row = a.qkv + static_cast<std::size_t>(t) * (qd + 2 * kvd);
  const float* bias = a.bias;
  const std::int32_t* pos = a.positions + 3 * t;
  QT* qo = static_cast<QT*>(a.q) + static_cast<std::size_t>(t) * qd;
  KVT* ko = static_cast<KVT*>(a.k_cache) + static_cast<std::size_t>(a.slots[t]) * kvd;
  KVT* vo = static_cast<KVT*>(a.v_cache) + static_cast<std::size_t>(a.slots[t]) * kvd;
  // Pairs (head, i) for q heads then k heads: x[i], x[i + half] rotate together.
  const int pairs = (a.heads + a.kv_heads) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int head = p / half, i = p % half;
    const int which = i < a.section0 ? 0 : (i < a.section0 + a.section1 ? 1 : 2);
    const float f = static_cast<float>(pos[which]) * a.inv_freq[i];
    const float c = cosf(f), s = sinf(f);
    const bool is_q = head < a.heads;
    const int off = is_q ? head * a.head_dim : qd + (head - a.heads) * a.head_dim;
    float x1 = row[off + i], x2 = row[off + i + half];
    if (bias) {
      x1 += bias[off + i];
      x2 += bias[off + i + half];
    }
    const float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
    if (is_q) {
      store_elem(qo, head * a.head_dim + i, y1);
      store_elem(qo, head * a.head_dim + i + half, y2);
    } else {
      store_elem(ko, (head - a.heads) * a.head_dim + i, y1);
      store_elem(ko, (head - a.heads) * a.head_dim + i + half, y2);
    }
  }
  for (int i = threadIdx.x; i < kvd; i += blockDim.x)
    store_elem(vo, i, row[qd + kvd + i] + (bias ? bias[qd + kvd + i] : 0.0f));
}

template <typename QT>
void launch_q(const RopeKvArgs& a, cudaStream_t stream) {
  if (a.kv_type == ElemType::bf16)
    launch_pdl(rope_kv_kernel<QT, __nv_bfloat16>, a.n, 128, 0, stream, a);
  else
    launch_pdl(rope_kv_kernel<QT, float>, a.n, 128, 0, stream, a);
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
