// Checkpoint folders: single file and sharded, both tensor-name layouts, every checkpoint.* error,
// and validate_text_model against a hand-made config.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/checkpoint.h"
#include "cosmos/model_config.h"
#include "cosmos/model_tensors.h"
#include "temp_dir.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

using testing::TempDir;

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// A tensor to put in a test checkpoint; data is a pattern derived from the name (so every tensor's
// bytes differ and a mix-up between shards or tensors is caught).
struct Spec {
  std::string stored;
  DType dtype = DType::bf16;
  std::vector<std::int64_t> shape;
  std::string shard = "model.safetensors";
};

Bytes data_for(const Spec& s) {
  std::uint64_t n = dtype_size(s.dtype);
  for (auto d : s.shape) n *= static_cast<std::uint64_t>(d);
  Bytes b(n);
  const std::size_t h = std::hash<std::string>{}(s.stored);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((h >> (i % 8)) + i * 31);
  return b;
}

// model.safetensors.index.json mapping each spec's stored name to its shard.
void write_index(const fs::path& dir, const std::vector<Spec>& specs) {
  std::string j = R"({"metadata":{"total_size":0},"weight_map":{)";
  for (std::size_t i = 0; i < specs.size(); ++i) {
    j += (i ? "," : "") + ("\"" + specs[i].stored + "\":\"" + specs[i].shard + "\"");
  }
  write_text(dir / "model.safetensors.index.json", j + "}}");
}

