// Importing conversations from JSON: Cosmos Chat's own export (docs/CONVERSATION_JSON.md: every
// branch, reasoning, meta and timestamps) and OpenAI-style chats ({"title", "messages": [{"role",
// "content"}]}, a bare messages array, or an array of such objects). Used by cosmos-cli import and
// the app.
//
// Everything is validated before the database is touched; an error names the JSON path and the
// problem ("$.conversations[0].messages[3].role: unknown role \"robot\" ..."), or the byte, line and
// column of invalid or truncated JSON. Then every conversation goes in through
// ConversationStore::insertConversations, in ONE transaction: the database is unchanged on any
// error. A conversation identical to one stored (ConversationStore::fingerprint: roles, contents
// and tree) is skipped and counted.
//
// OpenAI-style details: "developer" is read as system and "function" as tool; content may be a
// string, null (an assistant's tool call) or an array of text parts ({"type": "text", "text"});
// "reasoning_content" or "reasoning" becomes the reasoning; the message's other fields (name,
// tool_calls, tool_call_id, ...) are kept in meta under "openai". The messages form one branch;
// the title is "title" or, when absent, the first user message's default title; times are the
// import's.
#pragma once

#include <QByteArray>
#include <QList>
#include <QString>

#include "conversation_store.h"

namespace cosmos::ui {

struct ImportResult {
  bool ok = false;
  QString error;                  // empty when ok
  QList<qint64> conversationIds;  // the new conversations, in file order (duplicates left out)
  int duplicatesSkipped = 0;
};

inline constexpr qint64 kImportMaxBytes = qint64(256) << 20;  // larger files are refused unread
inline constexpr char kConversationFormat[] = "cosmos-chat-conversations";
inline constexpr int kConversationFormatVersion = 1;

// Reads our JSON export (docs/CONVERSATION_JSON.md) or an OpenAI-style file ({"title": ...,
// "messages": [{"role": ..., "content": ...}]}, a bare messages array, or an array of such objects).
// Validates everything first (the error names the JSON path and the problem: truncated file /
// invalid JSON with offset, wrong type, unknown role, missing field, parent that does not exist,
// file over 256 MiB), then inserts all conversations in ONE transaction (all-or-nothing; the
// database is unchanged on any error). A conversation identical to one already stored and not
// deleted (same messages' roles, contents and tree: ConversationStore::fingerprint, cached in the
// conversation row) is skipped and counted in duplicatesSkipped. importConversations' errors start
// with the file's path ("-" reads standard input); a file over kImportMaxBytes is refused unread.
ImportResult importConversations(ConversationStore& store, const QString& path);
ImportResult importConversationsFromData(ConversationStore& store, const QByteArray& data);

// The validation step alone: the conversations `data` holds, or the error (then the list is empty).
struct ParsedConversations {
  QList<NewConversation> conversations;
  QString error;
};
ParsedConversations parseConversations(const QByteArray& data);

}  // namespace cosmos::ui
