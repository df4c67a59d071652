// safetensors: writer -> reader round trips, and one test per malformed-header error code.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "cosmos/mapped_file.h"
#include "cosmos/safetensors.h"
#include "temp_dir.h"

namespace cosmos {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

using Bytes = std::vector<std::byte>;

Bytes le64(std::uint64_t v) {
  Bytes b(8);
  for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  return b;
}

// 8-byte prefix + header text + `data_size` data bytes (0, 1, 2, ...).
Bytes craft(const std::string& header, std::size_t data_size) {
  Bytes b = le64(header.size());
  for (char c : header) b.push_back(static_cast<std::byte>(c));
  for (std::size_t i = 0; i < data_size; ++i) b.push_back(static_cast<std::byte>(i & 0xff));
  return b;
}

// Prefix claims `claimed` header bytes; the file holds `actual` bytes after the prefix.
Bytes craft_length(std::uint64_t claimed, std::size_t actual) {
  // (Built whole and then the prefix copied in: le64() + resize() draws a false -Warray-bounds
  // from GCC 12's inlined vector growth at -O2.)
  Bytes b(8 + actual, std::byte{' '});
  const Bytes prefix = le64(claimed);
  std::copy(prefix.begin(), prefix.end(), b.begin());
  return b;
}

void write_bytes(const fs::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

Bytes read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Bytes b(c.size());
  std::transform(c.begin(), c.end(), b.begin(), [](char x) { return static_cast<std::byte>(x); });
  return b;
}

Bytes pattern(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<std::byte>(rng() & 0xff);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Malformed inputs: each yields its exact code, and the message names the file (and the tensor).

struct BadCase {
  const char* name;
  Bytes bytes;
  const char* code;
  const char* tensor;  // must appear in the message ("" if the error is not about one tensor)
};

std::string tensor_json(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return R"({"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}";
}

// A file with one tensor "w" and `data_size` data bytes.
Bytes single(const std::string& dtype, const std::string& shape, const std::string& offsets, std::size_t data_size) {
  return craft(R"({"w":)" + tensor_json(dtype, shape, offsets) + "}", data_size);
}

std::vector<BadCase> bad_cases() {
  const std::string big = std::to_string(1ull << 32);
  return {
      {"empty_file", Bytes{}, "safetensors.too_small", ""},
      {"seven_bytes", Bytes(7, std::byte{0}), "safetensors.too_small", ""},
      {"length_past_end", craft_length(100, 10), "safetensors.header_length", ""},
      {"length_one_past_end", craft_length(11, 10), "safetensors.header_length", ""},
      {"length_huge", craft_length(~0ull, 16), "safetensors.header_length", ""},
      {"length_2_pow_63", craft_length(1ull << 63, 16), "safetensors.header_length", ""},
      {"length_over_100mb", craft_length(100'000'001ull, 64), "safetensors.header_length", ""},
      {"json_empty_header", craft("", 0), "safetensors.header_json", ""},
      {"json_invalid", craft("{not json", 0), "safetensors.header_json", ""},
      {"json_truncated", craft(R"({"a":{"dtype":"F32")", 0), "safetensors.header_json", ""},
      {"json_array", craft("[1,2]", 0), "safetensors.header_json", ""},
      {"json_string", craft(R"("x")", 0), "safetensors.header_json", ""},
      {"json_trailing_garbage", craft("{} x", 0), "safetensors.header_json", ""},
      {"json_bad_utf8", craft("{\"a\xff\":{}}", 0), "safetensors.header_json", ""},
      {"json_nul_padding", craft(std::string("{}\0\0", 4), 0), "safetensors.header_json", ""},
      {"json_nul_then_junk", craft(std::string("{}\0junk", 7), 0), "safetensors.header_json", ""},
      {"json_too_deep", craft(std::string(5000, '['), 0), "safetensors.header_json", ""},
      {"entry_not_object", craft(R"({"w":5})", 0), "safetensors.tensor_entry", "w"},
      {"entry_missing_dtype", craft(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4), "safetensors.tensor_entry", "w"},
      {"entry_missing_shape", craft(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4), "safetensors.tensor_entry", "w"},
      {"entry_missing_offsets", craft(R"({"w":{"dtype":"F32","shape":[1]}})", 4), "safetensors.tensor_entry", "w"},
      {"entry_dtype_number", craft(R"({"w":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})", 4),
       "safetensors.tensor_entry", "w"},
      {"entry_shape_not_array", single("F32", "4", "[0,4]", 4), "safetensors.tensor_entry", "w"},
      {"entry_shape_float", single("F32", "[1.0]", "[0,4]", 4), "safetensors.tensor_entry", "w"},
      {"entry_shape_string", single("F32", R"(["1"])", "[0,4]", 4), "safetensors.tensor_entry", "w"},
      {"entry_shape_negative", single("F32", "[-1]", "[0,4]", 4), "safetensors.tensor_entry", "w"},
      {"entry_shape_overflow", single("U8", "[" + big + "," + big + "," + big + "]", "[0,4]", 4),
       "safetensors.tensor_entry", "w"},
      {"entry_dim_over_int64", single("U8", "[9223372036854775808]", "[0,4]", 4),
       "safetensors.tensor_entry", "w"},
      {"entry_dim_beyond_uint64", single("U8", "[99999999999999999999999]", "[0,4]", 4),
       "safetensors.tensor_entry", "w"},
      {"entry_bytes_overflow", single("F32", "[4611686018427387904]", "[0,4]", 4),
       "safetensors.tensor_entry", "w"},
      {"entry_offsets_one", single("F32", "[1]", "[4]", 4), "safetensors.tensor_entry", "w"},
      {"entry_offsets_three", single("F32", "[1]", "[0,4,8]", 4), "safetensors.tensor_entry", "w"},
      {"entry_offsets_negative", single("F32", "[1]", "[-4,0]", 4), "safetensors.tensor_entry", "w"},
      {"entry_offsets_float", single("F32", "[1]", "[0,4.0]", 4), "safetensors.tensor_entry", "w"},
      {"entry_offsets_not_array", single("F32", "[1]", R"({"a":0})", 4), "safetensors.tensor_entry", "w"},
      {"metadata_not_object", craft(R"({"__metadata__":[1]})", 0), "safetensors.tensor_entry", "__metadata__"},
      {"metadata_value_number", craft(R"({"__metadata__":{"format":1}})", 0), "safetensors.tensor_entry", "__metadata__"},
      {"dtype_unknown", single("F128", "[1]", "[0,16]", 16), "safetensors.dtype", "w"},
      {"dtype_lowercase", single("bf16", "[1]", "[0,2]", 2), "safetensors.dtype", "w"},
      {"size_mismatch_short", single("F32", "[2]", "[0,4]", 8), "safetensors.size_mismatch", "w"},
      {"size_mismatch_long", single("BF16", "[2,2]", "[0,16]", 16), "safetensors.size_mismatch", "w"},
      {"offsets_begin_after_end", single("F32", "[1]", "[8,4]", 8), "safetensors.offsets", "w"},
      {"offsets_beyond_with_gap", craft(R"({"a":)" + tensor_json("F32", "[1]", "[0,4]") + R"(,"b":)" +
                                            tensor_json("F32", "[1]", "[8,12]") + "}", 4),
       "safetensors.offsets", "b"},
      {"offsets_beyond_gap_at_start", single("F32", "[1]", "[4,8]", 4), "safetensors.offsets", "w"},
      {"offsets_zero_size_beyond", single("F32", "[0]", "[100,100]", 0), "safetensors.offsets", "w"},
      {"overlap_partial", craft(R"({"a":)" + tensor_json("F32", "[2]", "[0,8]") + R"(,"b":)" +
                                    tensor_json("F32", "[2]", "[4,12]") + "}", 12),
       "safetensors.overlap", "b"},
      {"overlap_identical", craft(R"({"a":)" + tensor_json("F32", "[1]", "[0,4]") + R"(,"b":)" +
                                      tensor_json("F32", "[1]", "[0,4]") + "}", 4),
       "safetensors.overlap", "a"},
      {"overlap_contained", craft(R"({"a":)" + tensor_json("U8", "[16]", "[0,16]") + R"(,"b":)" +
                                      tensor_json("U8", "[4]", "[4,8]") + "}", 16),
       "safetensors.overlap", "b"},
      {"truncated_mid_tensor", craft(R"({"a":)" + tensor_json("F32", "[1]", "[0,4]") + R"(,"b":)" +
                                         tensor_json("F32", "[1]", "[4,8]") + "}", 6),
       "safetensors.truncated", "b"},
      {"truncated_no_data", single("BF16", "[8]", "[0,16]", 0), "safetensors.truncated", "w"},
  };
}

class MalformedSafetensors : public ::testing::TestWithParam<BadCase> {};

TEST_P(MalformedSafetensors, ExactErrorCodeNamingFileAndTensor) {
  const BadCase& c = GetParam();
  // An exact-size heap copy, so that a sanitizer build catches any read past the end.
  const Bytes copy = c.bytes;
  const auto r = parse_safetensors(copy, "bad-file.safetensors");
  ASSERT_FALSE(r.ok()) << c.name;
  EXPECT_EQ(r.error().code, c.code) << r.error().message;
  EXPECT_EQ(r.error().category, ErrorCategory::bad_input);
  EXPECT_NE(r.error().message.find("bad-file.safetensors"), std::string::npos) << r.error().message;
  if (*c.tensor) {
    EXPECT_NE(r.error().message.find(c.tensor), std::string::npos) << r.error().message;
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodes, MalformedSafetensors, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& i) { return std::string(i.param.name); });

TEST(Safetensors, JsonErrorMessageIsPlainText) {
  // The parser's excerpt of the bad bytes must not carry invalid UTF-8 into the message.
  const auto r = parse_safetensors(craft("{\"a\xff\xfe\":{}}", 0), "u.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "safetensors.header_json");
  for (char c : r.error().message) EXPECT_LT(static_cast<unsigned char>(c), 0x80) << r.error().message;
}

TEST(Safetensors, TruncatedMessageGivesBothSizes) {
  // Header describes 8 data bytes; the file has 6.
  const Bytes b = craft(R"({"a":)" + tensor_json("F32", "[1]", "[0,4]") + R"(,"b":)" +
                            tensor_json("F32", "[1]", "[4,8]") + "}", 6);
  const auto r = parse_safetensors(b, "t.safetensors");
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.error().code, "safetensors.truncated");
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("describes 8 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("has " + std::to_string(b.size()) + " bytes"), std::string::npos) << m;
}

// ---------------------------------------------------------------------------------------------
// Well-formed inputs.

TEST(Safetensors, AllDTypesRoundTripByteExact) {
  TempDir dir;
  const fs::path p = dir.path() / "all.safetensors";
  struct Spec {
    const char* name;
    DType dtype;
    std::vector<std::int64_t> shape;
  };
  const std::vector<Spec> specs = {
      {"w.bf16", DType::bf16, {3, 5}}, {"w.f16", DType::f16, {7}},     {"w.f32", DType::f32, {2, 3, 4}},
      {"w.i8", DType::i8, {9}},        {"w.u8", DType::u8, {1, 13}},    {"w.f8", DType::f8_e4m3, {5, 3}},
  };
  std::vector<Bytes> datas;
  std::vector<TensorToWrite> ts;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::uint64_t n = 1;
    for (auto d : specs[i].shape) n *= static_cast<std::uint64_t>(d);
    datas.push_back(pattern(n * dtype_size(specs[i].dtype), static_cast<unsigned>(i) + 1));
  }
  for (std::size_t i = 0; i < specs.size(); ++i) ts.push_back({specs[i].name, specs[i].dtype, specs[i].shape, datas[i]});
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "héllo \"quoted\""}};
  ASSERT_TRUE(write_safetensors(p, ts, meta).ok());
  EXPECT_FALSE(fs::exists(dir.path() / "all.safetensors.tmp"));

  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->metadata(), meta);
  ASSERT_EQ(f->tensors().size(), specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    // tensors() is in file order, which is the writer's order.
    EXPECT_EQ(f->tensors()[i].name, specs[i].name);
    const TensorInfo* t = f->find(specs[i].name);
    ASSERT_NE(t, nullptr) << specs[i].name;
    EXPECT_EQ(t->dtype, specs[i].dtype);
    EXPECT_EQ(t->shape, specs[i].shape);
    EXPECT_EQ(t->nbytes, datas[i].size());
    EXPECT_EQ(t->numel() * dtype_size(t->dtype), t->nbytes);
    const auto d = f->data(*t);
    ASSERT_EQ(d.size(), datas[i].size());
    EXPECT_TRUE(std::equal(d.begin(), d.end(), datas[i].begin())) << specs[i].name;
  }
  EXPECT_EQ(f->find("absent"), nullptr);
  EXPECT_EQ(f->file_size(), fs::file_size(p));
  EXPECT_EQ(f->path(), p);
}

