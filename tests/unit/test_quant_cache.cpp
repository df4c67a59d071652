// The quantized-weight cache (cosmos/quant_cache.h): files round-trip every format exactly; a file
// of another precision, checkpoint or version is stale, a damaged or truncated one corrupt, a missing
// one missing; the checkpoint fingerprint follows the checkpoint's files; a write that cannot happen
// leaves nothing under the real name. And the CPU backend with the cache: the first load writes it,
// the next one reads it (shown with a cache file whose values differ from the checkpoint's), and a
// damaged file is quantized again and rewritten, the load unaffected.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "cosmos/checkpoint.h"
#include "cosmos/cpu_backend.h"
#include "cosmos/quant_cache.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;

class QuantCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cosmos_quant_cache_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // The shared tiny test model (tests/common/tiny_model.h); the fingerprint test moves a shard's
  // modification time, which no other test depends on.
  static fs::path tiny() { return testing::tiny_model_dir(); }
  fs::path dir_;
};

QuantizedMatrix random_matrix(QuantFormat f, std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (auto& v : w) v = n(rng);
  QuantizedMatrix m = make_quantized(f, rows, cols);
  EXPECT_TRUE(quantize_rows(reinterpret_cast<const std::byte*>(w.data()), DType::f32, m, 0, rows).ok());
  return m;
}

bool same(const QuantizedMatrix& a, const QuantizedMatrix& b) {
  return a.format == b.format && a.rows == b.rows && a.cols == b.cols && a.q == b.q && a.row_scale == b.row_scale &&
         a.group_scale == b.group_scale && a.group_min == b.group_min;
}

TEST_F(QuantCache, RoundTripsEveryFormat) {
  for (const Precision p : {Precision::int8, Precision::fp8, Precision::int4}) {
    const QuantFormat f = *quant_format_for(p);
    const QuantizedMatrix a = random_matrix(f, 7, 300, 1), b = random_matrix(f, 64, 129, 2);
    const fs::path file = quant_cache_path(dir_, "0123456789abcdef", p);
    ASSERT_TRUE(write_quant_cache(file, p, "0123456789abcdef", {{"a.weight", &a}, {"b.weight", &b}}).ok());
    EXPECT_TRUE(fs::exists(file));
    auto back = read_quant_cache(file, p, "0123456789abcdef");
    ASSERT_TRUE(back.ok()) << back.error().message;
    ASSERT_EQ(back->size(), 2u);
    EXPECT_TRUE(same(back->at("a.weight"), a)) << to_string(p);
    EXPECT_TRUE(same(back->at("b.weight"), b)) << to_string(p);
  }
}

TEST_F(QuantCache, StaleCorruptAndMissingFilesAreRefused) {
  const QuantizedMatrix a = random_matrix(QuantFormat::int8_row, 16, 256, 3);
  const fs::path file = quant_cache_path(dir_, "fp", Precision::int8);
  ASSERT_TRUE(write_quant_cache(file, Precision::int8, "fp", {{"a.weight", &a}}).ok());
  EXPECT_EQ(read_quant_cache(dir_ / "none.safetensors", Precision::int8, "fp").error().code, "quant_cache.missing");
  EXPECT_EQ(read_quant_cache(file, Precision::int8, "other").error().code, "quant_cache.stale");
  EXPECT_EQ(read_quant_cache(file, Precision::int4, "fp").error().code, "quant_cache.stale");
  // One flipped byte near the end (inside the data section).
  const auto size = fs::file_size(file);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size - 100));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(static_cast<std::streamoff>(size - 100));
    f.write(&c, 1);
  }
  auto damaged = read_quant_cache(file, Precision::int8, "fp");
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.error().code, "quant_cache.corrupt");
  EXPECT_NE(damaged.error().message.find("checksum"), std::string::npos);
  fs::resize_file(file, size / 2);
  EXPECT_EQ(read_quant_cache(file, Precision::int8, "fp").error().code, "quant_cache.corrupt");
}

