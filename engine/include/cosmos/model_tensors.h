// The tensors a Qwen2.5-VL checkpoint must hold, with their shapes, under canonical names
// (the original layout: "model.layers.N...", "lm_head.weight", "visual...").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cosmos/model_config.h"

namespace cosmos {

enum class TensorRole { embedding, norm, attn_weight, attn_bias, mlp_weight, lm_head, vision };

struct ExpectedTensor {
  std::string name;                  // canonical name
  std::vector<std::int64_t> shape;   // as stored (PyTorch [out, in] for linear weights)
  TensorRole role = TensorRole::attn_weight;
  std::uint64_t numel() const;
};

// Text decoder tensors: embed_tokens, per layer norms + q/k/v (weight, bias) + o + gate/up/down,
// final norm, lm_head (omitted when tied).
std::vector<ExpectedTensor> text_model_tensors(const ModelConfig& config);
// Vision tower tensors (empty without a vision config).
std::vector<ExpectedTensor> vision_tensors(const ModelConfig& config);

}  // namespace cosmos
