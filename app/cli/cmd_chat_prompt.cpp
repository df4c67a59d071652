// cosmos-cli chat-prompt: OpenAI-style messages -> the model's prompt text and ids.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cosmos/chat_format.h"

namespace cosmos::cli {
namespace {

struct ChatPromptArgs {
  TokenizerSource source;
  std::string messages;
  bool no_generation_prompt = false;
};

int run_chat_prompt(const ChatPromptArgs& a) {
  auto text = read_text(a.messages);
  if (!text) return report(text.error());
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded())
    return report(make_error(ErrorCategory::bad_input, "chat.messages", a.messages + ": not valid JSON"));
  auto messages = parse_chat_messages(j, a.messages);
  if (!messages) return report(messages.error());
  auto tok = a.source.load();
  if (!tok) return report(tok.error());
  ChatFormatOptions options;
  options.add_generation_prompt = !a.no_generation_prompt;
  const std::string prompt = render_chat(*messages, options);
  nlohmann::json out = {{"prompt", prompt}, {"ids", (*tok)->encode(prompt, true)}};
  std::cout << out.dump() << "\n";
  return kExitOk;
}

}  // namespace

void register_chat_prompt(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<ChatPromptArgs>();
  auto* cmd = app.add_subcommand("chat-prompt", "Render messages in the chat format; print {prompt, ids}");
  args->source.add_to(*cmd);
  cmd->add_option("--messages", args->messages, "JSON file of [{\"role\", \"content\"}] (- for stdin)")->required();
  cmd->add_flag("--no-generation-prompt", args->no_generation_prompt, "do not end with the assistant turn opener");
  cmd->callback([&run, args] { run = [args] { return run_chat_prompt(*args); }; });
}

}  // namespace cosmos::cli
