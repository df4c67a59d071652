// cosmos-cli end to end: outputs of each subcommand, and errors as messages with exit codes 1..127.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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
  EXPECT_EQ(j["kv_cache_format"], "full");
  CliRun human = cli("inspect --model '" + m.string() + "'");
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("int4"), std::string::npos);
  EXPECT_NE(human.out.find("bf16 KV cache"), std::string::npos) << human.out;
  // The int8 cache: one byte per value and an fp32 scale per 16 values, weights unchanged.
  CliRun q = cli("inspect --json --context 1024 --kv-cache int8 --model '" + m.string() + "'");
  ASSERT_EQ(q.code, 0) << q.err;
  const auto jq = nlohmann::json::parse(q.out);
  EXPECT_EQ(jq["kv_cache_format"], "int8");
  for (const char* p : {"bf16", "int4"}) {
    EXPECT_EQ(jq["estimates"][p]["kv_cache"], 2 * 2 * 2 * (16 + 4) * 1024) << p;
    EXPECT_EQ(jq["estimates"][p]["weights"], j["estimates"][p]["weights"]) << p;
  }
  human = cli("inspect --kv-cache int8 --model '" + m.string() + "'");
  EXPECT_NE(human.out.find("int8 KV cache"), std::string::npos) << human.out;
}