// Writes every shard named by the specs; with `index`, also model.safetensors.index.json.
void write_checkpoint(const fs::path& dir, const std::vector<Spec>& specs, bool index) {
  std::map<std::string, std::vector<const Spec*>> by_shard;
  for (const auto& s : specs) by_shard[s.shard].push_back(&s);
  for (const auto& [shard, list] : by_shard) {
    std::vector<Bytes> datas;
    datas.reserve(list.size());
    std::vector<TensorToWrite> ts;
    for (const Spec* s : list) datas.push_back(data_for(*s));
    for (std::size_t i = 0; i < list.size(); ++i) ts.push_back({list[i]->stored, list[i]->dtype, list[i]->shape, datas[i]});
    const auto st = write_safetensors(dir / shard, ts, {{"format", "pt"}});
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
  if (index) write_index(dir, specs);
}

std::string to_stored(TensorLayout layout, const std::string& canonical) {
  if (layout == TensorLayout::language_model) {
    if (canonical.starts_with("model.")) return "model.language_model." + canonical.substr(6);
    if (canonical.starts_with("visual.")) return "model." + canonical;
  }
  return canonical;
}

// A few text and vision tensors in the given layout, spread over `shards` shard files.
std::vector<Spec> sample_specs(TensorLayout layout, int shards) {
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> canon = {
      {"model.embed_tokens.weight", {10, 4}},
      {"model.layers.0.input_layernorm.weight", {4}},
      {"model.layers.0.self_attn.q_proj.weight", {4, 4}},
      {"model.layers.0.self_attn.q_proj.bias", {4}},
      {"model.norm.weight", {4}},
      {"lm_head.weight", {10, 4}},
      {"visual.blocks.0.attn.qkv.weight", {6, 2}},
      {"visual.merger.mlp.0.bias", {0}},  // a zero-size tensor too
  };
  std::vector<Spec> out;
  for (std::size_t i = 0; i < canon.size(); ++i) {
    Spec s{to_stored(layout, canon[i].first), DType::bf16, canon[i].second};
    if (shards > 0) {
      s.shard = "model-0000" + std::to_string(1 + i % static_cast<std::size_t>(shards)) + "-of-0000" +
                std::to_string(shards) + ".safetensors";
    }
    out.push_back(s);
  }
  return out;
}

void expect_matches(const Checkpoint& ck, const std::vector<Spec>& specs, TensorLayout layout) {
  EXPECT_EQ(ck.layout(), layout);
  ASSERT_EQ(ck.tensors().size(), specs.size());
  EXPECT_TRUE(std::is_sorted(ck.tensors().begin(), ck.tensors().end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
  std::uint64_t total = 0;
  for (const auto& s : specs) {
    const std::string canonical = canonical_tensor_name(s.stored);
    const CheckpointTensor* t = ck.find(canonical);
    ASSERT_NE(t, nullptr) << canonical;
    EXPECT_EQ(t->name, canonical);
    EXPECT_EQ(t->info.name, s.stored);
    EXPECT_EQ(t->info.shape, s.shape);
    EXPECT_EQ(ck.shard(t->shard).path().filename(), s.shard);
    const Bytes want = data_for(s);
    const auto got = ck.data(*t);
    ASSERT_EQ(got.size(), want.size()) << canonical;
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << canonical;
    total += want.size();
  }
  EXPECT_EQ(ck.total_bytes(), total);
  EXPECT_EQ(ck.find("model.absent.weight"), nullptr);
  EXPECT_EQ(ck.find(""), nullptr);
  EXPECT_EQ(ck.find("zzz"), nullptr);
}

// ---------------------------------------------------------------------------------------------

TEST(CanonicalName, MapsBothLayouts) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model.language_model.layers.3.mlp.up_proj.weight", "model.layers.3.mlp.up_proj.weight"},
      {"model.language_model.embed_tokens.weight", "model.embed_tokens.weight"},
      {"model.visual.blocks.0.norm1.weight", "visual.blocks.0.norm1.weight"},
      {"model.layers.0.input_layernorm.weight", "model.layers.0.input_layernorm.weight"},
      {"visual.merger.ln_q.weight", "visual.merger.ln_q.weight"},
      {"lm_head.weight", "lm_head.weight"},
      {"model.language_model", "model.language_model"},  // no trailing dot: not the prefix
      {"", ""},
  };
  for (const auto& [in, out] : cases) EXPECT_EQ(canonical_tensor_name(in), out) << in;
  EXPECT_STREQ(to_string(TensorLayout::original), "original");
  EXPECT_STREQ(to_string(TensorLayout::language_model), "language_model");
}

class CheckpointLayouts : public ::testing::TestWithParam<std::tuple<TensorLayout, int>> {};

TEST_P(CheckpointLayouts, OpensAndReadsEveryTensorByteExact) {
  const auto [layout, shards] = GetParam();
  TempDir dir;
  const auto specs = sample_specs(layout, shards);
  write_checkpoint(dir.path(), specs, shards > 0);
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->shard_count(), static_cast<std::size_t>(std::max(shards, 1)));
  expect_matches(ck.value(), specs, layout);
  if (layout == TensorLayout::language_model) {
    // Stored names are not lookup keys.
    EXPECT_EQ(ck->find("model.language_model.norm.weight"), nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, CheckpointLayouts,
    ::testing::Combine(::testing::Values(TensorLayout::original, TensorLayout::language_model), ::testing::Values(0, 2, 3)),
    [](const auto& p) {
      return std::string(to_string(std::get<0>(p.param))) + "_" +
             (std::get<1>(p.param) == 0 ? std::string("single") : std::to_string(std::get<1>(p.param)) + "shards");
    });

TEST(Checkpoint, IndexIsAuthoritativeOverExtraShardTensorsAndSingleFile) {
  TempDir dir;
  auto specs = sample_specs(TensorLayout::original, 2);
  auto with_extra = specs;
  with_extra.push_back({"extra.not_in_index", DType::f32, {2}, specs[0].shard});
  // The shards hold an extra tensor the index does not list, and a stray model.safetensors exists.
  write_checkpoint(dir.path(), with_extra, false);
  write_index(dir.path(), specs);
  write_checkpoint(dir.path(), {{"stray", DType::f32, {1}, "model.safetensors"}}, false);
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->find("extra.not_in_index"), nullptr);
  EXPECT_EQ(ck->find("stray"), nullptr);
  expect_matches(ck.value(), specs, TensorLayout::original);
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(CheckpointErrors, EmptyFolderHasNoWeights) {
  TempDir dir;
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "checkpoint.no_weights");
  EXPECT_EQ(r.error().category, ErrorCategory::bad_input);
  EXPECT_TRUE(contains(r.error().message, dir.path().string())) << r.error().message;
}

TEST(CheckpointErrors, PyTorchWeightsAreNamedAsUnsupported) {
  TempDir dir;
  write_text(dir.path() / "pytorch_model.bin", "not read");
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "checkpoint.no_weights");
  EXPECT_TRUE(contains(r.error().message, "pytorch_model.bin")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "only safetensors")) << r.error().message;
}

