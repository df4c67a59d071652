// cosmos-cli conversations: lists the desktop app's saved conversations (id, title, message count,
// last update) from its SQLite database, read-only. Built only with the UI (it uses Qt SQL).
#include <QCoreApplication>
#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "conversation_store.h"

namespace cosmos::cli {
namespace {

struct ConversationsArgs {
  std::string db;
  bool json = false;
};

// A column of `width` characters (longer text is cut, never wrapped); the last one is not padded.
std::string cell(QString text, int width, bool pad = true) {
  if (text.size() > width) text = text.left(width - 1) + QChar(0x2026);
  return (pad ? text.leftJustified(width) : text).toStdString();
}

int run_conversations(const ConversationsArgs& a) {
  int argc = 1;
  char arg0[] = "cosmos-cli";
  char* argv[] = {arg0, nullptr};
  QCoreApplication qapp(argc, argv);  // Qt SQL loads its SQLite driver as a plugin
  QCoreApplication::setOrganizationName(QString());
  QCoreApplication::setApplicationName(QStringLiteral("cosmos-chat"));  // defaultPath() is the app's

  ui::ConversationStore store;
  const QString path = a.db.empty() ? ui::ConversationStore::defaultPath() : QString::fromStdString(a.db);
  if (!store.open(path, ui::ConversationStore::OpenMode::ReadOnly))
    return report(make_error(ErrorCategory::bad_input, "conversations.open", store.lastError().toStdString()));
  const QJsonArray list = store.summaryJson();
  if (!store.lastError().isEmpty())
    return report(make_error(ErrorCategory::io, "conversations.read", store.lastError().toStdString()));

  if (a.json) {
    std::cout << QJsonDocument(list).toJson(QJsonDocument::Indented).toStdString();
    return kExitOk;
  }
  std::cout << cell(QStringLiteral("ID"), 8) << cell(QStringLiteral("UPDATED (UTC)"), 22)
            << cell(QStringLiteral("MESSAGES"), 10) << "TITLE\n";
  for (const QJsonValue& v : list) {
    const QJsonObject c = v.toObject();
    const QDateTime updated = QDateTime::fromString(c.value(QStringLiteral("updated")).toString(), Qt::ISODateWithMs);
    const QString title = c.value(QStringLiteral("title")).toString();
    std::cout << cell(QString::number(c.value(QStringLiteral("id")).toInteger()), 8)
              << cell(updated.toString(QStringLiteral("yyyy-MM-dd HH:mm:ss")), 22)
              << cell(QString::number(c.value(QStringLiteral("message_count")).toInt()), 10)
              << (title.isEmpty() ? std::string("(untitled)") : cell(title, 60, false)) << "\n";
  }
  std::cout << list.size() << (list.size() == 1 ? " conversation\n" : " conversations\n");
  return kExitOk;
}

}  // namespace

void register_conversations(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<ConversationsArgs>();
  auto* cmd = app.add_subcommand("conversations", "List the desktop app's saved conversations (read-only)");
  cmd->add_option("--db", args->db, "conversation database (default: the app's conversations.sqlite)");
  cmd->add_flag("--json", args->json, "machine-readable output: [{id, title, message_count, updated}]");
  cmd->callback([&run, args] { run = [args] { return run_conversations(*args); }; });
}

}  // namespace cosmos::cli
