#include "cosmos/chat_format.h"

#include <nlohmann/json.hpp>

namespace cosmos {

ChatMessage ChatMessage::text(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.parts.push_back({ChatPart::Kind::text, std::move(content)});
  m.content_is_string = true;
  return m;
}

std::string render_chat(std::span<const ChatMessage> messages, const ChatFormatOptions& options) {
  std::string out;
  int images = 0, videos = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (i == 0 && m.role != "system")
      out += std::string("<|im_start|>system\n") + kDefaultSystemText + "<|im_end|>\n";
    out += "<|im_start|>" + m.role + "\n";
    for (const ChatPart& p : m.parts) {
      switch (p.kind) {
        case ChatPart::Kind::text:
          out += p.text;
          break;
        case ChatPart::Kind::image:
          ++images;
          if (options.add_vision_id) out += "Picture " + std::to_string(images) + ": ";
          out += "<|vision_start|><|image_pad|><|vision_end|>";
          break;
        case ChatPart::Kind::video:
          ++videos;
          if (options.add_vision_id) out += "Video " + std::to_string(videos) + ": ";
          out += "<|vision_start|><|video_pad|><|vision_end|>";
          break;
      }
    }
    out += "<|im_end|>\n";
  }
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::vector<TokenId> chat_token_ids(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                    const ChatFormatOptions& options) {
  return tokenizer.encode(render_chat(messages, options), /*parse_special=*/true);
}

Result<std::vector<ChatMessage>> parse_chat_messages(const nlohmann::json& j, const std::string& label) {
  auto fail = [&](const std::string& what) {
    return make_error(ErrorCategory::bad_input, "chat.messages", label + ": " + what);
  };
  const nlohmann::json* list = &j;
  if (j.is_object() && j.contains("messages")) list = &j["messages"];
  if (!list->is_array()) return fail("expected a list of messages [{\"role\": ..., \"content\": ...}]");
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto& m = (*list)[i];
    const std::string at = "message " + std::to_string(i);
    if (!m.is_object()) return fail(at + " is not an object");
    if (!m.contains("role") || !m["role"].is_string()) return fail(at + " has no \"role\" string");
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      return fail(at + " has unknown role \"" + msg.role + "\" (expected system, user, assistant or tool)");
    if (!m.contains("content")) return fail(at + " has no \"content\"");
    const auto& c = m["content"];
    if (c.is_string()) {
      msg.parts.push_back({ChatPart::Kind::text, c.get<std::string>()});
    } else if (c.is_array()) {
      msg.content_is_string = false;
      for (std::size_t k = 0; k < c.size(); ++k) {
        const auto& part = c[k];
        if (!part.is_object()) return fail(at + " content part " + std::to_string(k) + " is not an object");
        const std::string type = part.contains("type") && part["type"].is_string() ? part["type"].get<std::string>() : "";
        // Same precedence as the template: image, then video, then text.
        if (type == "image" || part.contains("image") || part.contains("image_url")) {
          msg.parts.push_back({ChatPart::Kind::image, {}});
        } else if (type == "video" || part.contains("video")) {
          msg.parts.push_back({ChatPart::Kind::video, {}});
        } else if (part.contains("text")) {
          if (!part["text"].is_string())
            return fail(at + " content part " + std::to_string(k) + " has a non-string \"text\"");
          msg.parts.push_back({ChatPart::Kind::text, part["text"].get<std::string>()});
        } else {
          return fail(at + " content part " + std::to_string(k) + " is neither text, image nor video");
        }
      }
    } else {
      return fail(at + " content must be a string or a list of parts");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

const char* qwen25vl_chat_template() {
  return R"TPL({% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system
You are a helpful assistant.<|im_end|>
{% endif %}<|im_start|>{{ message['role'] }}
{% if message['content'] is string %}{{ message['content'] }}<|im_end|>
{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>
{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %})TPL";
}

}  // namespace cosmos