TEST_F(QuantCache, AWriteThatFailsLeavesNothing) {
  const QuantizedMatrix a = random_matrix(QuantFormat::int4_group, 4, 128, 4);
  // A cache folder that cannot exist: its parent is a file (fails for root too).
  const fs::path blocker = dir_ / "a-file";
  std::ofstream(blocker) << "x";
  const fs::path file = quant_cache_path(blocker / "cache", "fp", Precision::int4);
  auto st = write_quant_cache(file, Precision::int4, "fp", {{"a.weight", &a}});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().category, ErrorCategory::io);
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(QuantCache, FingerprintFollowsTheCheckpointFiles) {
  const fs::path m = tiny();
  auto c1 = Checkpoint::open(m);
  ASSERT_TRUE(c1.ok());
  const auto a = checkpoint_fingerprint(*c1), b = checkpoint_fingerprint(*c1);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(a->size(), 16u);
  // Rewritten in place (same size and header, new modification time): another fingerprint.
  fs::path shard;
  for (const auto& e : fs::directory_iterator(m))
    if (e.path().extension() == ".safetensors") shard = e.path();
  ASSERT_FALSE(shard.empty());
  fs::last_write_time(shard, fs::last_write_time(shard) + std::chrono::seconds(5));
  auto c2 = Checkpoint::open(m);
  ASSERT_TRUE(c2.ok());
  EXPECT_NE(*checkpoint_fingerprint(*c2), *a);
}

// The last position's logits of a short prompt.
std::vector<float> last_logits(Backend& b) {
  SequenceInput in;
  in.seq = b.kv_cache().create_sequence();
  in.tokens = {9707, 11, 1879, 0, 576};
  ForwardOutput out;
  EXPECT_TRUE(b.forward(std::span<const SequenceInput>(&in, 1), out).ok());
  b.kv_cache().free_sequence(in.seq);
  const auto row = out.row(0);
  return {row.begin(), row.end()};
}

TEST_F(QuantCache, CpuBackendWritesReadsAndRepairsIt) {
  const fs::path m = tiny();
  BackendOptions o;
  o.precision = Precision::int8;
  o.context_tokens = 256;
  auto plain = create_cpu_backend(m, o);
  ASSERT_TRUE(plain.ok());
  const std::vector<float> want = last_logits(**plain);

  o.quant_cache_dir = dir_ / "cache";
  auto first = create_cpu_backend(m, o);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(last_logits(**first), want);
  auto ckpt = Checkpoint::open(m);
  const fs::path file = quant_cache_path(o.quant_cache_dir, *checkpoint_fingerprint(*ckpt), Precision::int8);
  ASSERT_TRUE(fs::exists(file));
  auto second = create_cpu_backend(m, o);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(last_logits(**second), want);

  // The next load reads the file: a valid cache file whose lm_head is all zeros gives zero logits.
  auto cached = read_quant_cache(file, Precision::int8, *checkpoint_fingerprint(*ckpt));
  ASSERT_TRUE(cached.ok());
  std::vector<std::pair<std::string, const QuantizedMatrix*>> all;
  for (auto& [name, q] : *cached) {
    if (name == "lm_head.weight") std::fill(q.row_scale.begin(), q.row_scale.end(), 0.0f);
    all.emplace_back(name, &q);
  }
  ASSERT_TRUE(write_quant_cache(file, Precision::int8, *checkpoint_fingerprint(*ckpt), all).ok());
  auto zeroed = create_cpu_backend(m, o);
  ASSERT_TRUE(zeroed.ok());
  const std::vector<float> z = last_logits(**zeroed);
  EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](float v) { return v == 0.0f; }));

  // A damaged file: quantized again (the right logits) and rewritten (valid again).
  fs::resize_file(file, fs::file_size(file) - 64);
  auto repaired = create_cpu_backend(m, o);
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(last_logits(**repaired), want);
  EXPECT_TRUE(read_quant_cache(file, Precision::int8, *checkpoint_fingerprint(*ckpt)).ok());
}

}  // namespace
}  // namespace cosmos