TEST(Safetensors, WriterAlignsDataStartToEightBytes) {
  TempDir dir;
  // Names of every length 1..16 move the header size through all residues mod 8.
  for (int len = 1; len <= 16; ++len) {
    // (Appended piecewise: "a" + std::string draws a false -Wrestrict from GCC 12 at -O2.)
    std::string name = "a";
    name += std::to_string(len);
    name += ".safetensors";
    const fs::path p = dir.path() / name;
    const Bytes data = pattern(4, 7);
    const TensorToWrite t{std::string(static_cast<std::size_t>(len), 'x'), DType::f32, {1}, data};
    ASSERT_TRUE(write_safetensors(p, std::span(&t, 1)).ok());
    const Bytes b = read_bytes(p);
    const auto h = parse_safetensors(b, p.string());
    ASSERT_TRUE(h.ok()) << h.error().message;
    EXPECT_EQ(h->data_start % 8, 0u) << "name length " << len;
    ASSERT_EQ(h->tensors.size(), 1u);
    EXPECT_EQ(h->tensors[0].offset, h->data_start);
    EXPECT_EQ(b.size(), h->data_start + 4);
    // Padding is spaces (what the reference implementation writes) after the closing brace.
    std::size_t i = static_cast<std::size_t>(h->data_start);
    while (b[i - 1] == std::byte{' '}) --i;
    EXPECT_EQ(b[i - 1], std::byte{'}'}) << "name length " << len;
    EXPECT_LT(h->data_start - i, 8u) << "name length " << len;
  }
}

