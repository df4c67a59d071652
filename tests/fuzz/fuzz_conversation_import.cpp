// libFuzzer target: parseConversations (ui/conversation_import.h), the validation step of importing
// a conversations file the user picked, on arbitrary bytes. It must return conversations or an
// error, never both and never crash; what it accepts must be what the store can insert as is:
//   - a rejected file: a non-empty error and no conversations;
//   - an accepted one: no error; every message's parent is -1 or an earlier message of the same
//     conversation (a tree, no cycles), its role one of system, user, assistant, tool; the current
//     leaf -1 or one of the messages;
//   - the same bytes parse the same way again (no state carried between calls).
//
//   cmake --workflow --preset fuzz
//   build/fuzz/bin/fuzz_conversation_import -dict=tests/fuzz/conversation.dict -max_total_time=60 \
//       /tmp/icorpus tests/fuzz/import_corpus     (new inputs go to the first folder)
#include <cstddef>
#include <cstdint>

#include <QByteArray>

#include "conversation_import.h"

namespace {

bool known_role(const QString& r) {
  return r == u"system" || r == u"user" || r == u"assistant" || r == u"tool";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const QByteArray bytes = QByteArray::fromRawData(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  const cosmos::ui::ParsedConversations parsed = cosmos::ui::parseConversations(bytes);
  if (!parsed.error.isEmpty()) {
    if (!parsed.conversations.isEmpty()) __builtin_trap();
    return 0;
  }
  for (const auto& c : parsed.conversations) {
    const qsizetype n = c.messages.size();
    for (qsizetype i = 0; i < n; ++i) {
      const auto& m = c.messages[i];
      if (m.parent < -1 || m.parent >= i) __builtin_trap();
      if (!known_role(m.role)) __builtin_trap();
    }
    if (c.currentLeaf < -1 || c.currentLeaf >= n) __builtin_trap();
  }
  const cosmos::ui::ParsedConversations again = cosmos::ui::parseConversations(bytes);
  if (again.error != parsed.error || again.conversations.size() != parsed.conversations.size()) __builtin_trap();
  for (qsizetype k = 0; k < parsed.conversations.size(); ++k) {
    const auto& a = parsed.conversations[k];
    const auto& b = again.conversations[k];
    if (a.title != b.title || a.messages.size() != b.messages.size() || a.currentLeaf != b.currentLeaf) __builtin_trap();
    for (qsizetype i = 0; i < a.messages.size(); ++i)
      if (a.messages[i].content != b.messages[i].content || a.messages[i].parent != b.messages[i].parent) __builtin_trap();
  }
  return 0;
}
