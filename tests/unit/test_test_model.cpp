// make-test-model: a folder the checkpoint reader accepts, deterministic bytes from the documented
// generator, both layouts with identical canonical data, single file and shards.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cosmos/checkpoint.h"
#include "cosmos/model_tensors.h"
#include "cosmos/test_model.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;

class TestModel : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("cosmos_test_model_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path make(const std::string& name, std::uint64_t seed, TensorLayout layout, int shards) {
    TestModelOptions o;
    o.seed = seed;
    o.layout = layout;
    o.shards = shards;
    o.out_dir = root_ / name;
    auto st = make_test_model(o);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    return o.out_dir;
  }

  fs::path root_;
};

float bf16(std::span<const std::byte> data, std::size_t i) {
  std::uint16_t b;
  std::memcpy(&b, data.data() + 2 * i, 2);
  const std::uint32_t x = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

TEST_F(TestModel, TinyIsAValidCheckpoint) {
  const fs::path dir = make("tiny", 7, TensorLayout::original, 3);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer_config.json",
                        "model.safetensors.index.json", "model-00001-of-00003.safetensors",
                        "model-00003-of-00003.safetensors"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  auto config = load_model_config(dir / "config.json");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->vocab_size, 152064);
  EXPECT_EQ(config->num_layers, 2);
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  EXPECT_EQ(ckpt->shard_count(), 3u);
  EXPECT_EQ(ckpt->layout(), TensorLayout::original);
  EXPECT_TRUE(ckpt->validate_text_model(*config).ok());
  const std::size_t expected = text_model_tensors(*config).size() + vision_tensors(*config).size();
  EXPECT_EQ(ckpt->tensors().size(), expected);
  for (const auto& t : vision_tensors(*config)) {
    const auto* found = ckpt->find(t.name);
    ASSERT_NE(found, nullptr) << t.name;
    EXPECT_EQ(found->info.shape, t.shape) << t.name;
  }
}

TEST_F(TestModel, WeightsFollowTheDocumentedGenerator) {
  const fs::path dir = make("tiny", 42, TensorLayout::original, 1);
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  struct Probe {
    const char* name;
    int kind;  // 0 norm, 1 bias, 2 embedding, 3 matrix
    std::uint64_t fan_in;
    float lo, hi;
  };
  for (const Probe& p : {Probe{"model.embed_tokens.weight", 2, 64, -1.0f, 1.0f},
                         Probe{"model.layers.1.mlp.down_proj.weight", 3, 128, -0.154f, 0.154f},
                         Probe{"model.layers.0.self_attn.k_proj.bias", 1, 1, -0.1f, 0.1f},
                         Probe{"model.norm.weight", 0, 1, 0.9f, 1.1f}}) {
    const auto* t = ckpt->find(p.name);
    ASSERT_NE(t, nullptr) << p.name;
    const auto data = ckpt->data(*t);
    const std::size_t n = t->info.numel();
    for (std::size_t i : {std::size_t{0}, std::size_t{1}, n / 2, n - 1}) {
      const float want = test_weight_value(42, p.name, p.kind, i, p.fan_in);
      EXPECT_NEAR(bf16(data, i), want, std::fabs(want) / 128 + 1e-6f) << p.name << "[" << i << "]";
    }
    float mn = 1e9f, mx = -1e9f;
    for (std::size_t i = 0; i < n; ++i) {
      mn = std::min(mn, bf16(data, i));
      mx = std::max(mx, bf16(data, i));
    }
    EXPECT_GE(mn, p.lo - 0.01f * std::fabs(p.lo)) << p.name;
    EXPECT_LE(mx, p.hi + 0.01f * std::fabs(p.hi)) << p.name;
    EXPECT_LT(mn, mx) << p.name;
  }
}

TEST_F(TestModel, SameSeedSameBytesAndLayoutsAgree) {
  const fs::path a = make("a", 3, TensorLayout::original, 2);
  const fs::path b = make("b", 3, TensorLayout::language_model, 4);
  const fs::path c = make("c", 4, TensorLayout::original, 2);
  auto ca = Checkpoint::open(a), cb = Checkpoint::open(b), cc = Checkpoint::open(c);
  ASSERT_TRUE(ca.ok() && cb.ok() && cc.ok());
  EXPECT_EQ(cb->layout(), TensorLayout::language_model);
  ASSERT_EQ(ca->tensors().size(), cb->tensors().size());
  bool any_differs_from_other_seed = false;
  for (std::size_t i = 0; i < ca->tensors().size(); ++i) {
    const auto& ta = ca->tensors()[i];
    const auto& tb = cb->tensors()[i];
    EXPECT_EQ(ta.name, tb.name);
    const auto da = ca->data(ta), db = cb->data(tb);
    ASSERT_EQ(da.size(), db.size());
    EXPECT_EQ(std::memcmp(da.data(), db.data(), da.size()), 0) << ta.name;
    const auto* tc = cc->find(ta.name);
    ASSERT_NE(tc, nullptr);
    const auto dc = cc->data(*tc);
    any_differs_from_other_seed |= std::memcmp(da.data(), dc.data(), da.size()) != 0;
  }
  EXPECT_TRUE(any_differs_from_other_seed);
  const auto* stored = cb->find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ(stored->info.name, "model.language_model.layers.0.self_attn.q_proj.weight");
  const auto* vis = cb->find("visual.blocks.0.attn.qkv.weight");
  ASSERT_NE(vis, nullptr);
  EXPECT_EQ(vis->info.name, "model.visual.blocks.0.attn.qkv.weight");
}

// Tensor names as transformers 5.17 re-saves the tiny model (tests/golden/make_golden.py): each maps
// to exactly one tensor the engine expects, and none is left over.
TEST(TestModelNames, TransformersResavedNamesAreTheExpectedSet) {
  std::ifstream f(std::string(COSMOS_TEST_DATA_DIR) + "/transformers_saved_tensors.json");
  const auto names = nlohmann::json::parse(f).get<std::vector<std::string>>();
  std::set<std::string> expected;
  const ModelConfig c = tiny_test_config();
  for (const auto& t : text_model_tensors(c)) expected.insert(t.name);
  for (const auto& t : vision_tensors(c)) expected.insert(t.name);
  std::set<std::string> got;
  for (const auto& n : names) got.insert(canonical_tensor_name(n));
  EXPECT_EQ(got, expected);
  EXPECT_EQ(names.size(), expected.size());
}

TEST_F(TestModel, RefusesUnknownPresetAndMissingTokenizer) {
  TestModelOptions o;
  o.preset = "huge";
  o.out_dir = root_ / "x";
  auto st = make_test_model(o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "test_model.preset");
  o.preset = "tiny";
  o.tokenizer_json = root_ / "none" / "tokenizer.json";
  st = make_test_model(o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "file.missing");
  EXPECT_NE(st.error().message.find("tokenizer.json"), std::string::npos);
}

}  // namespace
}  // namespace cosmos
