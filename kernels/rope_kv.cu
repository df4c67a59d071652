#include "kernels/rope_kv.cuh"

namespace cosmos::kernels {
namespace {

__global__ void rope_kv_kernel(RopeKvArgs a) {
  const int t = blockIdx.x;
  const int half = a.head_dim / 2;
  const int qd = a.heads * a.head_dim, kvd = a.kv_heads * a.head_dim;
  const float* row = a.qkv + static_cast<std::size_t>(t) * (qd + 2 * kvd);
  const std::int32_t* pos = a.positions + 3 * t;
  float* qo = a.q + static_cast<std::size_t>(t) * qd;
  float* ko = a.k_cache + static_cast<std::size_t>(a.slots[t]) * kvd;
  float* vo = a.v_cache + static_cast<std::size_t>(a.slots[t]) * kvd;
  // Pairs (head, i) for q heads then k heads: x[i], x[i + half] rotate together.
  const int pairs = (a.heads + a.kv_heads) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int head = p / half, i = p % half;
    const int which = i < a.section0 ? 0 : (i < a.section0 + a.section1 ? 1 : 2);
    const float f = static_cast<float>(pos[which]) * a.inv_freq[i];
    const float c = cosf(f), s = sinf(f);
    const bool is_q = head < a.heads;
    const float* src = is_q ? row + head * a.head_dim : row + qd + (head - a.heads) * a.head_dim;
    float* dst = is_q ? qo + head * a.head_dim : ko + (head - a.heads) * a.head_dim;
    const float x1 = src[i], x2 = src[i + half];
    dst[i] = x1 * c - x2 * s;
    dst[i + half] = x2 * c + x1 * s;
  }
  for (int i = threadIdx.x; i < kvd; i += blockDim.x) vo[i] = row[qd + kvd + i];
}

}  // namespace

std::size_t launch_rope_kv(const RopeKvArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return 0;
  rope_kv_kernel<<<a.n, 128, 0, stream>>>(a);
  const std::size_t width = static_cast<std::size_t>(a.heads + 2 * a.kv_heads) * a.head_dim;
  return static_cast<std::size_t>(a.n) * (width * 8 + 16);
}

}  // namespace cosmos::kernels
