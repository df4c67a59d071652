// Loading a byte-level BPE tokenizer from a Hugging Face tokenizer.json (load_bpe_tokenizer).
#include "cosmos/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <pcre2.h>
#include <spdlog/spdlog.h>

#include "bpe_tokenizer_impl.h"
#include "byte_level.h"

namespace cosmos {
namespace {

using json = nlohmann::json;
using bpe_detail::AddedToken;

// The pre-tokenizer regex runs under PCRE2's JIT with this per-thread stack when available.
pcre2_jit_stack* thread_jit_stack(void*) {
  struct Holder {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    ~Holder() {
      if (stack != nullptr) pcre2_jit_stack_free(stack);
    }
  };
  thread_local Holder holder;
  return holder.stack;  // nullptr falls back to PCRE2's small default stack
}

class Loader {
 public:
  explicit Loader(std::filesystem::path file) : file_(std::move(file)) {}

  Result<std::unique_ptr<BpeTokenizer>> load();

 private:
  Error fail(const std::string& code, const std::string& what) const {
    return make_error(ErrorCategory::bad_input, code, file_.string() + ": " + what);
  }
  std::optional<Error> load_vocab(const json& model, BpeTokenizer::Impl& impl) const;
  std::optional<Error> load_merges(const json& model, BpeTokenizer::Impl& impl) const;
  std::optional<Error> load_normalizer(const json& normalizer, BpeTokenizer::Impl& impl) const;
  std::optional<Error> load_pre_tokenizer(const json& pre, BpeTokenizer::Impl& impl) const;
  std::optional<Error> compile_regex(const std::string& pattern, BpeTokenizer::Impl& impl) const;

  std::filesystem::path file_;
};

// Ids index flat tables: refuse absurd ones rather than allocate for them.
constexpr std::int64_t kMaxTokenId = (1 << 24) - 1;

bool valid_id(const json& id) {
  return id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() <= kMaxTokenId;
}

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::optional<Error> Loader::load_vocab(const json& model, BpeTokenizer::Impl& impl) const {
  const json* vocab = member(model, "vocab");
  if (vocab == nullptr || !vocab->is_object() || vocab->empty()) {
    return fail("tokenizer.vocab", "model.vocab is missing or not an object");
  }
  impl.vocab.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    if (!valid_id(id)) {
      return fail("tokenizer.vocab", "vocabulary id of \"" + token + "\" is not a valid id");
    }
    impl.vocab.emplace(token, id.get<TokenId>());
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = impl.vocab.find(byte_level::byte_to_utf8(static_cast<std::uint8_t>(b)));
    if (it == impl.vocab.end()) {
      return fail("tokenizer.vocab",
                  "not a byte-level vocabulary (byte " + std::to_string(b) + " has no token)");
    }
    impl.byte_ids[b] = it->second;
  }
  return std::nullopt;
}

std::optional<Error> Loader::load_merges(const json& model, BpeTokenizer::Impl& impl) const {
  const json* merges = member(model, "merges");
  if (merges == nullptr || !merges->is_array()) {
    return fail("tokenizer.merges", "model.merges is missing or not an array");
  }
  impl.merges.reserve(merges->size());
  std::string left;
  std::string right;
  for (std::size_t rank = 0; rank < merges->size(); ++rank) {
    const json& m = (*merges)[rank];
    if (m.is_string()) {  // older form: "a b"
      const std::string& s = m.get_ref<const std::string&>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return fail("tokenizer.merges",
                    "merge " + std::to_string(rank) + " (\"" + s + "\") is not two tokens");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return fail("tokenizer.merges",
                  "merge " + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
    }
    const auto a = impl.vocab.find(left);
    const auto b = impl.vocab.find(right);
    const auto ab = impl.vocab.find(left + right);
    if (a == impl.vocab.end() || b == impl.vocab.end() || ab == impl.vocab.end()) {
      return fail("tokenizer.merges", "merge " + std::to_string(rank) + " (" + left + " " + right +
                                          ") uses a token that is not in the vocabulary");
    }
    impl.merges.insert(a->second, b->second, static_cast<std::int32_t>(rank), ab->second);
  }
  return std::nullopt;
}

std::optional<Error> Loader::load_normalizer(const json& normalizer,
                                             BpeTokenizer::Impl& impl) const {
  if (normalizer.is_null()) return std::nullopt;
  const std::string type = normalizer.value("type", "");
  if (type == "NFC") {
    impl.nfc = true;
    return std::nullopt;
  }
  if (type == "Sequence" && normalizer.contains("normalizers")) {
    for (const json& n : normalizer["normalizers"]) {
      if (auto e = load_normalizer(n, impl)) return e;
    }
    return std::nullopt;
  }
  return fail("tokenizer.normalizer", "normalizer \"" + type + "\" is not supported (only NFC)");
}

std::optional<Error> Loader::compile_regex(const std::string& pattern,
                                           BpeTokenizer::Impl& impl) const {
  const std::string translated = hf_compat::translate_pattern(pattern);
  int code = 0;
  PCRE2_SIZE offset = 0;
  impl.regex.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                 PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr));
  if (!impl.regex) {
    std::array<PCRE2_UCHAR, 256> msg{};
    pcre2_get_error_message(code, msg.data(), msg.size());
    return fail("tokenizer.pre_tokenizer", "pre-tokenizer regex does not compile at offset " +
                                               std::to_string(offset) + ": " +
                                               reinterpret_cast<const char*>(msg.data()));
  }
  impl.jit = pcre2_jit_compile(impl.regex.get(), PCRE2_JIT_COMPLETE) == 0;
  if (!impl.jit) spdlog::debug("tokenizer: PCRE2 JIT unavailable, using the interpreter");
  impl.match_context.reset(pcre2_match_context_create(nullptr));
  if (impl.jit) pcre2_jit_stack_assign(impl.match_context.get(), thread_jit_stack, nullptr);
  return std::nullopt;
}

