// config.json in its three forms, and one row per kind of bad field.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cosmos/model_config.h"

namespace cosmos {
namespace {

nlohmann::json load_json(const std::string& name) {
  std::ifstream f(std::string(COSMOS_TEST_DATA_DIR) + "/configs/" + name);
  return nlohmann::json::parse(f);
}

class ConfigForms : public ::testing::TestWithParam<std::tuple<const char*, ConfigForm, bool>> {};

TEST_P(ConfigForms, ParsesCosmosReason1Shape) {
  const auto [file, form, rope_parameters] = GetParam();
  auto c = parse_model_config(load_json(file), file);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->form, form);
  EXPECT_EQ(c->rope_parameters_form, rope_parameters);
  EXPECT_EQ(c->model_type, "qwen2_5_vl");
  EXPECT_EQ(c->architecture, "Qwen2_5_VLForConditionalGeneration");
  EXPECT_EQ(c->hidden_size, 3584);
  EXPECT_EQ(c->intermediate_size, 18944);
  EXPECT_EQ(c->num_layers, 28);
  EXPECT_EQ(c->num_heads, 28);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->vocab_size, 152064);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->mrope_section, (std::vector<int>{16, 24, 24}));
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  ASSERT_TRUE(c->vision.has_value());
  EXPECT_EQ(c->vision->depth, 32);
  EXPECT_EQ(c->vision->hidden_size, 1280);
  EXPECT_EQ(c->vision->fullatt_block_indexes, (std::vector<int>{7, 15, 23, 31}));
  EXPECT_EQ(c->q_dim(), 3584);
  EXPECT_EQ(c->kv_dim(), 512);
}

INSTANTIATE_TEST_SUITE_P(AllForms, ConfigForms,
                         ::testing::Values(std::make_tuple("original.json", ConfigForm::top_level, false),
                                           std::make_tuple("text_config.json", ConfigForm::text_config, false),
                                           std::make_tuple("rope_parameters.json", ConfigForm::text_config, true)));

TEST(ModelConfig, PresetMatchesOriginalFile) {
  auto c = parse_model_config(load_json("original.json"), "original.json");
  ASSERT_TRUE(c.ok());
  const ModelConfig p = cosmos_reason1_7b_config();
  EXPECT_EQ(p.hidden_size, c->hidden_size);
  EXPECT_EQ(p.intermediate_size, c->intermediate_size);
  EXPECT_EQ(p.mrope_section, c->mrope_section);
  EXPECT_EQ(p.vision->intermediate_size, c->vision->intermediate_size);
}

TEST(ModelConfig, ToJsonRoundTrips) {
  for (const ModelConfig& c : {cosmos_reason1_7b_config(), tiny_test_config()}) {
    auto back = parse_model_config(c.to_json(), "to_json");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->hidden_size, c.hidden_size);
    EXPECT_EQ(back->head_dim, c.head_dim);
    EXPECT_EQ(back->num_kv_heads, c.num_kv_heads);
    EXPECT_EQ(back->mrope_section, c.mrope_section);
    EXPECT_EQ(back->vision->depth, c.vision->depth);
    EXPECT_EQ(back->vision->out_hidden_size, c.vision->out_hidden_size);
  }
}

struct BadConfigRow {
  const char* name;
  const char* json_pointer;  // field to change ("" = whole document replaced)
  nlohmann::json value;      // null with remove=true removes the field
  bool remove;
  const char* code;
  const char* mentions;      // the field named in the message
};

class BadConfig : public ::testing::TestWithParam<BadConfigRow> {};

