// One CUDA block per cache block: its block_size x kv_heads rows of K and of V, 16 values per
// thread item (one 16-byte int8 load, two 16-byte bf16 stores), the row's scale read per item.
#include "kernels/kv_dequant.cuh"

#include "kernels/kv_quant_row.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) kv_dequant_kernel(const KvDequantArgs a) {
  pdl_wait();
  pdl_launch_dependents();
  const int D = a.head_dim;
  const std::size_t first = static_cast<std::size_t>(a.blocks[blockIdx.x]) * a.block_size;  // first slot
  const int per_row = D / 16;                        // items per (slot, head) row
  const int items = a.block_size * a.kv_heads * per_row;  // per tensor
  for (int w = threadIdx.x; w < 2 * items; w += kThreads) {
    const bool v = w >= items;
    const int i = v ? w - items : w;
    const int row = i / per_row, c = i - row * per_row;  // row = slot_in_block * kv_heads + head
    const std::size_t r = first * a.kv_heads + row;      // the row's index among [slots, kv_heads]
    const std::size_t e = r * D + static_cast<std::size_t>(c) * 16;  // first element
    const uint4 q = *reinterpret_cast<const uint4*>((v ? a.v8 : a.k8) + e);
    const float s = (v ? a.v_scale : a.k_scale)[r];
    uint4 lo, hi;
    expand_kv_i8(q, s, lo, hi);
    uint4* out = reinterpret_cast<uint4*>((v ? a.v16 : a.k16) + e);
    out[0] = lo;
    out[1] = hi;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

std::size_t launch_kv_dequant(const KvDequantArgs& a, cudaStream_t stream) {
  if (a.n_blocks <= 0) return 0;
  if (a.head_dim <= 0 || a.head_dim % 16 != 0 || !aligned16(a.k8) || !aligned16(a.v8) || !aligned16(a.k16) ||
      !aligned16(a.v16))
    return 0;
  launch_pdl(kv_dequant_kernel, dim3(static_cast<unsigned>(a.n_blocks)), kThreads, 0, stream, a);
  return static_cast<std::size_t>(a.n_blocks) * a.block_size * 2 * a.kv_heads * (a.head_dim * 3 + sizeof(float));
}

}  // namespace cosmos::kernels
