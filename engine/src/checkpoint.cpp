// A model folder's safetensors weights (DESIGN.md §3): one model.safetensors, or shards listed in
// model.safetensors.index.json. Tensors are addressed by canonical (original-layout) names.
//
// With an index, the index is authoritative: the checkpoint holds exactly the tensors of its
// "weight_map", each read from the shard the index names; other tensors inside the shards are
// ignored. Each distinct shard is opened (mapped) once.
#include "cosmos/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "cosmos/model_tensors.h"

namespace cosmos {
namespace {

constexpr std::string_view kLanguageModelPrefix = "model.language_model.";
constexpr std::string_view kVisualPrefix = "model.visual.";
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// The name under which `canonical` is stored in a checkpoint of `layout`.
std::string stored_name(TensorLayout layout, std::string_view canonical) {
  if (layout == TensorLayout::language_model) {
    if (canonical.starts_with("model.")) return std::string(kLanguageModelPrefix) + std::string(canonical.substr(6));
    if (canonical.starts_with("visual.")) return "model." + std::string(canonical);
  }
  return std::string(canonical);
}

// A shard file name from the index must be a plain file name inside the model folder.
bool safe_shard_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name.find('\\') == std::string::npos &&
         name.find("..") == std::string::npos && name.find('\0') == std::string::npos;
}

// Describes weight files this engine cannot read, for the "no weights" message.
std::string other_weight_files(const std::filesystem::path& dir) {
  std::vector<std::string> pytorch;
  std::vector<std::string> shards;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string ext = it->path().extension().string();
    if (ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".ckpt") pytorch.push_back(name);
    if (ext == ".safetensors") shards.push_back(name);
  }
  std::sort(pytorch.begin(), pytorch.end());
  std::sort(shards.begin(), shards.end());
  std::string s;
  if (!pytorch.empty()) {
    s += "; found PyTorch weights (" + pytorch.front() + (pytorch.size() > 1 ? ", ..." : "") +
         ") but only safetensors checkpoints are supported";
  }
  if (!shards.empty()) {
    s += "; found " + shards.front() + (shards.size() > 1 ? " and others" : "") + " but no " + kIndexName +
         " listing the shards";
  }
  return s;
}

Error index_error(const std::filesystem::path& index, const std::string& message) {
  return make_error(ErrorCategory::bad_input, "checkpoint.index_json", index.string() + ": " + message);
}

// Reads weight_map {stored tensor name -> shard file name} from the index.
Result<std::map<std::string, std::string>> read_weight_map(const std::filesystem::path& index) {
  std::ifstream in(index, std::ios::binary);
  if (!in) {
    return make_error(ErrorCategory::io, "file.open", "cannot read " + index.string());
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(ErrorCategory::io, "file.open", "cannot read " + index.string());
  const std::string text = ss.str();

  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return index_error(index, "not valid JSON");
  if (!j.is_object()) return index_error(index, "not a JSON object");
  const auto wm = j.find("weight_map");
  if (wm == j.end()) return index_error(index, "no \"weight_map\"");
  if (!wm->is_object()) return index_error(index, "\"weight_map\" is not an object");
  if (wm->empty()) return index_error(index, "\"weight_map\" is empty");

  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) {
      return index_error(index, "\"weight_map\" entry for '" + tensor + "' is not a file name string");
    }
    const auto& file = shard.get_ref<const std::string&>();
    if (!safe_shard_name(file)) {
      return index_error(index, "shard file name \"" + file + "\" for tensor '" + tensor +
                                    "' is not a plain file name in the model folder");
    }
    out.emplace(tensor, file);
  }
  return out;
}

}  // namespace

const char* to_string(TensorLayout layout) {
  switch (layout) {
    case TensorLayout::original: return "original";
    case TensorLayout::language_model: return "language_model";
  }
  return "?";
}

std::string canonical_tensor_name(std::string_view stored) {
  if (stored.starts_with(kLanguageModelPrefix)) {
    return "model." + std::string(stored.substr(kLanguageModelPrefix.size()));
  }
  if (stored.starts_with(kVisualPrefix)) return "visual." + std::string(stored.substr(kVisualPrefix.size()));
  return std::string(stored);
}

