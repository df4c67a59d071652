// A model folder's weights: one model.safetensors or shards listed by model.safetensors.index.json,
// in either tensor-name layout (DESIGN.md §3). Tensors are reached by canonical (original-layout)
// names. Error codes "checkpoint.*" (plus the "safetensors.*" codes of each shard):
//   checkpoint.no_weights         neither model.safetensors nor an index in the folder
//   checkpoint.index_json         index is not valid JSON or lacks "weight_map"
//   checkpoint.missing_shard      a shard named by the index does not exist
//   checkpoint.missing_in_shard   a tensor named in the index is not in its shard
//   checkpoint.duplicate          the same canonical tensor appears twice
//   checkpoint.missing_tensor     a tensor the model needs is absent
//   checkpoint.shape              a tensor has the wrong shape for the config
//   checkpoint.dtype              a tensor is not a floating-point type the engine reads
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cosmos/error.h"
#include "cosmos/model_config.h"
#include "cosmos/safetensors.h"

namespace cosmos {

enum class TensorLayout { original, language_model };
const char* to_string(TensorLayout layout);

// "model.language_model.X" -> "model.X", "model.visual.X" -> "visual.X", others unchanged.
std::string canonical_tensor_name(std::string_view stored_name);

struct CheckpointTensor {
  std::string name;         // canonical
  std::size_t shard = 0;    // index into Checkpoint::shards()
  TensorInfo info;          // info.name is the stored name
};

class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::filesystem::path& model_dir);

  TensorLayout layout() const { return layout_; }
  const std::vector<CheckpointTensor>& tensors() const { return tensors_; }
  const CheckpointTensor* find(std::string_view canonical_name) const;
  std::span<const std::byte> data(const CheckpointTensor& t) const;
  std::size_t shard_count() const { return shards_.size(); }
  const SafetensorsFile& shard(std::size_t i) const { return *shards_[i]; }
  std::uint64_t total_bytes() const;  // sum of tensor bytes

  // Every text-model tensor the config needs is present with the right shape and a float dtype.
  Status validate_text_model(const ModelConfig& config) const;

 private:
  std::filesystem::path dir_;
  TensorLayout layout_ = TensorLayout::original;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<CheckpointTensor> tensors_;  // sorted by canonical name
};

}  // namespace cosmos
