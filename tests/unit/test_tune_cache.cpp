// The GEMM tuning cache file (cosmos/tune_cache.h): entries round-trip exactly; a missing file is
// missing; another version or identity is stale; a changed byte, a truncated file, a line that does
// not parse or a foreign file is corrupt; a write that cannot happen returns file.write and leaves
// nothing under the real name. The decode tuning file (same header) likewise, and besides: the spec
// and every double come back exactly, the empty spec is kept as "spec -", a spec the file cannot hold
// is refused before anything is written, and unknown or missing lines are corrupt.
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>
#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cosmos/tune_cache.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;

const std::string kIdentity = "NVIDIA H200, cc 9.0, 132 SMs, cuBLASLt 130000";

std::vector<TuneCacheEntry> sample() {
  TuneCacheEntry a;
  a.key = {2048, 3584, 18944, 1, 3, 5, 0};
  a.algo = {0x42ull, 0xffffffffffffffffull, 0, 1, 0x0123456789abcdefull, 7, 8, 9};
  TuneCacheEntry b;
  b.key = {512, 37888, 3584, 0, 3, 3, 1};
  b.algo = {1, 2, 3, 4, 5, 6, 7, 0x8000000000000000ull};
  return {a, b};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

class TuneCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cosmos_tune_cache_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(TuneCache, RoundTripsEveryWordAndCreatesTheDirectory) {
  const fs::path file = tune_cache_path(dir_ / "sub", kIdentity);
  ASSERT_TRUE(write_tune_cache(file, kIdentity, sample()));
  auto back = read_tune_cache(file, kIdentity);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, sample());
  // An empty list is a valid file too.
  ASSERT_TRUE(write_tune_cache(file, kIdentity, {}));
  back = read_tune_cache(file, kIdentity);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->empty());
}

TEST_F(TuneCache, DefaultDirectoryFollowsCosmosCacheDir) {
  const char* old = std::getenv("COSMOS_CACHE_DIR");
  const std::string saved = old ? old : "";
  ::setenv("COSMOS_CACHE_DIR", "/some/cache", 1);
  EXPECT_EQ(default_tune_cache_dir(), fs::path("/some/cache/gemm-tuning"));
  if (old)
    ::setenv("COSMOS_CACHE_DIR", saved.c_str(), 1);
  else
    ::unsetenv("COSMOS_CACHE_DIR");
}

TEST_F(TuneCache, FileNameDependsOnTheIdentity) {
  EXPECT_NE(tune_cache_path(dir_, kIdentity), tune_cache_path(dir_, kIdentity + " "));
  EXPECT_EQ(tune_cache_path(dir_, kIdentity), tune_cache_path(dir_, kIdentity));
}

TEST_F(TuneCache, MissingStaleAndCorruptFiles) {
  const fs::path file = tune_cache_path(dir_, kIdentity);
  auto r = read_tune_cache(file, kIdentity);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, "tune_cache.missing");

  ASSERT_TRUE(write_tune_cache(file, kIdentity, sample()));
  r = read_tune_cache(file, "another GPU");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, "tune_cache.stale");

  const std::string good = slurp(file);
  struct Case {
    const char* what;
    std::string text;
    const char* code;
  };
  std::string flipped = good;
  flipped[flipped.find("0000000000000042")] = '1';  // one algorithm word changed
  std::string version = good;
  version.replace(version.find(" 1\n"), 3, " 2\n");
  Case cases[] = {
      {"one byte changed", flipped, "tune_cache.corrupt"},
      {"truncated", good.substr(0, good.size() / 2), "tune_cache.corrupt"},
      {"empty", "", "tune_cache.corrupt"},
      {"foreign", "hello\nxxh3 0000000000000000\n", "tune_cache.corrupt"},
      {"version changed, checksum kept", version, "tune_cache.corrupt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    spit(file, c.text);
    r = read_tune_cache(file, kIdentity);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, c.code);
  }
}

// Behind a valid checksum: another version is stale, a line that does not parse is corrupt (the
// files re-signed here with the same XXH3-64 the writer uses).
std::string signed_file(const std::string& body) {
  char sum[17];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(XXH3_64bits(body.data(), body.size())));
  return body + "xxh3 " + sum + "\n";
}

