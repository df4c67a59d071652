// cosmos-cli import: adds the conversations of a JSON file (our export, docs/CONVERSATION_JSON.md,
// or an OpenAI-style chat) to the desktop app's database, all or nothing, skipping duplicates.
// Built only with the UI (it uses Qt SQL).
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <iostream>

#include "cli_common.h"
#include "conversation_import.h"
#include "conversation_store.h"

namespace cosmos::cli {
namespace {

struct ImportArgs {
  std::string db;
  std::string input;
  bool json = false;
};

int run_import(const ImportArgs& a) {
  int argc = 1;
  char arg0[] = "cosmos-cli";
  char* argv[] = {arg0, nullptr};
  QCoreApplication qapp(argc, argv);  // Qt SQL loads its SQLite driver as a plugin
  QCoreApplication::setOrganizationName(QString());
  QCoreApplication::setApplicationName(QStringLiteral("cosmos-chat"));  // defaultPath() is the app's

  ui::ConversationStore store;
  const QString path = a.db.empty() ? ui::ConversationStore::defaultPath() : QString::fromStdString(a.db);
  if (!store.open(path))
    return report(make_error(ErrorCategory::bad_input, "import.open", store.lastError().toStdString()));
  if (!store.recoveryNotice().isEmpty()) std::cerr << "warning: " << store.recoveryNotice().toStdString() << "\n";

  const ui::ImportResult result = ui::importConversations(store, QString::fromStdString(a.input));
  if (!result.ok) return report(make_error(ErrorCategory::bad_input, "import.failed", result.error.toStdString()));

  const QString db = QDir::toNativeSeparators(QFileInfo(store.filePath()).absoluteFilePath());
  if (a.json) {
    QJsonArray ids;
    for (qint64 id : result.conversationIds) ids.append(id);
    const QJsonObject out{{QStringLiteral("imported"), ids},
                          {QStringLiteral("duplicates_skipped"), result.duplicatesSkipped},
                          {QStringLiteral("db"), db}};
    std::cout << QJsonDocument(out).toJson(QJsonDocument::Indented).toStdString();
    return kExitOk;
  }
  for (qint64 id : result.conversationIds) {
    const auto c = store.conversation(id);
    const QString title = c && !c->title.isEmpty() ? c->title : QStringLiteral("(untitled)");
    std::cout << id << "\t" << title.toStdString() << " (" << (c ? c->messageCount : 0)
              << (c && c->messageCount == 1 ? " message)\n" : " messages)\n");
  }
  const qsizetype n = result.conversationIds.size();
  std::cout << "Imported " << n << (n == 1 ? " conversation" : " conversations") << " into " << db.toStdString();
  if (result.duplicatesSkipped > 0) {
    std::cout << "; skipped " << result.duplicatesSkipped
              << (result.duplicatesSkipped == 1 ? " duplicate (already stored)" : " duplicates (already stored)");
  }
  std::cout << ".\n";
  return kExitOk;
}

}  // namespace

void register_import(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<ImportArgs>();
  auto* cmd = app.add_subcommand(
      "import", "Add the conversations of a JSON file (Cosmos Chat's export or OpenAI-style messages) to the app");
  cmd->add_option("input", args->input, "JSON file (- for standard input)")->required();
  cmd->add_option("--db", args->db, "conversation database (default: the app's conversations.sqlite)");
  cmd->add_flag("--json", args->json, "machine-readable output: {imported: [ids], duplicates_skipped, db}");
  cmd->callback([&run, args] { run = [args] { return run_import(*args); }; });
}

}  // namespace cosmos::cli
