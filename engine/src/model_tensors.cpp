#include "cosmos/model_tensors.h"

#include <string>

namespace cosmos {

std::uint64_t ExpectedTensor::numel() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

std::vector<ExpectedTensor> text_model_tensors(const ModelConfig& c) {
  const std::int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), ff = c.intermediate_size;
  std::vector<ExpectedTensor> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, h}, TensorRole::embedding});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back({p + "input_layernorm.weight", {h}, TensorRole::norm});
    out.push_back({p + "self_attn.q_proj.weight", {q, h}, TensorRole::attn_weight});
    out.push_back({p + "self_attn.q_proj.bias", {q}, TensorRole::attn_bias});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}, TensorRole::attn_weight});
    out.push_back({p + "self_attn.k_proj.bias", {kv}, TensorRole::attn_bias});
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}, TensorRole::attn_weight});
    out.push_back({p + "self_attn.v_proj.bias", {kv}, TensorRole::attn_bias});
    out.push_back({p + "self_attn.o_proj.weight", {h, q}, TensorRole::attn_weight});
    out.push_back({p + "post_attention_layernorm.weight", {h}, TensorRole::norm});
    out.push_back({p + "mlp.gate_proj.weight", {ff, h}, TensorRole::mlp_weight});
    out.push_back({p + "mlp.up_proj.weight", {ff, h}, TensorRole::mlp_weight});
    out.push_back({p + "mlp.down_proj.weight", {h, ff}, TensorRole::mlp_weight});
  }
  out.push_back({"model.norm.weight", {h}, TensorRole::norm});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}, TensorRole::lm_head});
  return out;
}

std::vector<ExpectedTensor> vision_tensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  if (!c.vision) return out;
  const VisionConfig& v = *c.vision;
  const std::int64_t vh = v.hidden_size, vf = v.intermediate_size;
  const auto vr = TensorRole::vision;
  // Conv3d patch embedding without bias: [hidden, channels, temporal, patch, patch].
  out.push_back({"visual.patch_embed.proj.weight",
                 {vh, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size}, vr});
  for (int b = 0; b < v.depth; ++b) {
    const std::string p = "visual.blocks." + std::to_string(b) + ".";
    out.push_back({p + "norm1.weight", {vh}, vr});
    out.push_back({p + "norm2.weight", {vh}, vr});
    out.push_back({p + "attn.qkv.weight", {3 * vh, vh}, vr});
    out.push_back({p + "attn.qkv.bias", {3 * vh}, vr});
    out.push_back({p + "attn.proj.weight", {vh, vh}, vr});
    out.push_back({p + "attn.proj.bias", {vh}, vr});
    out.push_back({p + "mlp.gate_proj.weight", {vf, vh}, vr});
    out.push_back({p + "mlp.gate_proj.bias", {vf}, vr});
    out.push_back({p + "mlp.up_proj.weight", {vf, vh}, vr});
    out.push_back({p + "mlp.up_proj.bias", {vf}, vr});
    out.push_back({p + "mlp.down_proj.weight", {vh, vf}, vr});
    out.push_back({p + "mlp.down_proj.bias", {vh}, vr});
  }
  // Patch merger: RMSNorm, then MLP over spatial_merge_size^2 concatenated patches.
  const std::int64_t merged = vh * v.spatial_merge_size * v.spatial_merge_size;
  out.push_back({"visual.merger.ln_q.weight", {vh}, vr});
  out.push_back({"visual.merger.mlp.0.weight", {merged, merged}, vr});
  out.push_back({"visual.merger.mlp.0.bias", {merged}, vr});
  out.push_back({"visual.merger.mlp.2.weight", {v.out_hidden_size, merged}, vr});
  out.push_back({"visual.merger.mlp.2.bias", {v.out_hidden_size}, vr});
  return out;
}

}  // namespace cosmos