TEST_F(TuneCache, VersionAndLinesBehindAValidChecksum) {
  fs::create_directories(dir_);
  const fs::path file = tune_cache_path(dir_, kIdentity);
  const std::string id = "identity " + kIdentity + "\n";
  const std::string entry = "512 37888 3584 0 3 3 1 0000000000000001 0000000000000002 0000000000000003 "
                            "0000000000000004 0000000000000005 0000000000000006 0000000000000007 8000000000000000\n";
  spit(file, signed_file("cosmos-gemm-tune 1\n" + id + entry));
  auto r = read_tune_cache(file, kIdentity);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0], sample()[1]);
  struct Case {
    const char* what;
    std::string body;
    const char* code;
  };
  const Case cases[] = {
      {"another version", "cosmos-gemm-tune 2\n" + id + entry, "tune_cache.stale"},
      {"a short line", "cosmos-gemm-tune 1\n" + id + "512 37888 3584\n", "tune_cache.corrupt"},
      {"a word that is not hex", "cosmos-gemm-tune 1\n" + id + "512 37888 3584 0 3 3 1 000000000000000g " +
                                     entry.substr(entry.find("0000000000000002")),
       "tune_cache.corrupt"},
      {"a word too many", "cosmos-gemm-tune 1\n" + id + entry.substr(0, entry.size() - 1) + " 0000000000000009\n",
       "tune_cache.corrupt"},
      {"another magic", "cosmos-quant-cache 1\n" + id + entry, "tune_cache.corrupt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    spit(file, signed_file(c.body));
    r = read_tune_cache(file, kIdentity);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, c.code);
  }
}

TEST_F(TuneCache, AWriteThatCannotHappenLeavesNothing) {
  fs::create_directories(dir_);
  const fs::path blocker = dir_ / "not_a_dir";
  spit(blocker, "x");
  const fs::path file = tune_cache_path(blocker / "cache", kIdentity);
  auto st = write_tune_cache(file, kIdentity, sample());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, "file.write");
  EXPECT_FALSE(fs::exists(file));
}

// The decode tuning file shares the GEMM file's directory handling, so it shares the fixture.
using DecodeTune = TuneCache;

const std::string kDecodeIdentity = "NVIDIA H200, cc 9.0, 132 SMs, q4_k_m, plans 3f";

DecodeTuneRecord decode_sample() {
  DecodeTuneRecord r;
  r.spec = "q4k:rows=8,split=2;q6k:rows=4";
  // Doubles with no short exact decimal form: printing with too little precision changes them.
  r.depths = {{1, 1612.3456789, 0.1}, {4096, 2.0 / 3.0, 1e-300}, {32768, 123456789.98765432, 1612.3456789 * 3}};
  return r;
}

TEST_F(DecodeTune, RoundTripsTheSpecAndEveryDoubleExactly) {
  const fs::path file = decode_tune_path(dir_ / "sub", kDecodeIdentity);
  ASSERT_TRUE(write_decode_tune(file, kDecodeIdentity, decode_sample()));
  auto back = read_decode_tune(file, kDecodeIdentity);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, decode_sample());
  EXPECT_EQ(slurp(file).rfind("cosmos-decode-tune 1\nidentity " + kDecodeIdentity + "\nspec " + decode_sample().spec + "\n", 0), 0u);

  // The automatic plan won: the empty spec, written as "-", with or without depths.
  DecodeTuneRecord automatic = decode_sample();
  automatic.spec.clear();
  for (const std::size_t n : {std::size_t{3}, std::size_t{0}}) {
    SCOPED_TRACE(n);
    automatic.depths.resize(n);
    ASSERT_TRUE(write_decode_tune(file, kDecodeIdentity, automatic));
    EXPECT_NE(slurp(file).find("\nspec -\n"), std::string::npos);
    back = read_decode_tune(file, kDecodeIdentity);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, automatic);
  }
}

TEST_F(DecodeTune, FileNameDependsOnTheIdentityAndDiffersFromTheGemmFile) {
  EXPECT_EQ(decode_tune_path(dir_, kDecodeIdentity), decode_tune_path(dir_, kDecodeIdentity));
  EXPECT_NE(decode_tune_path(dir_, kDecodeIdentity), decode_tune_path(dir_, kDecodeIdentity + " "));
  EXPECT_NE(decode_tune_path(dir_, kDecodeIdentity), tune_cache_path(dir_, kDecodeIdentity));
  EXPECT_EQ(decode_tune_path(dir_, kDecodeIdentity).parent_path(), dir_);
  EXPECT_EQ(decode_tune_path(dir_, kDecodeIdentity).filename().string().rfind("decode-", 0), 0u);
}

TEST_F(DecodeTune, MissingStaleAndCorruptFiles) {
  const fs::path file = decode_tune_path(dir_, kDecodeIdentity);
  auto r = read_decode_tune(file, kDecodeIdentity);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, "tune_cache.missing");

  ASSERT_TRUE(write_decode_tune(file, kDecodeIdentity, decode_sample()));
  r = read_decode_tune(file, "another GPU");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, "tune_cache.stale");
  // Neither reader takes the other kind's file, even for the same identity.
  auto gemm = read_tune_cache(file, kDecodeIdentity);
  ASSERT_FALSE(gemm);
  EXPECT_EQ(gemm.error().code, "tune_cache.corrupt");
  const fs::path gemm_file = tune_cache_path(dir_, kDecodeIdentity);
  ASSERT_TRUE(write_tune_cache(gemm_file, kDecodeIdentity, sample()));
  r = read_decode_tune(gemm_file, kDecodeIdentity);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, "tune_cache.corrupt");

  const std::string good = slurp(file);
  std::string flipped = good;
  flipped[flipped.find("1612.3456789")] = '2';  // one timing changed
  const std::pair<const char*, std::string> cases[] = {
      {"one byte changed", flipped},
      {"truncated", good.substr(0, good.size() / 2)},
      {"checksum line cut off", good.substr(0, good.rfind("xxh3 "))},
      {"empty", ""},
  };
  for (const auto& [what, text] : cases) {
    SCOPED_TRACE(what);
    spit(file, text);
    r = read_decode_tune(file, kDecodeIdentity);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "tune_cache.corrupt");
  }
}