TEST_F(Cli, GenerateGreedyJsonMatchesHuggingFaceAndStreamsText) {
  const fs::path m = tiny_model();
  // Golden prompt 1 of tests/data/tiny_golden.json, raw (no chat format), greedy.
  std::ifstream g(std::string(COSMOS_TEST_DATA_DIR) + "/tiny_golden.json");
  const auto golden = nlohmann::json::parse(g)["cases"][1];
  const std::string prompt = golden["prompt"];
  CliRun r = cli("generate --model '" + m.string() + "' --device auto --raw --prompt '" + prompt +
                 "' --temperature 0 --repetition-penalty 1 --max-tokens 10 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  auto want = golden["fp32"]["greedy"].get<std::vector<int>>();
  want.resize(10);
  const auto got = j["token_ids"].get<std::vector<int>>();
  // The golden run never stopped early; ours stops at <|im_end|> / <|endoftext|> if one comes first.
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
  EXPECT_EQ(j["stats"]["prompt_tokens"], golden["ids"].size());
  EXPECT_EQ(j["stats"]["generated_tokens"], got.size());
  EXPECT_TRUE(j.contains("reasoning") && j.contains("answer") && j.contains("text"));
  // --device auto: the CUDA backend where a GPU works, else the CPU with the reason on stderr.
  const bool on_cpu = j["stats"]["device"].get<std::string>().rfind("CPU", 0) == 0;
  if (on_cpu) {
    EXPECT_NE(r.err.find("using the CPU: "), std::string::npos) << "auto device note missing";
  }

  CliRun stream = cli("generate --model '" + m.string() + "' --device cpu --raw --prompt '" + prompt +
                      "' --temperature 0 --repetition-penalty 1 --max-tokens 10");
  ASSERT_EQ(stream.code, 0) << stream.err;
  EXPECT_EQ(stream.out, j["text"].get<std::string>() + "\n");
  EXPECT_NE(stream.err.find("generated"), std::string::npos);
}

// batch: one result per input line in input order; a bad line is reported with its number and the
// others run; a request's greedy tokens equal `generate`'s for the same prompt; exit code 1 when a
// line failed, and the output file is complete either way.
TEST_F(Cli, BatchRunsEveryGoodLineInOrderAndReportsBadOnes) {
  const fs::path m = tiny_model();
  const fs::path in = dir_ / "batch_in.jsonl", out = dir_ / "batch_out.jsonl";
  std::ofstream(in) << "{\"id\": \"first\", \"prompt\": \"Describe the scene.\", \"max_tokens\": 6}\n"
                    << "not json\n"
                    << "\n"
                    << "{\"id\": 3, \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 4}\n"
                    << "{\"id\": 4, \"prompt\": \"x\", \"top_p\": \"high\"}\n"
                    << "{\"prompt\": \"What next?\", \"max_tokens\": 5, \"temperature\": 0.8, \"seed\": 9}\n";
  CliRun r = cli("batch --model '" + m.string() + "' --device cpu --input '" + in.string() + "' --output '" +
                 out.string() + "' --temperature 0 --max-batch 2 --step-tokens 16");
  EXPECT_EQ(r.code, 1) << r.err;  // two lines failed
  EXPECT_NE(r.err.find("line 2: not a JSON object"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("line 5: \"top_p\" must be a number"), std::string::npos) << r.err;
  std::istringstream lines(read(out));
  std::vector<nlohmann::json> got;
  for (std::string l; std::getline(lines, l);) got.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(got.size(), 5u);  // the blank line gives none
  const int want_lines[] = {1, 2, 4, 5, 6};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[i]["line"], want_lines[i]);
  EXPECT_EQ(got[0]["id"], "first");
  EXPECT_EQ(got[2]["id"], 3);
  EXPECT_EQ(got[4]["id"], 6);  // no id: the line number
  EXPECT_TRUE(got[1].contains("error"));
  EXPECT_TRUE(got[3].contains("error"));
  for (const int i : {0, 2, 4}) {
    ASSERT_FALSE(got[i].contains("error")) << got[i].dump();
    EXPECT_TRUE(got[i].contains("text") && got[i].contains("reasoning") && got[i].contains("answer"));
    EXPECT_GT(got[i]["stats"]["prompt_tokens"].get<int>(), 0);
  }
  EXPECT_EQ(got[0]["token_ids"].size(), 6u);
  CliRun g = cli("generate --model '" + m.string() + "' --device cpu --prompt 'Describe the scene.' --temperature 0 "
                 "--max-tokens 6 --json");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(got[0]["token_ids"], nlohmann::json::parse(g.out)["token_ids"]);
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

// --precision auto says what it picked and why; quantized precisions run on the CPU.
TEST_F(Cli, GeneratePrecisionAutoAndQuantized) {
  const fs::path m = tiny_model();
  CliRun r = cli("generate --model '" + m.string() + "' --device cpu --precision auto --raw --temperature 0 --max-tokens 4 "
                 "--prompt hi --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("precision auto: bf16"), std::string::npos) << r.err;  // the tiny model fits anywhere
  EXPECT_NE(r.err.find("available on the host"), std::string::npos) << r.err;
  for (const char* p : {"int8", "fp8", "int4"}) {
    r = cli("generate --model '" + m.string() + "' --device cpu --precision " + p +
            " --raw --temperature 0 --max-tokens 4 --prompt hi --json");
    ASSERT_EQ(r.code, 0) << p << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["stats"]["precision"], p);
    EXPECT_EQ(j["token_ids"].size(), 4u);
  }
}

// --kv-cache int8 on the CPU: generate and bench say which cache ran, and its bytes are the int8
// cache's (tiny: 2 layers x K, V x 2 KV heads x (16 values + a 4-byte scale) per token).
TEST_F(Cli, GenerateAndBenchWithTheInt8KvCache) {
  const fs::path m = tiny_model();
  CliRun r = cli("generate --model '" + m.string() + "' --device cpu --kv-cache int8 --context 512 --raw --temperature 0 "
                 "--max-tokens 4 --prompt hi --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stats"]["kv_cache"], "int8");
  EXPECT_EQ(j["memory"]["kv_cache"], 512 * 2 * 2 * 2 * (16 + 4));
  EXPECT_EQ(j["token_ids"].size(), 4u);
  r = cli("bench --model '" + m.string() + "' --device cpu --kv-cache int8 --prompt-lens 8 --depth 0,40 --gen 4 --reps 1 "
          "--json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kv_cache"], "int8");
  EXPECT_DOUBLE_EQ(j["decode"][1]["kv_bytes_per_step"].get<double>(), 2.0 * 2 * 2 * (16 + 4) * (40 + 2.5));
}

