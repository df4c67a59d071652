// cosmos-cli end to end: outputs of each subcommand, and errors as messages with exit codes 1..127.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int code = -1;
  std::string out, err;
};

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("cosmos_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  // Runs cosmos-cli with `args` (shell-quoted by the caller) and optional stdin text.
  static CliRun cli(const std::string& args, const std::string& stdin_text = "") {
    const fs::path in = dir_ / "stdin.txt", out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    std::ofstream(in, std::ios::binary) << stdin_text;
    const std::string cmd = std::string("'") + COSMOS_CLI_PATH + "' --log-file '" + (dir_ / "log.txt").string() +
                            "' " + args + " <'" + in.string() + "' >'" + out.string() + "' 2>'" + err.string() + "'";
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read(out);
    r.err = read(err);
    return r;
  }

  static std::string tok() { return std::string("--tokenizer '") + COSMOS_TEST_TOKENIZER + "'"; }

  static fs::path tiny_model() {
    const fs::path m = dir_ / "tiny";
    if (!fs::exists(m / "config.json")) {
      CliRun r = cli("make-test-model --preset tiny --seed 1 --shards 2 -q --out '" + m.string() + "' " + tok());
      EXPECT_EQ(r.code, 0) << r.err;
    }
    return m;
  }

  static inline fs::path dir_;
};

TEST_F(Cli, TokenizeTextAndStdinAndDecode) {
  ASSERT_TRUE(fs::exists(COSMOS_TEST_TOKENIZER)) << "run packaging/setup.sh";
  CliRun a = cli("tokenize " + tok() + " --text 'Hello world'");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, "[9707,1879]\n");
  CliRun b = cli("tokenize " + tok(), "Hello world");
  EXPECT_EQ(b.out, a.out);
  CliRun c = cli("tokenize " + tok() + " --decode", "[9707, 1879]");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, "Hello world");
  CliRun d = cli("tokenize " + tok() + " --text '<|im_end|>'");
  EXPECT_EQ(d.out, "[151645]\n");
  CliRun e = cli("tokenize " + tok() + " --no-special --text '<|im_end|>'");
  EXPECT_NE(e.out, "[151645]\n");
}

TEST_F(Cli, ChatPromptPrintsPromptAndIds) {
  std::ofstream(dir_ / "m.json") << R"([{"role":"user","content":"Hello world"}])";
  CliRun r = cli("chat-prompt " + tok() + " --messages '" + (dir_ / "m.json").string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt"], "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                         "Hello world<|im_end|>\n<|im_start|>assistant\n");
  const auto ids = j["ids"].get<std::vector<int>>();
  ASSERT_GT(ids.size(), 10u);
  EXPECT_EQ(ids.front(), 151644);  // <|im_start|>
  EXPECT_EQ(ids.back(), 198);      // "\n"
}

TEST_F(Cli, InspectReportsShapeAndEstimates) {
  const fs::path m = tiny_model();
  CliRun r = cli("inspect --json --context 1024 --model '" + m.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["text"]["layers"], 2);
  EXPECT_EQ(j["text"]["vocab_size"], 152064);
  EXPECT_EQ(j["shards"], 2);
  EXPECT_EQ(j["layout"], "original");
  EXPECT_EQ(j["tokenizer"]["kind"], "bpe");
  for (const char* p : {"bf16", "fp16", "fp8", "int8", "int4"}) {
    ASSERT_TRUE(j["estimates"].contains(p)) << p;
    // tiny: 2 layers x (K+V) x 2 KV heads x 16 dims x 2 bytes x 1024 tokens
    EXPECT_EQ(j["estimates"][p]["kv_cache"], 2 * 2 * 2 * 16 * 2 * 1024);
  }
  EXPECT_GT(j["estimates"]["bf16"]["weights"].get<double>(), j["estimates"]["int4"]["weights"].get<double>());
  CliRun human = cli("inspect --model '" + m.string() + "'");
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("int4"), std::string::npos);
}

struct ErrorRow {
  const char* name;
  const char* args;
  const char* stdin_text;
  const char* mentions;
};

class CliErrors : public Cli, public ::testing::WithParamInterface<ErrorRow> {};

TEST_P(CliErrors, AreMessagesWithSmallExitCodes) {
  const ErrorRow& row = GetParam();
  std::string args = row.args;
  for (auto [key, value] : {std::pair{std::string("$TOK"), tok()}, std::pair{std::string("$DIR"), dir_.string()}}) {
    for (auto pos = args.find(key); pos != std::string::npos; pos = args.find(key)) args.replace(pos, key.size(), value);
  }
  CliRun r = cli(args, row.stdin_text);
  EXPECT_GT(r.code, 0) << row.name;
  EXPECT_LT(r.code, 128) << row.name;
  EXPECT_NE((r.err + r.out).find(row.mentions), std::string::npos) << row.name << ": " << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Rows, CliErrors,
    ::testing::Values(
        ErrorRow{"no_subcommand", "", "", "subcommand"},
        ErrorRow{"missing_tokenizer_file", "tokenize --tokenizer /nonexistent/tokenizer.json --text a", "",
                 "/nonexistent/tokenizer.json"},
        ErrorRow{"no_source", "tokenize --text a", "", "--tokenizer"},
        ErrorRow{"decode_not_json", "tokenize $TOK --decode", "hello", "JSON array"},
        ErrorRow{"decode_bad_id", "tokenize $TOK --decode", "[1, 99999999]", "99999999"},
        ErrorRow{"messages_missing", "chat-prompt $TOK --messages $DIR/none.json", "", "none.json"},
        ErrorRow{"messages_bad_role", "chat-prompt $TOK --messages -", "[{\"role\":\"bot\",\"content\":\"x\"}]", "bot"},
        ErrorRow{"inspect_no_folder", "inspect --model $DIR/no_such_model", "", "no_such_model"},
        ErrorRow{"inspect_no_config", "inspect --model $DIR", "", "config.json"},
        ErrorRow{"bad_preset", "make-test-model --preset huge --seed 1 --out $DIR/x", "", "huge"}),
    [](const auto& row) { return std::string(row.param.name); });

}  // namespace
