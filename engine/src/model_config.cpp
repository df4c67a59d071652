#include "cosmos/model_config.h"

#include <fstream>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

namespace cosmos {
namespace {

using json = nlohmann::json;

// Looks a field up in the text section first (text_config in the newer form), then at the top level.
class FieldReader {
 public:
  FieldReader(const json& top, const json* text, std::string label)
      : top_(top), text_(text), label_(std::move(label)) {}

  const json* find(const std::string& key) const {
    if (text_) {
      auto it = text_->find(key);
      if (it != text_->end() && !it->is_null()) return &*it;
    }
    auto it = top_.find(key);
    if (it != top_.end() && !it->is_null()) return &*it;
    return nullptr;
  }

  std::string where(const std::string& key) const {
    return (text_ && text_->contains(key)) ? "text_config." + key : key;
  }

  Error missing(const std::string& key) const {
    return make_error(ErrorCategory::bad_input, "config.missing_field",
                      label_ + ": required field \"" + key + "\" is missing");
  }
  Error invalid(const std::string& key, const std::string& why) const {
    return make_error(ErrorCategory::bad_input, "config.invalid_field",
                      label_ + ": field \"" + where(key) + "\" " + why);
  }

  // Positive integer within [lo, hi].
  Result<int> integer(const std::string& key, long long lo, long long hi) const {
    const json* v = find(key);
    if (!v) return missing(key);
    if (!v->is_number_integer() && !v->is_number_unsigned())
      return invalid(key, "must be an integer, got " + v->dump());
    const auto x = v->get<long long>();
    if (x < lo || x > hi)
      return invalid(key, "is " + std::to_string(x) + ", expected " + std::to_string(lo) + ".." +
                              std::to_string(hi));
    return static_cast<int>(x);
  }

  Result<double> number(const json* v, const std::string& key, double lo_exclusive, double hi) const {
    if (!v) return missing(key);
    if (!v->is_number()) return invalid(key, "must be a number, got " + v->dump());
    const double x = v->get<double>();
    if (!(x > lo_exclusive && x <= hi)) {
      std::ostringstream os;
      os << "is " << x << ", expected a value in (" << lo_exclusive << ", " << hi << "]";
      return invalid(key, os.str());
    }
    return x;
  }

  const std::string& label() const { return label_; }