Result<Checkpoint> Checkpoint::open(const std::filesystem::path& model_dir) {
  Checkpoint ck;
  ck.dir_ = model_dir;
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    const char* what = std::filesystem::exists(model_dir, ec) ? " is not a folder" : " does not exist";
    return make_error(ErrorCategory::bad_input, "checkpoint.no_weights",
                      model_dir.string() + what + " (expected a model folder with " + kSingleName + " or " +
                          kIndexName + ")");
  }

  // (shard index, stored name) for every tensor of the checkpoint.
  std::vector<std::pair<std::size_t, const TensorInfo*>> entries;
  const auto index_path = model_dir / kIndexName;
  const auto single_path = model_dir / kSingleName;
  if (std::filesystem::exists(index_path, ec)) {
    auto weight_map = read_weight_map(index_path);
    if (!weight_map) return weight_map.error();

    std::map<std::string, std::size_t> shard_ids;  // file name -> index into shards_
    for (const auto& [tensor, file] : weight_map.value()) {
      if (shard_ids.count(file)) continue;
      auto shard = SafetensorsFile::open(model_dir / file);
      if (!shard) {
        if (shard.error().code == "file.missing") {
          return make_error(ErrorCategory::bad_input, "checkpoint.missing_shard",
                            "shard " + file + " named by " + index_path.string() + " (for tensor '" + tensor +
                                "' and maybe others) does not exist in " + model_dir.string());
        }
        return shard.error();
      }
      shard_ids.emplace(file, ck.shards_.size());
      ck.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(shard.value())));
    }
    for (const auto& [tensor, file] : weight_map.value()) {
      const std::size_t id = shard_ids.at(file);
      const TensorInfo* info = ck.shards_[id]->find(tensor);
      if (info == nullptr) {
        return make_error(ErrorCategory::bad_input, "checkpoint.missing_in_shard",
                          "tensor '" + tensor + "' is listed in " + index_path.string() + " as stored in " + file +
                              ", but " + (model_dir / file).string() + " does not contain it");
      }
      entries.emplace_back(id, info);
    }
  } else if (std::filesystem::exists(single_path, ec)) {
    auto shard = SafetensorsFile::open(single_path);
    if (!shard) return shard.error();
    ck.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(shard.value())));
    for (const auto& t : ck.shards_[0]->tensors()) entries.emplace_back(0, &t);
  } else {
    return make_error(ErrorCategory::bad_input, "checkpoint.no_weights",
                      "no " + std::string(kSingleName) + " or " + kIndexName + " in " + model_dir.string() +
                          other_weight_files(model_dir));
  }

  for (const auto& [id, info] : entries) {
    if (info->name.starts_with(kLanguageModelPrefix)) {
      ck.layout_ = TensorLayout::language_model;
      break;
    }
  }

  ck.tensors_.reserve(entries.size());
  for (const auto& [id, info] : entries) {
    CheckpointTensor t;
    t.name = canonical_tensor_name(info->name);
    t.shard = id;
    t.info = *info;
    ck.tensors_.push_back(std::move(t));
  }
  std::sort(ck.tensors_.begin(), ck.tensors_.end(),
            [](const CheckpointTensor& a, const CheckpointTensor& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < ck.tensors_.size(); ++i) {
    const auto& a = ck.tensors_[i - 1];
    const auto& b = ck.tensors_[i];
    if (a.name == b.name) {
      return make_error(ErrorCategory::bad_input, "checkpoint.duplicate",
                        model_dir.string() + ": tensors '" + a.info.name + "' (" +
                            ck.shards_[a.shard]->path().filename().string() + ") and '" + b.info.name + "' (" +
                            ck.shards_[b.shard]->path().filename().string() + ") are both '" + a.name + "'");
    }
  }
  return ck;
}

const CheckpointTensor* Checkpoint::find(std::string_view canonical_name) const {
  const auto it = std::lower_bound(tensors_.begin(), tensors_.end(), canonical_name,
                                   [](const CheckpointTensor& t, std::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != canonical_name) return nullptr;
  return &*it;
}

std::span<const std::byte> Checkpoint::data(const CheckpointTensor& t) const {
  if (t.shard >= shards_.size()) return {};
  return shards_[t.shard]->data(t.info);
}

std::uint64_t Checkpoint::total_bytes() const {
  std::uint64_t sum = 0;
  for (const auto& t : tensors_) sum += t.info.nbytes;
  return sum;
}

Status Checkpoint::validate_text_model(const ModelConfig& config) const {
  const auto expected = text_model_tensors(config);
  // Report the first missing tensor, and how many are missing in all (a wrong layout or a
  // vision-only file would otherwise read as a single missing tensor).
  const ExpectedTensor* first_missing = nullptr;
  std::size_t missing = 0;
  for (const auto& e : expected) {
    if (find(e.name) == nullptr) {
      if (!first_missing) first_missing = &e;
      ++missing;
    }
  }
  if (first_missing) {
    std::string msg = dir_.string() + ": the checkpoint lacks tensor '" + first_missing->name + "' (stored as '" +
                      stored_name(layout_, first_missing->name) + "' in the " + to_string(layout_) + " layout)";
    if (missing > 1) msg += " and " + std::to_string(missing - 1) + " more of the " + std::to_string(expected.size()) +
                            " text-model tensors";
    return make_error(ErrorCategory::bad_input, "checkpoint.missing_tensor", msg);
  }
  for (const auto& e : expected) {
    const CheckpointTensor* t = find(e.name);
    if (t->info.shape != e.shape) {
      return make_error(ErrorCategory::bad_input, "checkpoint.shape",
                        dir_.string() + ": tensor '" + e.name + "' (stored as '" + t->info.name + "') has shape " +
                            shape_text(t->info.shape) + " but config.json implies " + shape_text(e.shape));
    }
    const DType d = t->info.dtype;
    if (d != DType::bf16 && d != DType::f16 && d != DType::f32) {
      return make_error(ErrorCategory::unsupported_model, "checkpoint.dtype",
                        dir_.string() + ": tensor '" + t->info.name + "' is " + std::string(dtype_name(d)) +
                            "; the engine reads BF16, F16 or F32 weights");
    }
  }
  return ok_status();
}

}  // namespace cosmos
