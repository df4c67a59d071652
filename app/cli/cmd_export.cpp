// cosmos-cli export: writes saved conversations (one, several or all) from the desktop app's SQLite
// database to Markdown, JSON, HTML, PDF or plain text, like the app's export (ui/conversation_export.h).
// The database is opened read-only; the file is written atomically. Built only with the UI (Qt).
#include <QCoreApplication>
#include <QGuiApplication>

#include <cstdint>
#include <iostream>
#include <memory>
#include <vector>

#include "cli_common.h"
#include "conversation_export.h"
#include "conversation_store.h"

namespace cosmos::cli {
namespace {

struct ExportArgs {
  std::string db;
  std::vector<std::int64_t> ids;
  bool all = false;
  std::string format;
  std::string out;
};

int run_export(const ExportArgs& a) {
  const std::optional<ui::ExportFormat> format = ui::exportFormatFromString(QString::fromStdString(a.format));
  if (!format) return report(make_error(ErrorCategory::bad_input, "export.format", "unknown format " + a.format));

  // Qt SQL loads its SQLite driver as a plugin; the PDF's text layout and fonts need a
  // QGuiApplication, here on the "offscreen" platform (no display needed).
  static int argc = 3;
  static char arg0[] = "cosmos-cli", arg1[] = "-platform", arg2[] = "offscreen";
  static char* argv[] = {arg0, arg1, arg2, nullptr};
  std::unique_ptr<QCoreApplication> qapp;
  if (*format == ui::ExportFormat::Pdf) {
    qapp = std::make_unique<QGuiApplication>(argc, argv);
  } else {
    argc = 1;
    qapp = std::make_unique<QCoreApplication>(argc, argv);
  }
  QCoreApplication::setOrganizationName(QString());
  QCoreApplication::setApplicationName(QStringLiteral("cosmos-chat"));  // defaultPath() is the app's

  ui::ConversationStore store;
  const QString path = a.db.empty() ? ui::ConversationStore::defaultPath() : QString::fromStdString(a.db);
  if (!store.open(path, ui::ConversationStore::OpenMode::ReadOnly))
    return report(make_error(ErrorCategory::bad_input, "export.open", store.lastError().toStdString()));

  QList<qint64> ids;
  for (std::int64_t id : a.ids) ids.append(id);
  const QString out = QString::fromStdString(a.out);
  const ui::ExportResult result = ui::exportConversations(store, a.all ? QList<qint64>() : ids, *format, out);
  if (!result.ok) return report(make_error(ErrorCategory::io, "export.write", result.error.toStdString()));
  std::cout << "exported " << result.conversations << (result.conversations == 1 ? " conversation" : " conversations")
            << " to " << a.out << "\n";
  return kExitOk;
}

}  // namespace

void register_export(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand("export", "Export saved conversations to Markdown, JSON, HTML, PDF or text");
  cmd->add_option("--db", args->db, "conversation database (default: the app's conversations.sqlite)");
  auto* one = cmd->add_option("--conversation", args->ids, "conversation id (repeatable; see `conversations`)");
  auto* all = cmd->add_flag("--all", args->all, "every conversation (not deleted), newest first");
  one->excludes(all);
  cmd->add_option("--format", args->format, "md | json | html | pdf | txt")
      ->required()
      ->check(CLI::IsMember({"md", "markdown", "json", "html", "pdf", "txt", "text"}));
  cmd->add_option("--out", args->out, "the file to write (replaced only when the export succeeds)")->required();
  cmd->callback([&run, args, one, all] {
    if (one->count() == 0 && all->count() == 0) throw CLI::RequiredError("--conversation or --all");
    run = [args] { return run_export(*args); };
  });
}

}  // namespace cosmos::cli