 private:
  const json& top_;
  const json* text_;
  std::string label_;
};

#define COSMOS_TRY_ASSIGN(lhs, expr) \
  do {                               \
    auto _r = (expr);                \
    if (!_r) return _r.error();      \
    lhs = *_r;                       \
  } while (0)

Result<std::vector<int>> int_list(const FieldReader& f, const json& v, const std::string& key) {
  if (!v.is_array()) return f.invalid(key, "must be a list of integers, got " + v.dump());
  std::vector<int> out;
  for (const auto& e : v) {
    if (!e.is_number_integer()) return f.invalid(key, "must be a list of integers, got " + v.dump());
    out.push_back(e.get<int>());
  }
  return out;
}

Result<VisionConfig> parse_vision(const json& v, const std::string& label) {
  FieldReader f(v, nullptr, label + " (vision_config)");
  VisionConfig c;
  COSMOS_TRY_ASSIGN(c.depth, f.integer("depth", 1, 1000));
  if (f.find("hidden_size")) {
    COSMOS_TRY_ASSIGN(c.hidden_size, f.integer("hidden_size", 1, 1 << 20));
  } else {
    COSMOS_TRY_ASSIGN(c.hidden_size, f.integer("embed_dim", 1, 1 << 20));
  }
  COSMOS_TRY_ASSIGN(c.intermediate_size, f.integer("intermediate_size", 1, 1 << 22));
  COSMOS_TRY_ASSIGN(c.num_heads, f.integer("num_heads", 1, 4096));
  COSMOS_TRY_ASSIGN(c.out_hidden_size, f.integer("out_hidden_size", 1, 1 << 20));
  if (f.find("in_channels")) {
    COSMOS_TRY_ASSIGN(c.in_channels, f.integer("in_channels", 1, 16));
  } else if (f.find("in_chans")) {
    COSMOS_TRY_ASSIGN(c.in_channels, f.integer("in_chans", 1, 16));
  }
  if (f.find("patch_size")) COSMOS_TRY_ASSIGN(c.patch_size, f.integer("patch_size", 1, 1024));
  if (f.find("spatial_merge_size"))
    COSMOS_TRY_ASSIGN(c.spatial_merge_size, f.integer("spatial_merge_size", 1, 64));
  if (f.find("temporal_patch_size"))
    COSMOS_TRY_ASSIGN(c.temporal_patch_size, f.integer("temporal_patch_size", 1, 64));
  if (f.find("window_size")) COSMOS_TRY_ASSIGN(c.window_size, f.integer("window_size", 1, 1 << 16));
  if (f.find("tokens_per_second"))
    COSMOS_TRY_ASSIGN(c.tokens_per_second, f.integer("tokens_per_second", 0, 1 << 16));
  if (const json* idx = f.find("fullatt_block_indexes"))
    COSMOS_TRY_ASSIGN(c.fullatt_block_indexes, int_list(f, *idx, "fullatt_block_indexes"));
  if (c.hidden_size % c.num_heads != 0)
    return f.invalid("num_heads", "must divide hidden_size " + std::to_string(c.hidden_size));
  for (int b : c.fullatt_block_indexes)
    if (b < 0 || b >= c.depth) return f.invalid("fullatt_block_indexes", "names block " +
                                                    std::to_string(b) + " outside 0.." +
                                                    std::to_string(c.depth - 1));
  return c;
}

}  // namespace

Result<ModelConfig> parse_model_config(const json& j, const std::string& label) {
  if (!j.is_object())
    return make_error(ErrorCategory::bad_input, "config.json", label + ": not a JSON object");
  const json* text = nullptr;
  ModelConfig c;
  if (auto it = j.find("text_config"); it != j.end() && it->is_object()) {
    text = &*it;
    c.form = ConfigForm::text_config;
  }
  FieldReader f(j, text, label);

  // Architecture. The top-level model_type names the whole model; text_config's names the decoder.
  const json* mt = j.contains("model_type") ? &j["model_type"] : f.find("model_type");
  if (!mt) return f.missing("model_type");
  if (!mt->is_string()) return f.invalid("model_type", "must be a string");
  c.model_type = mt->get<std::string>();
  if (c.model_type != "qwen2_5_vl" && c.model_type != "qwen2_vl" && c.model_type != "qwen2")
    return make_error(ErrorCategory::unsupported_model, "config.unsupported",
                      label + ": model_type \"" + c.model_type +
                          "\" is not supported (expected qwen2_5_vl: Cosmos-Reason1 / Qwen2.5-VL)");
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() &&
                                         (*it)[0].is_string())
    c.architecture = (*it)[0].get<std::string>();

  COSMOS_TRY_ASSIGN(c.hidden_size, f.integer("hidden_size", 1, 1 << 20));
  COSMOS_TRY_ASSIGN(c.intermediate_size, f.integer("intermediate_size", 1, 1 << 22));
  COSMOS_TRY_ASSIGN(c.num_layers, f.integer("num_hidden_layers", 1, 1000));
  COSMOS_TRY_ASSIGN(c.num_heads, f.integer("num_attention_heads", 1, 4096));
  COSMOS_TRY_ASSIGN(c.num_kv_heads, f.integer("num_key_value_heads", 1, 4096));
  COSMOS_TRY_ASSIGN(c.vocab_size, f.integer("vocab_size", 1, 10'000'000));
  if (f.find("head_dim")) {
    COSMOS_TRY_ASSIGN(c.head_dim, f.integer("head_dim", 2, 1024));
  } else {
    if (c.hidden_size % c.num_heads != 0)
      return f.invalid("num_attention_heads", "(" + std::to_string(c.num_heads) +
                                                  ") must divide hidden_size (" +
                                                  std::to_string(c.hidden_size) + ")");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) return f.invalid("head_dim", "must be even for rotary embeddings");
  if (c.num_heads % c.num_kv_heads != 0)
    return f.invalid("num_key_value_heads", "(" + std::to_string(c.num_kv_heads) +
                                                ") must divide num_attention_heads (" +
                                                std::to_string(c.num_heads) + ")");
  c.max_position_embeddings = 128000;
  if (f.find("max_position_embeddings"))
    COSMOS_TRY_ASSIGN(c.max_position_embeddings, f.integer("max_position_embeddings", 1, 1 << 30));
  if (const json* eps = f.find("rms_norm_eps")) {
    COSMOS_TRY_ASSIGN(c.rms_norm_eps, f.number(eps, "rms_norm_eps", 0.0, 0.1));
  } else {
    return f.missing("rms_norm_eps");
  }