TEST(Safetensors, ZeroSizeAndScalarTensors) {
  TempDir dir;
  const fs::path p = dir.path() / "z.safetensors";
  const Bytes one = pattern(4, 3);
  const std::vector<TensorToWrite> ts = {
      {"empty", DType::bf16, {0, 16}, {}},
      {"scalar", DType::f32, {}, one},
      {"empty2", DType::f32, {4, 0}, {}},
  };
  ASSERT_TRUE(write_safetensors(p, ts).ok());
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const TensorInfo* e = f->find("empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->nbytes, 0u);
  EXPECT_EQ(e->numel(), 0u);
  EXPECT_EQ((std::vector<std::int64_t>{0, 16}), e->shape);
  EXPECT_TRUE(f->data(*e).empty());
  const TensorInfo* s = f->find("scalar");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->numel(), 1u);
  EXPECT_TRUE(s->shape.empty());
  const auto d = f->data(*s);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_TRUE(std::equal(d.begin(), d.end(), one.begin()));
}

TEST(Safetensors, OnlyZeroSizeTensorAndNoData) {
  const auto r = parse_safetensors(single("F32", "[0]", "[0,0]", 0), "z");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->tensors.size(), 1u);
}

TEST(Safetensors, AcceptsGapsTrailingBytesAndUnknownKeysInOffsetOrder) {
  // Documented leniency: a gap between tensors, bytes after the last one, extra keys in an entry.
  const std::string h = R"({"b":)" + tensor_json("U8", "[4]", "[8,12]") + R"(,"a":{"dtype":"U8","shape":[4],)" +
                        R"("data_offsets":[0,4],"extra":true}})";
  const Bytes b = craft(h, 20);
  const auto r = parse_safetensors(b, "g");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->tensors.size(), 2u);
  EXPECT_EQ(r->tensors[0].name, "a");  // sorted by offset
  EXPECT_EQ(r->tensors[1].name, "b");
  EXPECT_EQ(r->data_start, 8 + h.size());
  EXPECT_EQ(r->tensors[1].offset, r->data_start + 8);
}

