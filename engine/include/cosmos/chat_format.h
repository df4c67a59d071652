// The Qwen2.5-VL ChatML chat format (DESIGN.md §3), rendered exactly like the model's Jinja
// template (tests compare with Hugging Face's rendering), and OpenAI-style message parsing.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cosmos/error.h"
#include "cosmos/tokenizer.h"

namespace cosmos {

inline constexpr const char* kDefaultSystemText = "You are a helpful assistant.";
// Cosmos-Reason1's recommended system prompt: the app's default.
inline constexpr const char* kReasoningSystemPrompt =
    "You are a helpful assistant. Answer the question in the following format: <think>\n"
    "your reasoning\n</think>\n\n<answer>\nyour answer\n</answer>.";

struct ChatPart {
  enum class Kind { text, image, video };
  Kind kind = Kind::text;
  std::string text;  // for Kind::text
};

struct ChatMessage {
  std::string role;             // system | user | assistant | tool
  std::vector<ChatPart> parts;  // one text part when content was a plain string
  bool content_is_string = true;

  static ChatMessage text(std::string role, std::string content);
};

struct ChatFormatOptions {
  bool add_generation_prompt = true;  // end with "<|im_start|>assistant\n"
  bool add_vision_id = false;         // "Picture N: " before each image
};

std::string render_chat(std::span<const ChatMessage> messages, const ChatFormatOptions& options = {});

// Renders and tokenizes (special tokens parsed), as HF apply_chat_template(tokenize=True).
std::vector<TokenId> chat_token_ids(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                    const ChatFormatOptions& options = {});

// OpenAI-style messages: [{"role": "...", "content": "..." | [{"type": "text", "text": ...},
// {"type": "image", ...}, {"type": "image_url", ...}, {"type": "video", ...}]}].
// Errors (code "chat.messages") name the message index and what is wrong.
Result<std::vector<ChatMessage>> parse_chat_messages(const nlohmann::json& j, const std::string& label);

// The model's Jinja chat template (for tokenizer_config.json of generated test models).
const char* qwen25vl_chat_template();

}  // namespace cosmos
