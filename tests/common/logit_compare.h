// Comparing two models' next-token logits position by position (quantized precisions against bf16):
// the largest logit error relative to the position's largest |reference logit|, the KL divergence
// KL(softmax(ref) || softmax(other)) in double, and how often the top-1 tokens agree; and the relative
// L2 error of one row against another (backends or plans that should agree to accumulation order).
#pragma once

#include <algorithm>
#include <cmath>
#include <span>

namespace cosmos::testing {

// ||got - want|| / ||want|| in double.
inline double rel_l2(std::span<const float> got, std::span<const float> want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct LogitStats {
  double max_rel_err = 0.0;
  double kl_sum = 0.0, kl_max = 0.0;
  int agree = 0, positions = 0;
  double kl_mean() const { return positions ? kl_sum / positions : 0.0; }
  double top1() const { return positions ? static_cast<double>(agree) / positions : 0.0; }
  // Adds one position: ref and other are the same vocabulary's logits.
  void add(std::span<const float> ref, std::span<const float> other) {
    double ma = 0.0, err = 0.0;
    for (std::size_t v = 0; v < ref.size(); ++v) {
      ma = std::max(ma, std::fabs(static_cast<double>(ref[v])));
      err = std::max(err, std::fabs(static_cast<double>(ref[v]) - other[v]));
    }
    max_rel_err = std::max(max_rel_err, ma > 0.0 ? err / ma : err);
    const double xa = *std::max_element(ref.begin(), ref.end()), xb = *std::max_element(other.begin(), other.end());
    double za = 0.0, zb = 0.0;
    for (std::size_t v = 0; v < ref.size(); ++v) {
      za += std::exp(ref[v] - xa);
      zb += std::exp(other[v] - xb);
    }
    const double lza = std::log(za), lzb = std::log(zb);
    double kl = 0.0;
    for (std::size_t v = 0; v < ref.size(); ++v) {
      const double la = ref[v] - xa - lza, lb = other[v] - xb - lzb;
      kl += std::exp(la) * (la - lb);
    }
    kl_sum += kl;
    kl_max = std::max(kl_max, kl);
    agree += std::max_element(ref.begin(), ref.end()) - ref.begin() ==
             std::max_element(other.begin(), other.end()) - other.begin();
    ++positions;
  }
};

}  // namespace cosmos::testing