TEST(CheckpointErrors, ShardsWithoutIndexAreMentioned) {
  TempDir dir;
  write_checkpoint(dir.path(), sample_specs(TensorLayout::original, 2), false);
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "checkpoint.no_weights");
  EXPECT_TRUE(contains(r.error().message, "model-00001-of-00002.safetensors")) << r.error().message;
}

TEST(CheckpointErrors, MissingFolderHasNoWeights) {
  TempDir dir;
  const auto r = Checkpoint::open(dir.path() / "absent");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "checkpoint.no_weights");
  EXPECT_TRUE(contains(r.error().message, (dir.path() / "absent").string()));
}

struct IndexCase {
  const char* name;
  std::string json;
};

class BadIndex : public ::testing::TestWithParam<IndexCase> {};

TEST_P(BadIndex, IsIndexJsonError) {
  TempDir dir;
  write_checkpoint(dir.path(), sample_specs(TensorLayout::original, 1), false);
  const fs::path index = dir.path() / "model.safetensors.index.json";
  write_text(index, GetParam().json);
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "checkpoint.index_json");
  EXPECT_EQ(r.error().category, ErrorCategory::bad_input);
  EXPECT_TRUE(contains(r.error().message, index.string())) << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    All, BadIndex,
    ::testing::Values(IndexCase{"not_json", "{weight_map"}, IndexCase{"empty_file", ""}, IndexCase{"array", "[]"},
                      IndexCase{"no_weight_map", R"({"metadata":{}})"},
                      IndexCase{"weight_map_array", R"({"weight_map":["a"]})"},
                      IndexCase{"weight_map_empty", R"({"weight_map":{}})"},
                      IndexCase{"shard_not_string", R"({"weight_map":{"lm_head.weight":1}})"},
                      IndexCase{"traversal_dotdot", R"({"weight_map":{"lm_head.weight":"../model-00001-of-00001.safetensors"}})"},
                      IndexCase{"traversal_subdir", R"({"weight_map":{"lm_head.weight":"sub/x.safetensors"}})"},
                      IndexCase{"traversal_absolute", R"({"weight_map":{"lm_head.weight":"/etc/passwd"}})"},
                      IndexCase{"empty_shard_name", R"({"weight_map":{"lm_head.weight":""}})"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(CheckpointErrors, MissingShardNamesShardAndIndex) {
  TempDir dir;
  auto specs = sample_specs(TensorLayout::original, 3);
  write_checkpoint(dir.path(), specs, true);
  fs::remove(dir.path() / "model-00002-of-00003.safetensors");
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "checkpoint.missing_shard");
  EXPECT_EQ(r.error().category, ErrorCategory::bad_input);
  EXPECT_TRUE(contains(r.error().message, "model-00002-of-00003.safetensors")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "model.safetensors.index.json")) << r.error().message;
}

TEST(CheckpointErrors, TensorMissingFromItsShard) {
  TempDir dir;
  auto specs = sample_specs(TensorLayout::language_model, 2);
  write_checkpoint(dir.path(), specs, true);
  // Rewrite the index so that one tensor points at the other shard.
  for (auto& s : specs) {
    if (s.stored == "lm_head.weight") {
      s.shard = s.shard == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors"
                                                              : "model-00001-of-00002.safetensors";
    }
  }
  write_index(dir.path(), specs);
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "checkpoint.missing_in_shard");
  EXPECT_EQ(r.error().category, ErrorCategory::bad_input);
  EXPECT_TRUE(contains(r.error().message, "'lm_head.weight'")) << r.error().message;
  const auto it = std::find_if(specs.begin(), specs.end(), [](const Spec& s) { return s.stored == "lm_head.weight"; });
  EXPECT_TRUE(contains(r.error().message, it->shard)) << r.error().message;
}

TEST(CheckpointErrors, TwoStoredNamesForOneCanonicalName) {
  TempDir dir;
  write_checkpoint(dir.path(),
                   {{"model.norm.weight", DType::bf16, {4}}, {"model.language_model.norm.weight", DType::bf16, {4}}},
                   false);
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "checkpoint.duplicate");
  EXPECT_TRUE(contains(r.error().message, dir.path().string())) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "model.norm.weight")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "model.language_model.norm.weight")) << r.error().message;
}