TEST_F(Cli, LogitsWritesNpyOfEveryPosition) {
  const fs::path m = tiny_model();
  const fs::path out = dir_ / "logits.npy";
  CliRun r = cli("logits --model '" + m.string() + "' --device cpu --ids 9707,1879,0 --out '" + out.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string bytes = read(out);
  ASSERT_GE(bytes.size(), 128u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  const std::size_t header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_NE(bytes.find("'shape': (3, 152064)"), std::string::npos);
  EXPECT_EQ(bytes.size(), 10 + header_len + 3 * 152064 * 4);
}

TEST_F(Cli, BenchReportsEveryFigureAsJson) {
  const fs::path m = tiny_model();
  CliRun r = cli("bench --model '" + m.string() + "' --device cpu --prompt-lens 8,32 --depth 0,40 --gen 4 --reps 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["prefill"].size(), 2u);
  EXPECT_EQ(j["prefill"][1]["prompt_tokens"], 32);
  EXPECT_GT(j["prefill"][1]["tok_per_s"].get<double>(), 0.0);
  ASSERT_EQ(j["decode"].size(), 2u);
  EXPECT_EQ(j["decode"][1]["depth"], 40);
  EXPECT_GT(j["decode"][0]["tok_per_s"].get<double>(), 0.0);
  EXPECT_EQ(j["backend"], "cpu");
  // Bytes per decode step: every text matrix once, one embedding row (tiny: hidden 64).
  EXPECT_GT(j["bytes_per_decode_step"].get<double>(), 152064.0 * 64 * 2);
  EXPECT_GT(j["memory"]["weights"].get<double>(), 0.0);
  EXPECT_EQ(j["repetition_penalty"].get<double>(), 1.0);
  EXPECT_EQ(j["decode"][0]["steps_ran_ahead"].get<double>(), 0.0);  // the CPU backend runs no step ahead
  // GPU clocks are sampled for the CUDA backend only: nothing here, and no complaint about NVML.
  EXPECT_TRUE(j["decode"][0]["clocks"].is_null());
  EXPECT_EQ(j["clock_source"], "");
  EXPECT_EQ(j["clocks_unavailable"], "");
  // K/V read per step: the CPU cache's fp32 keys and values of every layer, over the timed steps'
  // mean context (depth 40, 4 steps: 41 ... 44 tokens; depth 0 starts from one token).
  const auto cfg = nlohmann::json::parse(read(m / "config.json"));
  const double kv_per_token = 4.0 * 2 * cfg["num_hidden_layers"].get<int>() * cfg["num_key_value_heads"].get<int>() *
                              (cfg["hidden_size"].get<int>() / cfg["num_attention_heads"].get<int>());
  EXPECT_DOUBLE_EQ(j["decode"][0]["kv_bytes_per_step"].get<double>(), kv_per_token * (1 + 2.5));
  EXPECT_DOUBLE_EQ(j["decode"][1]["kv_bytes_per_step"].get<double>(), kv_per_token * (40 + 2.5));
  // The second depth against the first: the bytes' bound and the measured ratio.
  const double step = j["bytes_per_decode_step"].get<double>();
  EXPECT_DOUBLE_EQ(j["decode"][0]["bytes_bound_vs_first"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["decode"][1]["bytes_bound_vs_first"].get<double>(),
                   (step + kv_per_token * 3.5) / (step + kv_per_token * 42.5));
  EXPECT_DOUBLE_EQ(j["decode"][1]["speed_vs_first"].get<double>(),
                   j["decode"][1]["tok_per_s"].get<double>() / j["decode"][0]["tok_per_s"].get<double>());
  EXPECT_NEAR(j["decode"][1]["pct_of_copy_with_kv"].get<double>(),
              j["decode"][1]["pct_of_copy"].get<double>() * (step + kv_per_token * 42.5) / step,
              1e-9 * j["decode"][1]["pct_of_copy_with_kv"].get<double>());
  CliRun text = cli("bench --model '" + m.string() + "' --device cpu --prompt-lens 8 --depth 0,40 --gen 4 --reps 1");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("of K/V ("), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("against depth 0: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("the bytes alone allow"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("SM clock"), std::string::npos) << text.out;
  EXPECT_EQ(j["settle_ms"], 0);
  // --settle-ms pauses before each depth's timed steps, then takes one step untimed (and says so in
  // the JSON).
  CliRun settled =
      cli("bench --model '" + m.string() + "' --device cpu --prompt-lens 8 --depth 0,40 --gen 4 --reps 1 --settle-ms 5 --json");
  ASSERT_EQ(settled.code, 0) << settled.err;
  const auto js = nlohmann::json::parse(settled.out);
  EXPECT_EQ(js["settle_ms"], 5);
  ASSERT_EQ(js["decode"].size(), 2u);
  EXPECT_GT(js["decode"][1]["tok_per_s"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(js["decode"][1]["kv_bytes_per_step"].get<double>(), kv_per_token * (40 + 1 + 2.5));  // + the untimed step
}

TEST_F(Cli, BenchDecodesWithARepetitionPenalty) {
  const fs::path m = tiny_model();
  CliRun r = cli("bench --model '" + m.string() +
                 "' --device cpu --prompt-lens 8 --depth 0 --gen 6 --reps 1 --repetition-penalty 1.05 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["repetition_penalty"].get<double>(), 1.05, 1e-6);
  EXPECT_GT(j["decode"][0]["tok_per_s"].get<double>(), 0.0);
}

// The app's default sampling (drawn, top-p, penalty) as a bench option: the draws are seeded, so
// the run is repeatable, and the settings are reported.
TEST_F(Cli, BenchDrawsTokensWithTheAppsSampling) {
  const fs::path m = tiny_model();
  CliRun r = cli("bench --model '" + m.string() +
                 "' --device cpu --prompt-lens 8 --depth 0 --gen 6 --reps 1 --temperature 0.6 --top-p 0.95"
                 " --repetition-penalty 1.05 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["temperature"].get<double>(), 0.6, 1e-6);
  EXPECT_NEAR(j["top_p"].get<double>(), 0.95, 1e-6);
  EXPECT_GT(j["decode"][0]["tok_per_s"].get<double>(), 0.0);
  CliRun text = cli("bench --model '" + m.string() +
                    "' --device cpu --prompt-lens 8 --depth 0 --gen 2 --reps 1 --temperature 0.6 --top-p 0.95");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("drawn at temperature 0.60, top-p 0.95"), std::string::npos) << text.out;
}

// --batch: decode steps of several sequences at once; alone it skips the single-sequence runs.
TEST_F(Cli, BenchMeasuresBatchedDecode) {
  const fs::path m = tiny_model();
  CliRun r = cli("bench --model '" + m.string() +
                 "' --device cpu --batch 1,3,5 --batch-prompt 6 --batch-gen 4 --reps 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["prefill"].empty());
  EXPECT_TRUE(j["decode"].empty());
  ASSERT_EQ(j["batch"].size(), 3u);
  const int sizes[] = {1, 3, 5};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& row = j["batch"][i];
    EXPECT_EQ(row["batch"].get<int>(), sizes[i]);
    EXPECT_EQ(row["context_at_end"], 6 + 2 + 4);
    EXPECT_GT(row["per_stream_tok_per_s"].get<double>(), 0.0);
    EXPECT_NEAR(row["tok_per_s"].get<double>(), row["batch"].get<int>() * row["per_stream_tok_per_s"].get<double>(),
                1e-6 * row["tok_per_s"].get<double>());
  }
  CliRun text = cli("bench --model '" + m.string() + "' --device cpu --batch 1,2 --batch-prompt 4 --batch-gen 2 --reps 1");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("% of batch 1"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("decode at depth"), std::string::npos) << text.out;
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
  tiny_model();  // rows that need a valid model use $DIR/tiny
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
        ErrorRow{"bad_preset", "make-test-model --preset huge --seed 1 --out $DIR/x", "", "huge"},
        ErrorRow{"generate_no_model", "generate --model $DIR/none --prompt hi", "", "none"},
        ErrorRow{"generate_no_prompt", "generate --model $DIR/tiny", "", "--prompt"},
        ErrorRow{"generate_bad_top_p", "generate --model $DIR/tiny --prompt hi --top-p 2", "", "top_p"},
        ErrorRow{"generate_fp16_cpu", "generate --model $DIR/tiny --prompt hi --device cpu --precision fp16", "", "fp16"},
        ErrorRow{"generate_bad_kv_cache", "generate --model $DIR/tiny --prompt hi --kv-cache fp8", "", "fp8"},
        ErrorRow{"bench_no_model", "bench --depth 0", "", "--model DIR or --random"},
        ErrorRow{"bench_bad_depth", "bench --random tiny --depth 1,x", "", "\"x\""},
        ErrorRow{"bench_bad_batch", "bench --random tiny --batch 8,y", "", "\"y\""},
        ErrorRow{"bench_bad_penalty", "bench --random tiny --repetition-penalty 0", "", "--repetition-penalty"},
        ErrorRow{"bench_bad_top_p", "bench --random tiny --top-p 1.5", "", "--top-p"},
        ErrorRow{"bench_bad_temperature", "bench --random tiny --temperature -1", "", "--temperature"},
        ErrorRow{"bench_bad_settle", "bench --random tiny --settle-ms -5", "", "--settle-ms"},
        ErrorRow{"tune_no_model", "tune --precision int8", "", "--model DIR or --random"},
        ErrorRow{"tune_bad_depth", "tune --model $DIR/tiny --depth 0,x", "", "\"x\""},
        ErrorRow{"tune_bf16", "tune --model $DIR/tiny --precision bf16", "", "bf16"},
        // The CPU backend has no launch knobs: a clear refusal, not an empty tuning saved.
        ErrorRow{"tune_cpu", "tune --model $DIR/tiny --device cpu --precision int8", "", "no decode launch variants"},
        ErrorRow{"logits_bad_ids", "logits --model $DIR/tiny --ids 1,x --out $DIR/l.npy", "", "\"x\""}),
    [](const auto& row) { return std::string(row.param.name); });

}  // namespace