TEST(Safetensors, HeaderWithOnlyMetadata) {
  const auto r = parse_safetensors(craft(R"({"__metadata__":{"format":"pt"}} )", 0), "m");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->tensors.empty());
  EXPECT_EQ(r->metadata.at("format"), "pt");
}

TEST(Safetensors, WriterRejectsInconsistentTensors) {
  TempDir dir;
  const fs::path p = dir.path() / "w.safetensors";
  const Bytes three(3);
  const TensorToWrite bad_size{"w", DType::f32, {1}, three};
  auto r = write_safetensors(p, std::span(&bad_size, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "safetensors.write");
  EXPECT_NE(r.error().message.find(p.string()), std::string::npos);
  EXPECT_FALSE(fs::exists(p));

  const Bytes four(4);
  const std::vector<TensorToWrite> dup = {{"w", DType::f32, {1}, four}, {"w", DType::f32, {1}, four}};
  EXPECT_FALSE(write_safetensors(p, dup).ok());
  const TensorToWrite reserved{"__metadata__", DType::f32, {1}, four};
  EXPECT_FALSE(write_safetensors(p, std::span(&reserved, 1)).ok());
  const TensorToWrite negative{"w", DType::u8, {-4}, four};
  EXPECT_FALSE(write_safetensors(p, std::span(&negative, 1)).ok());
}

TEST(Safetensors, WriterReportsDiskErrorsWithPath) {
  TempDir dir;
  const fs::path p = dir.path() / "no-such-folder" / "w.safetensors";
  const Bytes four(4);
  const TensorToWrite t{"w", DType::f32, {1}, four};
  const auto r = write_safetensors(p, std::span(&t, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().category, ErrorCategory::io);
  EXPECT_EQ(r.error().code, "file.write");
  EXPECT_NE(r.error().message.find(p.string()), std::string::npos) << r.error().message;
}

TEST(Safetensors, WriterReplacesExistingFile) {
  TempDir dir;
  const fs::path p = dir.path() / "w.safetensors";
  write_bytes(p, Bytes(1000, std::byte{1}));
  const Bytes four = pattern(4, 9);
  const TensorToWrite t{"w", DType::f32, {1}, four};
  ASSERT_TRUE(write_safetensors(p, std::span(&t, 1)).ok());
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_LT(f->file_size(), 1000u);
}

// ---------------------------------------------------------------------------------------------
// Opening files.

TEST(SafetensorsFile, MissingFileIsBadInput) {
  TempDir dir;
  const fs::path p = dir.path() / "absent.safetensors";
  const auto r = SafetensorsFile::open(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "file.missing");
  EXPECT_EQ(r.error().category, ErrorCategory::bad_input);
  EXPECT_NE(r.error().message.find(p.string()), std::string::npos);
  EXPECT_NE(r.error().message.find("No such file"), std::string::npos) << r.error().message;
}

TEST(SafetensorsFile, DirectoryIsFileOpenError) {
  TempDir dir;
  const auto r = MappedFile::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "file.open");
  EXPECT_EQ(r.error().category, ErrorCategory::io);
  EXPECT_NE(r.error().message.find(dir.path().string()), std::string::npos);
}

TEST(SafetensorsFile, UnopenableFileIsIoError) {
  TempDir dir;
  // A name longer than NAME_MAX (ENAMETOOLONG) fails for every user, root included.
  const fs::path long_name = dir.path() / (std::string(300, 'x') + ".safetensors");
  auto r = MappedFile::open(long_name);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "file.open");
  EXPECT_EQ(r.error().category, ErrorCategory::io);
  EXPECT_NE(r.error().message.find(long_name.string()), std::string::npos);

  // Permissions: root reads files regardless, so only check them as an ordinary user.
  if (::geteuid() != 0) {
    const fs::path p = dir.path() / "locked.safetensors";
    write_bytes(p, Bytes(16));
    fs::permissions(p, fs::perms::none);
    r = MappedFile::open(p);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, "file.open");
    EXPECT_EQ(r.error().category, ErrorCategory::io);
    EXPECT_NE(r.error().message.find(p.string()), std::string::npos);
    EXPECT_NE(r.error().message.find("ermission"), std::string::npos) << r.error().message;
  }
}