TEST(CheckpointErrors, DuplicateAcrossShards) {
  TempDir dir;
  write_checkpoint(dir.path(),
                   {{"model.visual.patch_embed.proj.weight", DType::bf16, {4}, "a.safetensors"},
                    {"visual.patch_embed.proj.weight", DType::bf16, {4}, "b.safetensors"}},
                   true);
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "checkpoint.duplicate");
}

TEST(CheckpointErrors, DamagedShardKeepsSafetensorsCodeAndPath) {
  TempDir dir;
  write_checkpoint(dir.path(), sample_specs(TensorLayout::original, 2), true);
  const fs::path shard = dir.path() / "model-00001-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 3);
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "safetensors.truncated");
  EXPECT_TRUE(contains(r.error().message, shard.string())) << r.error().message;
}

TEST(CheckpointErrors, DamagedSingleFile) {
  TempDir dir;
  write_text(dir.path() / "model.safetensors", "junk");
  const auto r = Checkpoint::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "safetensors.too_small");
  EXPECT_TRUE(contains(r.error().message, (dir.path() / "model.safetensors").string()));
}

// ---------------------------------------------------------------------------------------------
// validate_text_model

ModelConfig small_config() {
  ModelConfig c;
  c.architecture = "Qwen2_5_VLForConditionalGeneration";
  c.model_type = "qwen2_5_vl";
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 50;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e6;
  c.mrope_section = {2, 1, 1};
  c.tie_word_embeddings = false;
  c.torch_dtype = "bfloat16";
  c.eos_token_ids = {151645, 151643};
  return c;
}

// Writes every expected text tensor for `config` in `layout` over two shards; `edit` may change
// the list first.
template <typename Edit>
void write_model(const fs::path& dir, const ModelConfig& config, TensorLayout layout, Edit edit) {
  std::vector<Spec> specs;
  int i = 0;
  for (const auto& e : text_model_tensors(config)) {
    specs.push_back({to_stored(layout, e.name), DType::bf16, e.shape, i++ % 2 ? "b.safetensors" : "a.safetensors"});
  }
  edit(specs);
  write_checkpoint(dir, specs, true);
}

TEST(ValidateTextModel, ExpectedTensorListHasTheKnownShapes) {
  const ModelConfig c = small_config();
  const auto expected = text_model_tensors(c);
  auto shape_of = [&](const std::string& name) -> std::vector<std::int64_t> {
    for (const auto& e : expected)
      if (e.name == name) return e.shape;
    return {-1};
  };
  EXPECT_EQ(shape_of("model.embed_tokens.weight"), (std::vector<std::int64_t>{50, 32}));
  EXPECT_EQ(shape_of("model.layers.1.self_attn.q_proj.weight"), (std::vector<std::int64_t>{32, 32}));
  EXPECT_EQ(shape_of("model.layers.1.self_attn.k_proj.weight"), (std::vector<std::int64_t>{16, 32}));
  EXPECT_EQ(shape_of("model.layers.0.self_attn.v_proj.bias"), (std::vector<std::int64_t>{16}));
  EXPECT_EQ(shape_of("model.layers.0.mlp.down_proj.weight"), (std::vector<std::int64_t>{32, 48}));
  EXPECT_EQ(shape_of("model.norm.weight"), (std::vector<std::int64_t>{32}));
  EXPECT_EQ(shape_of("lm_head.weight"), (std::vector<std::int64_t>{50, 32}));
  // 1 embedding + 12 per layer + final norm + lm_head.
  EXPECT_EQ(expected.size(), 1u + 12u * 2u + 1u + 1u);
}

class ValidateLayouts : public ::testing::TestWithParam<TensorLayout> {};

TEST_P(ValidateLayouts, CompleteCheckpointValidates) {
  TempDir dir;
  const ModelConfig c = small_config();
  write_model(dir.path(), c, GetParam(), [](std::vector<Spec>&) {});
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->layout(), GetParam());
  const auto st = ck->validate_text_model(c);
  EXPECT_TRUE(st.ok()) << st.error().message;
}

TEST_P(ValidateLayouts, MissingTensorNamesCanonicalAndStoredName) {
  TempDir dir;
  const ModelConfig c = small_config();
  const std::string canonical = "model.layers.1.mlp.gate_proj.weight";
  const std::string stored = to_stored(GetParam(), canonical);
  write_model(dir.path(), c, GetParam(), [&](std::vector<Spec>& specs) {
    std::erase_if(specs, [&](const Spec& s) { return s.stored == stored; });
  });
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  const auto st = ck->validate_text_model(c);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "checkpoint.missing_tensor");
  EXPECT_TRUE(contains(st.error().message, dir.path().string())) << st.error().message;
  EXPECT_TRUE(contains(st.error().message, "'" + canonical + "'")) << st.error().message;
  EXPECT_TRUE(contains(st.error().message, "'" + stored + "'")) << st.error().message;
}

