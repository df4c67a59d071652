// config.json of a Qwen2.5-VL model (Cosmos-Reason1-7B) in its three forms (DESIGN.md §3):
// top-level text fields (original), a nested "text_config" (newer transformers), and
// "rope_parameters" in place of "rope_scaling"/"rope_theta". Validated: a missing or nonsensical
// field is an Error (code "config.*") naming the field.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cosmos/error.h"

namespace cosmos {

struct VisionConfig {
  int depth = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_heads = 0;
  int in_channels = 3;
  int out_hidden_size = 0;
  int patch_size = 14;
  int spatial_merge_size = 2;
  int temporal_patch_size = 2;
  int window_size = 112;
  int tokens_per_second = 2;
  std::vector<int> fullatt_block_indexes;
};

enum class ConfigForm { top_level, text_config };

struct ModelConfig {
  std::string architecture;   // "Qwen2_5_VLForConditionalGeneration"
  std::string model_type;     // "qwen2_5_vl"
  int hidden_size = 0;        // 3584
  int intermediate_size = 0;  // 18944
  int num_layers = 0;         // 28
  int num_heads = 0;          // 28
  int num_kv_heads = 0;       // 4
  int head_dim = 0;           // 128 (hidden_size / num_heads unless given)
  int vocab_size = 0;         // 152064 rows
  int max_position_embeddings = 0;
  double rms_norm_eps = 0;    // 1e-6
  double rope_theta = 0;      // 1e6
  std::vector<int> mrope_section;  // [16, 24, 24], sums to head_dim / 2
  bool tie_word_embeddings = false;
  std::string torch_dtype;    // "bfloat16"
  std::vector<int> eos_token_ids;   // from config (generation_config may add more)
  int image_token_id = 151655;
  int video_token_id = 151656;
  int vision_start_token_id = 151652;
  int vision_end_token_id = 151653;
  std::optional<VisionConfig> vision;

  ConfigForm form = ConfigForm::top_level;
  bool rope_parameters_form = false;  // "rope_parameters" instead of "rope_scaling"

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }

  // Original (top-level) form, as Qwen2.5-VL-7B-Instruct ships it.
  nlohmann::json to_json() const;
};

Result<ModelConfig> parse_model_config(const nlohmann::json& j, const std::string& label);
Result<ModelConfig> load_model_config(const std::filesystem::path& config_json);

// The shapes of Cosmos-Reason1-7B (used by make-test-model and bench).
ModelConfig cosmos_reason1_7b_config();
// A tiny model with the real vocabulary: hidden 64, 2 layers, 4 heads, 2 KV heads.
ModelConfig tiny_test_config();

}  // namespace cosmos