std::optional<Error> Loader::load_pre_tokenizer(const json& pre, BpeTokenizer::Impl& impl) const {
  std::vector<const json*> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
    for (const json& p : pre["pretokenizers"]) steps.push_back(&p);
  } else if (!pre.is_null()) {
    steps.push_back(&pre);
  }
  std::optional<std::string> pattern;
  bool byte_level = false;
  for (const json* step : steps) {
    const std::string type = step->value("type", "");
    if (type == "Split") {
      if (pattern) return fail("tokenizer.pre_tokenizer", "only one regex split is supported");
      const json* pat = member(*step, "pattern");
      if (step->value("behavior", "") != "Isolated" || step->value("invert", false) || pat == nullptr) {
        return fail("tokenizer.pre_tokenizer", "only a Split with behavior Isolated is supported");
      }
      if (const json* re = member(*pat, "Regex"); re && re->is_string()) {
        pattern = re->get<std::string>();
      } else if (const json* lit = member(*pat, "String"); lit && lit->is_string()) {
        std::string escaped;  // a literal: escape every ASCII punctuation character
        for (const char c : lit->get<std::string>()) {
          const auto u = static_cast<unsigned char>(c);
          if (u < 0x80 && !std::isalnum(u)) escaped += '\\';
          escaped += c;
        }
        pattern = escaped;
      } else {
        return fail("tokenizer.pre_tokenizer", "Split pattern is neither Regex nor String");
      }
    } else if (type == "ByteLevel") {
      byte_level = true;
      if (step->value("add_prefix_space", true)) {
        return fail("tokenizer.pre_tokenizer", "ByteLevel add_prefix_space is not supported");
      }
      if (step->value("use_regex", true)) {
        if (pattern) return fail("tokenizer.pre_tokenizer", "only one regex split is supported");
        pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
      }
    } else {
      return fail("tokenizer.pre_tokenizer", "pre-tokenizer \"" + type + "\" is not supported");
    }
  }
  if (!byte_level) {
    return fail("tokenizer.pre_tokenizer", "only byte-level BPE is supported (no ByteLevel step)");
  }
  if (pattern) return compile_regex(*pattern, impl);
  return std::nullopt;
}

