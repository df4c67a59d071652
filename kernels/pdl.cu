#include "kernels/pdl.cuh"

#include <atomic>

namespace cosmos::kernels {
namespace {
std::atomic<bool> g_pdl{false};
}
void set_pdl_enabled(bool on) { g_pdl.store(on); }
bool pdl_enabled() { return g_pdl.load(); }
}  // namespace cosmos::kernels