  // RoPE: rope_theta at the section level (older) or inside rope_parameters (newer);
  // mrope_section inside rope_scaling (older) or rope_parameters (newer).
  const json* rope_params = f.find("rope_parameters");
  const json* rope_scaling = f.find("rope_scaling");
  if (rope_params && !rope_params->is_object())
    return f.invalid("rope_parameters", "must be an object");
  if (rope_scaling && !rope_scaling->is_object())
    return f.invalid("rope_scaling", "must be an object");
  c.rope_parameters_form = rope_params != nullptr;
  const json* theta = f.find("rope_theta");
  if (!theta && rope_params && rope_params->contains("rope_theta")) theta = &(*rope_params)["rope_theta"];
  if (!theta) return f.missing("rope_theta");
  COSMOS_TRY_ASSIGN(c.rope_theta, f.number(theta, "rope_theta", 0.0, 1e12));
  const json* rope_obj = rope_params ? rope_params : rope_scaling;
  if (rope_obj) {
    std::string rope_type;
    for (const char* k : {"rope_type", "type"})
      if (rope_obj->contains(k) && (*rope_obj)[k].is_string()) rope_type = (*rope_obj)[k].get<std::string>();
    if (!rope_type.empty() && rope_type != "default" && rope_type != "mrope")
      return make_error(ErrorCategory::unsupported_model, "config.unsupported",
                        label + ": rope type \"" + rope_type + "\" is not supported (expected mrope/default)");
    if (rope_obj->contains("mrope_section")) {
      const std::string key = rope_params ? "rope_parameters.mrope_section" : "rope_scaling.mrope_section";
      COSMOS_TRY_ASSIGN(c.mrope_section, int_list(f, (*rope_obj)["mrope_section"], key));
      const int sum = std::accumulate(c.mrope_section.begin(), c.mrope_section.end(), 0);
      if (c.mrope_section.size() != 3 || sum != c.head_dim / 2)
        return f.invalid(key, "must be 3 sections summing to head_dim/2 = " +
                                  std::to_string(c.head_dim / 2) + ", got sum " + std::to_string(sum));
    }
  }
  if (c.model_type != "qwen2" && c.mrope_section.empty())
    return f.missing("rope_scaling.mrope_section");

  if (const json* tie = f.find("tie_word_embeddings")) {
    if (!tie->is_boolean()) return f.invalid("tie_word_embeddings", "must be true or false");
    c.tie_word_embeddings = tie->get<bool>();
  }
  for (const char* k : {"torch_dtype", "dtype"})
    if (const json* d = f.find(k); d && d->is_string()) c.torch_dtype = d->get<std::string>();
  if (const json* eos = f.find("eos_token_id")) {
    if (eos->is_number_integer()) c.eos_token_ids = {eos->get<int>()};
    else COSMOS_TRY_ASSIGN(c.eos_token_ids, int_list(f, *eos, "eos_token_id"));
  }
  auto optional_id = [&](const char* key, int& out) -> Status {
    if (const json* v = f.find(key)) {
      if (!v->is_number_integer()) return f.invalid(key, "must be an integer");
      out = v->get<int>();
    }
    return ok_status();
  };
  for (auto [key, out] : {std::pair{"image_token_id", &c.image_token_id},
                          std::pair{"video_token_id", &c.video_token_id},
                          std::pair{"vision_start_token_id", &c.vision_start_token_id},
                          std::pair{"vision_end_token_id", &c.vision_end_token_id}}) {
    if (auto s = optional_id(key, *out); !s) return s.error();
  }