TEST(SafetensorsFile, EmptyFileMapsToEmptySpanAndIsTooSmall) {
  TempDir dir;
  const fs::path p = dir.path() / "empty.safetensors";
  write_bytes(p, {});
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->size(), 0u);
  EXPECT_TRUE(m->bytes().empty());
  const auto r = SafetensorsFile::open(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "safetensors.too_small");
  EXPECT_NE(r.error().message.find(p.string()), std::string::npos);
}

TEST(SafetensorsFile, MalformedFileErrorNamesPath) {
  TempDir dir;
  const fs::path p = dir.path() / "trunc.safetensors";
  write_bytes(p, single("BF16", "[8]", "[0,16]", 3));
  const auto r = SafetensorsFile::open(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "safetensors.truncated");
  EXPECT_NE(r.error().message.find(p.string()), std::string::npos) << r.error().message;
}

TEST(MappedFile, PrefaultReadMapsPagesSoReadingThemDoesNotFault) {
  TempDir dir;
  const fs::path p = dir.path() / "pages.bin";
  constexpr std::size_t kHalf = std::size_t{4} << 20;  // two halves of 4 MiB
  Bytes data(2 * kHalf);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7);
  write_bytes(p, data);
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::byte* base = m->bytes().data();
  volatile unsigned sink = 0;  // keeps the reads
  // Minor page faults while reading one byte per 4 KB of [begin, begin + kHalf).
  auto faults_reading = [&](const std::byte* begin) {
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    for (std::size_t i = 0; i < kHalf; i += 4096) sink = sink + static_cast<unsigned>(begin[i]);
    ::getrusage(RUSAGE_SELF, &after);
    return after.ru_minflt - before.ru_minflt;
  };
  if (!prefault_read(base, kHalf)) GTEST_SKIP() << "this kernel lacks MADV_POPULATE_READ (Linux 5.14)";
  const long prefaulted = faults_reading(base), plain = faults_reading(base + kHalf);
  EXPECT_LT(prefaulted, plain) << "prefaulted half: " << prefaulted << " faults, the other half: " << plain;
  // AddressSanitizer reads a shadow byte per 8 bytes read; its shadow pages fault on first touch
  // (4 MiB / 8 = 512 KiB = 128 pages), and those are not the file's.