TEST_P(BadConfig, IsAClearErrorNamingTheField) {
  const BadConfigRow& row = GetParam();
  nlohmann::json j = load_json("original.json");
  const nlohmann::json::json_pointer ptr(row.json_pointer);
  if (row.remove) {
    j[ptr.parent_pointer()].erase(ptr.back());
  } else {
    j[ptr] = row.value;
  }
  auto c = parse_model_config(j, "my/config.json");
  ASSERT_FALSE(c.ok()) << row.name;
  EXPECT_EQ(c.error().code, row.code) << c.error().message;
  EXPECT_NE(c.error().message.find(row.mentions), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("my/config.json"), std::string::npos) << c.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Rows, BadConfig,
    ::testing::Values(
        BadConfigRow{"missing_hidden", "/hidden_size", nullptr, true, "config.missing_field", "hidden_size"},
        BadConfigRow{"missing_layers", "/num_hidden_layers", nullptr, true, "config.missing_field", "num_hidden_layers"},
        BadConfigRow{"missing_theta", "/rope_theta", nullptr, true, "config.missing_field", "rope_theta"},
        BadConfigRow{"missing_eps", "/rms_norm_eps", nullptr, true, "config.missing_field", "rms_norm_eps"},
        BadConfigRow{"missing_model_type", "/model_type", nullptr, true, "config.missing_field", "model_type"},
        BadConfigRow{"missing_mrope", "/rope_scaling", nullptr, true, "config.missing_field", "mrope_section"},
        BadConfigRow{"hidden_string", "/hidden_size", "big", false, "config.invalid_field", "hidden_size"},
        BadConfigRow{"hidden_zero", "/hidden_size", 0, false, "config.invalid_field", "hidden_size"},
        BadConfigRow{"heads_negative", "/num_attention_heads", -4, false, "config.invalid_field", "num_attention_heads"},
        BadConfigRow{"heads_not_dividing", "/num_attention_heads", 27, false, "config.invalid_field", "num_attention_heads"},
        BadConfigRow{"kv_not_dividing", "/num_key_value_heads", 5, false, "config.invalid_field", "num_key_value_heads"},
        BadConfigRow{"eps_negative", "/rms_norm_eps", -1e-6, false, "config.invalid_field", "rms_norm_eps"},
        BadConfigRow{"theta_zero", "/rope_theta", 0, false, "config.invalid_field", "rope_theta"},
        BadConfigRow{"mrope_sum", "/rope_scaling/mrope_section", nlohmann::json::array({16, 24, 23}), false,
                     "config.invalid_field", "mrope_section"},
        BadConfigRow{"mrope_type", "/rope_scaling/mrope_section", "16,24,24", false, "config.invalid_field", "mrope_section"},
        BadConfigRow{"rope_yarn", "/rope_scaling/type", "yarn", false, "config.unsupported", "yarn"},
        BadConfigRow{"llama", "/model_type", "llama", false, "config.unsupported", "llama"},
        BadConfigRow{"tie_string", "/tie_word_embeddings", "no", false, "config.invalid_field", "tie_word_embeddings"},
        BadConfigRow{"vision_depth", "/vision_config/depth", nullptr, true, "config.missing_field", "depth"},
        BadConfigRow{"vision_out", "/vision_config/out_hidden_size", 1024, false, "config.invalid_field", "out_hidden_size"},
        BadConfigRow{"vision_fullatt", "/vision_config/fullatt_block_indexes", nlohmann::json::array({7, 40}), false,
                     "config.invalid_field", "fullatt_block_indexes"},
        BadConfigRow{"vocab_float", "/vocab_size", 152064.5, false, "config.invalid_field", "vocab_size"}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(ModelConfig, TextConfigFieldErrorsSayTextConfig) {
  nlohmann::json j = load_json("text_config.json");
  j["text_config"]["num_key_value_heads"] = 3;
  auto c = parse_model_config(j, "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("text_config.num_key_value_heads"), std::string::npos) << c.error().message;
}

TEST(ModelConfig, NotAnObjectAndNotJson) {
  auto c = parse_model_config(nlohmann::json::array({1, 2}), "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, "config.json");

  const auto dir = std::filesystem::temp_directory_path() / "cosmos_config_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << "{\"hidden_size\": 12,";
  auto bad = load_model_config(dir / "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, "config.json");
  EXPECT_NE(bad.error().message.find("config.json"), std::string::npos);
  auto missing = load_model_config(dir / "nope" / "config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "config.missing");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cosmos

namespace cosmos {
namespace {

// config.json exactly as transformers 5.17 re-saves the tiny test model (tests/golden/make_golden.py):
// text_config + rope_parameters carrying both "type": "mrope" and "rope_type": "default".
TEST(ModelConfig, ParsesTransformersResavedConfig) {
  std::ifstream f(std::string(COSMOS_TEST_DATA_DIR) + "/transformers_saved_config.json");
  auto c = parse_model_config(nlohmann::json::parse(f), "transformers_saved_config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  const ModelConfig t = tiny_test_config();
  EXPECT_EQ(c->form, ConfigForm::text_config);
  EXPECT_TRUE(c->rope_parameters_form);
  EXPECT_EQ(c->hidden_size, t.hidden_size);
  EXPECT_EQ(c->num_layers, t.num_layers);
  EXPECT_EQ(c->num_kv_heads, t.num_kv_heads);
  EXPECT_EQ(c->head_dim, t.head_dim);
  EXPECT_EQ(c->mrope_section, t.mrope_section);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->eos_token_ids, std::vector<int>{151645});
  ASSERT_TRUE(c->vision.has_value());
  EXPECT_EQ(c->vision->hidden_size, 32);
}

}  // namespace
}  // namespace cosmos
