// libFuzzer target: the JSON files of a model folder the user downloaded, on arbitrary bytes. Each
// must give a value or an Error (code and message set), never crash, hang or trip UBSan:
//   - config.json (parse_model_config): an accepted config is one the engine can run: positive
//     sizes, head_dim even, num_key_value_heads dividing num_attention_heads, mrope_section empty or
//     3 sections summing to head_dim / 2; and to_json() parses back to the same shape;
//   - a messages array (parse_chat_messages, `cosmos-cli generate --messages`): accepted messages
//     render to a prompt with one "<|im_start|>" per message plus the generation prompt;
//   - tokenizer.json (load_bpe_tokenizer, from a file under $TMPDIR): a loaded tokenizer encodes a
//     fixed text to ids below vocab_size() and decodes them without crashing.
//
//   cmake --workflow --preset fuzz
//   build/fuzz/bin/fuzz_model_files -dict=tests/fuzz/model_files.dict -max_total_time=60 \
//       /tmp/mcorpus tests/fuzz/model_files_corpus     (new inputs go to the first folder)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cosmos/bpe_tokenizer.h"
#include "cosmos/chat_format.h"
#include "cosmos/model_config.h"

namespace {

std::filesystem::path g_file;  // the tokenizer.json each input is written to

void check_error(const cosmos::Error& e) {
  if (e.code.empty() || e.message.empty()) __builtin_trap();
}

void check_config(const nlohmann::json& j) {
  const auto r = cosmos::parse_model_config(j, "config.json");
  if (!r) return check_error(r.error());
  const auto& c = r.value();
  if (c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 || c.vocab_size <= 0) __builtin_trap();
  if (c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) __builtin_trap();
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) __builtin_trap();
  if (!c.mrope_section.empty()) {
    long sum = 0;
    for (int s : c.mrope_section) sum += s;
    if (c.mrope_section.size() != 3 || sum != c.head_dim / 2) __builtin_trap();
  }
  const auto again = cosmos::parse_model_config(c.to_json(), "to_json");
  if (!again) __builtin_trap();
  const auto& d = again.value();
  if (d.hidden_size != c.hidden_size || d.intermediate_size != c.intermediate_size || d.num_layers != c.num_layers ||
      d.num_heads != c.num_heads || d.num_kv_heads != c.num_kv_heads || d.head_dim != c.head_dim ||
      d.vocab_size != c.vocab_size || d.mrope_section != c.mrope_section ||
      d.tie_word_embeddings != c.tie_word_embeddings)
    __builtin_trap();
}

void check_messages(const nlohmann::json& j) {
  const auto r = cosmos::parse_chat_messages(j, "messages");
  if (!r) return check_error(r.error());
  const std::string prompt = cosmos::render_chat(r.value());
  std::size_t starts = 0;
  for (std::size_t at = prompt.find("<|im_start|>"); at != std::string::npos; at = prompt.find("<|im_start|>", at + 1))
    ++starts;
  // A message's own text may contain the marker too, so at least one per message and the prompt's.
  if (starts < r.value().size() + 1) __builtin_trap();
}

void check_tokenizer(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(g_file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const auto r = cosmos::load_bpe_tokenizer(g_file);
  if (!r) return check_error(r.error());
  const auto& tok = *r.value();
  const auto ids = tok.encode("Hello, world! <|im_end|> 你好 😀\n\n  x", true);
  for (auto id : ids)
    if (id < 0 || static_cast<std::size_t>(id) >= tok.vocab_size()) __builtin_trap();
  (void)tok.decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  g_file = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("fuzz_model_files_" + std::to_string(::getpid()) + ".json");
  std::atexit([] { std::error_code ec; std::filesystem::remove(g_file, ec); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) {
    check_config(j);
    check_messages(j);
  }
  check_tokenizer(data, size);
  return 0;
}