#if defined(__SANITIZE_ADDRESS__)
  constexpr long kShadowPages = static_cast<long>(kHalf / 8 / 4096) + 1;
#else
  constexpr long kShadowPages = 0;
#endif
  EXPECT_LE(prefaulted, 2 + kShadowPages);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), m->bytes().begin()));  // the hint changes no byte
  EXPECT_TRUE(prefault_read(nullptr, 0));
}

TEST(MappedFile, MoveTransfersMapping) {
  TempDir dir;
  const fs::path p = dir.path() / "m.bin";
  const Bytes content = pattern(100, 5);
  write_bytes(p, content);
  auto r = MappedFile::open(p);
  ASSERT_TRUE(r.ok());
  MappedFile a = std::move(r.value());
  MappedFile b;
  b = std::move(a);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  ASSERT_EQ(b.size(), content.size());
  EXPECT_TRUE(std::equal(b.bytes().begin(), b.bytes().end(), content.begin()));
}

// ---------------------------------------------------------------------------------------------
// Fuzz-ish robustness: deterministic mutations of a valid file must give ok or an Error, never a
// crash; and any accepted header must describe tensors that lie inside the bytes.

TEST(Safetensors, RandomMutationsNeverCrash) {
  TempDir dir;
  const fs::path p = dir.path() / "seed.safetensors";
  const Bytes a = pattern(2 * 3 * 2, 1);
  const Bytes b = pattern(5 * 4, 2);
  const std::vector<TensorToWrite> ts = {
      {"model.embed_tokens.weight", DType::bf16, {2, 3}, a},
      {"model.norm.weight", DType::f32, {5}, b},
      {"empty", DType::u8, {0}, {}},
  };
  ASSERT_TRUE(write_safetensors(p, ts, {{"format", "pt"}}).ok());
  const Bytes seed = read_bytes(p);
  const auto h = parse_safetensors(seed, "seed");
  ASSERT_TRUE(h.ok());
  const std::size_t header_end = static_cast<std::size_t>(h->data_start);

  std::mt19937 rng(12345);
  const char interesting[] = "{}[]\":,-0123456789eE. \\\xff\x80";
  int accepted = 0;
  std::set<std::string> codes;
  for (int iter = 0; iter < 2000; ++iter) {
    Bytes m = seed;
    const int kind = static_cast<int>(rng() % 5);
    if (kind == 0) {  // flip bits in the header
      for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) {
        m[8 + rng() % (header_end - 8)] ^= static_cast<std::byte>(1u << (rng() % 8));
      }
    } else if (kind == 1) {  // write JSON-significant characters into the header
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) {
        m[8 + rng() % (header_end - 8)] = static_cast<std::byte>(interesting[rng() % (sizeof interesting - 1)]);
      }
    } else if (kind == 2) {  // truncate anywhere
      m.resize(rng() % (seed.size() + 1));
    } else if (kind == 3) {  // corrupt the length prefix
      m[rng() % 8] = static_cast<std::byte>(rng() & 0xff);
    } else {  // digits in the header changed (offsets and shapes) and maybe truncated
      for (std::size_t i = 8; i < header_end; ++i) {
        const char c = static_cast<char>(m[i]);
        if (c >= '0' && c <= '9' && rng() % 4 == 0) m[i] = static_cast<std::byte>('0' + rng() % 10);
      }
      if (rng() % 2) m.resize(header_end + rng() % (seed.size() - header_end + 1));
    }
    m.shrink_to_fit();
    const auto r = parse_safetensors(m, "mutant");
    if (r.ok()) {
      ++accepted;
      for (const auto& t : r->tensors) {
        ASSERT_LE(t.offset, m.size()) << "iteration " << iter;
        ASSERT_LE(t.nbytes, m.size() - t.offset) << "iteration " << iter;
        ASSERT_EQ(t.numel() * dtype_size(t.dtype), t.nbytes) << "iteration " << iter;
      }
    } else {
      codes.insert(r.error().code);
      ASSERT_TRUE(r.error().code.starts_with("safetensors.")) << r.error().code;
      ASSERT_NE(r.error().message.find("mutant"), std::string::npos) << r.error().message;
    }
  }
  // Some mutations stay valid (a flipped letter in a name or in the metadata, bytes cut from the
  // end of a file whose last tensor is empty...); most must be rejected.
  EXPECT_LT(accepted, 2000);
  // The mutations reach well past the length prefix into the per-tensor checks.
  std::string seen;
  for (const auto& c : codes) seen += c + " ";
  EXPECT_GE(codes.size(), 6u) << seen;
  EXPECT_TRUE(codes.count("safetensors.truncated")) << seen;
  EXPECT_TRUE(codes.count("safetensors.header_json")) << seen;
  std::printf("mutations: %d accepted; codes seen: %s\n", accepted, seen.c_str());
}

}  // namespace
}  // namespace cosmos