Result<std::unique_ptr<BpeTokenizer>> Loader::load() {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file_, ec)) {
    return make_error(ErrorCategory::bad_input, "tokenizer.missing",
                      "tokenizer file not found: " + file_.string());
  }
  std::ifstream in(file_, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) {
    return make_error(ErrorCategory::io, "tokenizer.read",
                      "cannot read tokenizer file " + file_.string());
  }
  const json root = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return fail("tokenizer.json", "not a valid tokenizer.json (JSON object expected)");
  }

  const json* model = member(root, "model");
  if (model == nullptr || !model->is_object()) return fail("tokenizer.json", "no \"model\" object");
  const std::string type = model->value("type", "BPE");
  if (type != "BPE") {
    return fail("tokenizer.model_type", "model type \"" + type + "\" is not supported (BPE expected)");
  }
  if (!model->value("continuing_subword_prefix", std::string()).empty() ||
      !model->value("end_of_word_suffix", std::string()).empty()) {
    return fail("tokenizer.model_type", "BPE with a subword prefix or word suffix is not supported");
  }

  auto impl = std::make_unique<BpeTokenizer::Impl>();
  impl->file = file_;
  impl->ignore_merges = model->value("ignore_merges", false);
  if (auto e = load_vocab(*model, *impl)) return *e;
  if (auto e = load_merges(*model, *impl)) return *e;
  if (auto e = load_normalizer(root.value("normalizer", json()), *impl)) return *e;
  if (auto e = load_pre_tokenizer(root.value("pre_tokenizer", json()), *impl)) return *e;

  // Added tokens.
  std::vector<AddedToken> added;
  TokenId max_id = -1;
  for (const auto& [token, id] : impl->vocab) max_id = std::max(max_id, id);
  if (const json* list = member(root, "added_tokens")) {
    for (const json& t : *list) {
      if (!t.is_object() || !t.contains("id") || !valid_id(t["id"]) || !t.contains("content") ||
          !t["content"].is_string()) {
        return fail("tokenizer.added_tokens", "an added token lacks a valid id or content");
      }
      AddedToken a{t["content"].get<std::string>(), t["id"].get<TokenId>(), t.value("special", false)};
      if (t.value("lstrip", false) || t.value("rstrip", false) || t.value("single_word", false)) {
        spdlog::warn("tokenizer {}: lstrip/rstrip/single_word of added token {} are ignored",
                     file_.string(), a.content);
      }
      (t.value("normalized", !a.special) ? impl->normalized_added : impl->raw_added).add(a);
      impl->added_ids[a.content] = a.id;
      max_id = std::max(max_id, a.id);
      added.push_back(std::move(a));
    }
  }

  // token_bytes for every id: vocabulary tokens byte-level decoded, added tokens as written.
  std::vector<std::string> decoded(static_cast<std::size_t>(max_id) + 1);
  for (const auto& [token, id] : impl->vocab) {
    auto raw = byte_level::decode(token);
    decoded[id] = raw ? std::move(*raw) : token;
  }
  impl->special.assign(decoded.size(), 0);
  for (const AddedToken& a : added) {
    decoded[a.id] = a.content;
    impl->special[a.id] = a.special ? 1 : 0;
  }
  impl->offsets.reserve(decoded.size() + 1);
  for (const std::string& d : decoded) {
    impl->offsets.push_back(static_cast<std::uint32_t>(impl->bytes_blob.size()));
    impl->bytes_blob += d;
  }
  impl->offsets.push_back(static_cast<std::uint32_t>(impl->bytes_blob.size()));
  spdlog::debug("tokenizer {}: {} tokens, {} merges, {} added", file_.string(), impl->vocab.size(),
                impl->merges.size(), added.size());
  return std::make_unique<BpeTokenizer>(std::move(impl));
}

}  // namespace

Result<std::unique_ptr<BpeTokenizer>> load_bpe_tokenizer(const std::filesystem::path& tokenizer_json) {
  try {
    return Loader(tokenizer_json).load();
  } catch (const std::exception& e) {  // nlohmann type errors on a malformed file, bad_alloc
    return make_error(ErrorCategory::bad_input, "tokenizer.json",
                      tokenizer_json.string() + ": malformed tokenizer.json: " + e.what());
  }
}

}  // namespace cosmos