  if (auto it = j.find("vision_config"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return f.invalid("vision_config", "must be an object");
    auto v = parse_vision(*it, label);
    if (!v) return v.error();
    if (v->out_hidden_size != c.hidden_size)
      return f.invalid("vision_config.out_hidden_size",
                       "(" + std::to_string(v->out_hidden_size) + ") must equal hidden_size (" +
                           std::to_string(c.hidden_size) + ")");
    c.vision = *v;
  }
  return c;
}

Result<ModelConfig> load_model_config(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(ErrorCategory::bad_input, "config.missing",
                      path.string() + ": cannot open config.json (is this a model folder?)");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return make_error(ErrorCategory::bad_input, "config.json", path.string() + ": not valid JSON");
  return parse_model_config(j, path.string());
}

json ModelConfig::to_json() const {
  json j = {
      {"architectures", {architecture.empty() ? "Qwen2_5_VLForConditionalGeneration" : architecture}},
      {"model_type", model_type.empty() ? "qwen2_5_vl" : model_type},
      {"attention_dropout", 0.0},
      {"bos_token_id", 151643},
      {"eos_token_id", eos_token_ids.size() == 1 ? json(eos_token_ids[0]) : json(eos_token_ids)},
      {"vision_start_token_id", vision_start_token_id},
      {"vision_end_token_id", vision_end_token_id},
      {"vision_token_id", 151654},
      {"image_token_id", image_token_id},
      {"video_token_id", video_token_id},
      {"hidden_act", "silu"},
      {"hidden_size", hidden_size},
      {"initializer_range", 0.02},
      {"intermediate_size", intermediate_size},
      {"max_position_embeddings", max_position_embeddings},
      {"max_window_layers", num_layers},
      {"num_attention_heads", num_heads},
      {"num_hidden_layers", num_layers},
      {"num_key_value_heads", num_kv_heads},
      {"rms_norm_eps", rms_norm_eps},
      {"rope_theta", rope_theta},
      {"sliding_window", 32768},
      {"tie_word_embeddings", tie_word_embeddings},
      {"torch_dtype", torch_dtype.empty() ? "bfloat16" : torch_dtype},
      {"transformers_version", "4.51.3"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", vocab_size},
      {"rope_scaling", {{"type", "mrope"}, {"mrope_section", mrope_section}}},
  };
  if (head_dim * num_heads != hidden_size) j["head_dim"] = head_dim;
  if (vision) {
    const VisionConfig& v = *vision;
    j["vision_config"] = {
        {"depth", v.depth},
        {"hidden_act", "silu"},
        {"hidden_size", v.hidden_size},
        {"intermediate_size", v.intermediate_size},
        {"num_heads", v.num_heads},
        {"in_chans", v.in_channels},
        {"out_hidden_size", v.out_hidden_size},
        {"patch_size", v.patch_size},
        {"spatial_merge_size", v.spatial_merge_size},
        {"spatial_patch_size", v.patch_size},
        {"window_size", v.window_size},
        {"fullatt_block_indexes", v.fullatt_block_indexes},
        {"tokens_per_second", v.tokens_per_second},
        {"temporal_patch_size", v.temporal_patch_size},
    };
  }
  return j;
}

ModelConfig cosmos_reason1_7b_config() {
  ModelConfig c;
  c.architecture = "Qwen2_5_VLForConditionalGeneration";
  c.model_type = "qwen2_5_vl";
  c.hidden_size = 3584;
  c.intermediate_size = 18944;
  c.num_layers = 28;
  c.num_heads = 28;
  c.num_kv_heads = 4;
  c.head_dim = 128;
  c.vocab_size = 152064;
  c.max_position_embeddings = 128000;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e6;
  c.mrope_section = {16, 24, 24};
  c.torch_dtype = "bfloat16";
  c.eos_token_ids = {151645};
  VisionConfig v;
  v.depth = 32;
  v.hidden_size = 1280;
  v.intermediate_size = 3420;
  v.num_heads = 16;
  v.out_hidden_size = 3584;
  v.fullatt_block_indexes = {7, 15, 23, 31};
  c.vision = v;
  return c;
}

ModelConfig tiny_test_config() {
  ModelConfig c = cosmos_reason1_7b_config();
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 4096;
  c.mrope_section = {2, 3, 3};
  VisionConfig v;
  v.depth = 2;
  v.hidden_size = 32;
  v.intermediate_size = 64;
  v.num_heads = 2;
  v.out_hidden_size = 64;
  v.fullatt_block_indexes = {1};
  c.vision = v;
  return c;
}

}  // namespace cosmos