TEST_P(ValidateLayouts, WrongShapeGivesBothShapes) {
  TempDir dir;
  const ModelConfig c = small_config();
  write_model(dir.path(), c, GetParam(), [&](std::vector<Spec>& specs) {
    for (auto& s : specs)
      if (canonical_tensor_name(s.stored) == "model.layers.0.self_attn.k_proj.weight") s.shape = {32, 32};
  });
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  const auto st = ck->validate_text_model(c);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "checkpoint.shape");
  EXPECT_TRUE(contains(st.error().message, dir.path().string())) << st.error().message;
  EXPECT_TRUE(contains(st.error().message, "model.layers.0.self_attn.k_proj.weight")) << st.error().message;
  EXPECT_TRUE(contains(st.error().message, "[32, 32]")) << st.error().message;
  EXPECT_TRUE(contains(st.error().message, "[16, 32]")) << st.error().message;
}

INSTANTIATE_TEST_SUITE_P(All, ValidateLayouts, ::testing::Values(TensorLayout::original, TensorLayout::language_model),
                         [](const auto& p) { return std::string(to_string(p.param)); });

TEST(ValidateTextModel, FloatDTypesAcceptedOthersRejected) {
  const ModelConfig c = small_config();
  for (DType d : {DType::f16, DType::f32, DType::i8, DType::u8, DType::f8_e4m3, DType::f64}) {
    TempDir dir;
    write_model(dir.path(), c, TensorLayout::original, [&](std::vector<Spec>& specs) {
      for (auto& s : specs)
        if (s.stored == "model.norm.weight") s.dtype = d;
    });
    auto ck = Checkpoint::open(dir.path());
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    const auto st = ck->validate_text_model(c);
    const bool readable = d == DType::f16 || d == DType::f32;
    EXPECT_EQ(st.ok(), readable) << dtype_name(d);
    if (!readable && !st.ok()) {
      EXPECT_EQ(st.error().code, "checkpoint.dtype");
      EXPECT_EQ(st.error().category, ErrorCategory::unsupported_model);
      EXPECT_TRUE(contains(st.error().message, dir.path().string())) << st.error().message;
      EXPECT_TRUE(contains(st.error().message, "model.norm.weight")) << st.error().message;
      EXPECT_TRUE(contains(st.error().message, std::string(dtype_name(d)))) << st.error().message;
    }
  }
}

TEST(ValidateTextModel, TinyTestConfigInLanguageModelLayout) {
  // The shapes make-test-model uses (real vocabulary, so ~40 MB of embeddings), in the newer layout
  // with the vision tower alongside: vision tensors do not disturb the text validation.
  TempDir dir;
  const ModelConfig c = tiny_test_config();
  std::vector<Spec> specs;
  for (const auto& e : text_model_tensors(c)) specs.push_back({to_stored(TensorLayout::language_model, e.name), DType::bf16, e.shape});
  for (const auto& e : vision_tensors(c)) specs.push_back({to_stored(TensorLayout::language_model, e.name), DType::bf16, e.shape});
  write_checkpoint(dir.path(), specs, false);
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->layout(), TensorLayout::language_model);
  const auto st = ck->validate_text_model(c);
  EXPECT_TRUE(st.ok()) << st.error().message;
  const CheckpointTensor* emb = ck->find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->info.shape, (std::vector<std::int64_t>{c.vocab_size, c.hidden_size}));
  EXPECT_NE(ck->find("visual.patch_embed.proj.weight"), nullptr);
}

TEST(ValidateTextModel, VisionOnlyCheckpointReportsHowManyAreMissing) {
  TempDir dir;
  write_checkpoint(dir.path(), {{"visual.patch_embed.proj.weight", DType::bf16, {4, 4}}}, false);
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  const auto st = ck->validate_text_model(small_config());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "checkpoint.missing_tensor");
  EXPECT_TRUE(contains(st.error().message, "26 more")) << st.error().message;
}

}  // namespace
}  // namespace cosmos
