#include "cosmos/kv_format.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cosmos {

std::string_view to_string(KvFormat f) {
  switch (f) {
    case KvFormat::full: return "full";
    case KvFormat::int8: return "int8";
  }
  return "?";
}

std::optional<KvFormat> kv_format_from_string(std::string_view name) {
  if (name == "full") return KvFormat::full;
  if (name == "int8") return KvFormat::int8;
  return std::nullopt;
}

std::uint64_t kv_bytes_per_token(const ModelConfig& c, KvFormat format, int full_bytes) {
  const std::uint64_t rows = 2ull * static_cast<std::uint64_t>(c.num_layers) * c.num_kv_heads;  // K and V rows
  if (format == KvFormat::int8) return rows * (static_cast<std::uint64_t>(c.head_dim) + sizeof(float));
  return rows * static_cast<std::uint64_t>(c.head_dim) * static_cast<std::uint64_t>(full_bytes);
}

float quantize_kv_row(const float* x, int n, std::int8_t* q) {
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    finite = finite && std::isfinite(x[i]);
  }
  if (!finite || amax == 0.0f) {
    std::fill_n(q, n, std::int8_t{0});
    return finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  const float scale = amax / 127.0f;
  const float inv = 127.0f / amax;
  for (int i = 0; i < n; ++i) {
    const float r = std::nearbyint(x[i] * inv);  // |r| <= 127 up to the rounding of inv: clamp
    q[i] = static_cast<std::int8_t>(std::clamp(r, -127.0f, 127.0f));
  }
  return scale;
}

void dequantize_kv_row(const std::int8_t* q, int n, float scale, float* x) {
  for (int i = 0; i < n; ++i) x[i] = scale * static_cast<float>(q[i]);
}

}  // namespace cosmos