TEST_F(DecodeTune, VersionAndLinesBehindAValidChecksum) {
  fs::create_directories(dir_);
  const fs::path file = decode_tune_path(dir_, kDecodeIdentity);
  const std::string header = "cosmos-decode-tune 1\nidentity " + kDecodeIdentity + "\n";
  const std::string depth = "depth 4096 1612.3456789 0.1\n";
  spit(file, signed_file(header + "spec q4k:rows=8\n" + depth));
  auto r = read_decode_tune(file, kDecodeIdentity);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (DecodeTuneRecord{"q4k:rows=8", {{4096, 1612.3456789, 0.1}}}));

  struct Case {
    const char* what;
    std::string body;
    const char* code;
  };
  const Case cases[] = {
      {"another version", "cosmos-decode-tune 2\nidentity " + kDecodeIdentity + "\nspec -\n" + depth, "tune_cache.stale"},
      {"another identity", "cosmos-decode-tune 1\nidentity another GPU\nspec -\n" + depth, "tune_cache.stale"},
      {"another magic", "cosmos-gemm-tune 1\nidentity " + kDecodeIdentity + "\nspec -\n" + depth, "tune_cache.corrupt"},
      {"no spec line", header + depth, "tune_cache.corrupt"},
      {"nothing after the identity", header, "tune_cache.corrupt"},
      {"an empty spec", header + "spec \n" + depth, "tune_cache.corrupt"},
      {"a spec with a space", header + "spec a b\n" + depth, "tune_cache.corrupt"},
      {"a second spec line", header + "spec -\n" + depth + "spec -\n", "tune_cache.corrupt"},
      {"an unknown line", header + "spec -\n" + depth + "width 4096 1 2\n", "tune_cache.corrupt"},
      {"an empty line", header + "spec -\n\n" + depth, "tune_cache.corrupt"},
      {"a bad number", header + "spec -\ndepth 4096 1612.34x 0.1\n", "tune_cache.corrupt"},
      {"a depth that is not an integer", header + "spec -\ndepth 4096.5 1612.3 0.1\n", "tune_cache.corrupt"},
      {"a number missing", header + "spec -\ndepth 4096 1612.3\n", "tune_cache.corrupt"},
      {"a number too many", header + "spec -\ndepth 4096 1612.3 0.1 7\n", "tune_cache.corrupt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    spit(file, signed_file(c.body));
    r = read_decode_tune(file, kDecodeIdentity);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, c.code);
  }
}

TEST_F(DecodeTune, ASpecTheFileCannotHoldIsRefusedAndNothingIsWritten) {
  const fs::path fresh = decode_tune_path(dir_ / "fresh", kDecodeIdentity);
  const fs::path file = decode_tune_path(dir_, kDecodeIdentity);
  ASSERT_TRUE(write_decode_tune(file, kDecodeIdentity, decode_sample()));
  const std::string before = slurp(file);
  // "-" would read back as the automatic plan.
  for (const char* spec : {"q4k:rows=8 split=2", "q4k:rows=8\tsplit=2", "q4k:rows=8\nsplit=2", " ", "-"}) {
    SCOPED_TRACE(spec);
    DecodeTuneRecord bad = decode_sample();
    bad.spec = spec;
    for (const fs::path& target : {fresh, file}) {
      auto st = write_decode_tune(target, kDecodeIdentity, bad);
      ASSERT_FALSE(st);
      EXPECT_EQ(st.error().code, "tune_cache.spec");
      EXPECT_EQ(st.error().category, ErrorCategory::bad_input);
    }
    EXPECT_FALSE(fs::exists(fresh.parent_path()));
    EXPECT_EQ(slurp(file), before);
  }
}

TEST_F(DecodeTune, AWriteThatCannotHappenLeavesNothing) {
  fs::create_directories(dir_);
  const fs::path blocker = dir_ / "not_a_dir";
  spit(blocker, "x");
  const fs::path file = decode_tune_path(blocker / "cache", kDecodeIdentity);
  auto st = write_decode_tune(file, kDecodeIdentity, decode_sample());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, "file.write");
  EXPECT_EQ(st.error().category, ErrorCategory::io);
  EXPECT_FALSE(fs::exists(file));
  // No temporary file either: the blocker is all there is.
  std::size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) n += entry.path() != blocker;
  EXPECT_EQ(n, 0u);
}

}  // namespace
}  // namespace cosmos
