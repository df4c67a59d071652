// cosmos-cli download: fetches a model repository from the Hugging Face Hub into a folder, like
// `huggingface-cli download REPO --local-dir DIR`, with the app's downloader (ui/model_downloader.h):
// resumable .part files, retries with backoff, every file checked against the hub's hash, the
// free disk space checked first. Progress on stderr; built with the UI (it uses Qt Network).
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTimer>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "cli_common.h"
#include "download_view_model.h"
#include "model_downloader.h"
#include "settings_view_model.h"

namespace cosmos::cli {
namespace {

struct DownloadArgs {
  std::string repo;
  std::string revision = "main";
  std::string out;
  std::string endpoint;
  bool quiet = false;
};

// Ctrl+C: what is on disk is a prefix of each .part, so the next run resumes; say so and leave.
char g_interrupt_message[1024];
void on_interrupt(int) {
  const ssize_t n = ::write(STDERR_FILENO, g_interrupt_message, std::strlen(g_interrupt_message));
  (void)n;
  std::_Exit(130);
}

QString progressLine(qint64 done, qint64 total, double speed, double left, const QString& file, int index, int count) {
  using ui::SettingsViewModel;
  const double pct = total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0;
  QString line = QStringLiteral("%1%  %2 / %3")
                     .arg(pct, 5, 'f', 1)
                     .arg(SettingsViewModel::formatBytes(static_cast<double>(done)),
                          SettingsViewModel::formatBytes(static_cast<double>(total)));
  if (speed > 0) line += QStringLiteral("  ") + ui::DownloadViewModel::formatSpeed(speed);
  if (left >= 0) line += QStringLiteral("  %1 left").arg(ui::DownloadViewModel::formatDuration(left));
  if (count > 0) line += QStringLiteral("  [%1/%2] %3").arg(index).arg(count).arg(file);
  return line;
}

int run_download(const DownloadArgs& a) {
  int argc = 1;
  char arg0[] = "cosmos-cli";
  char* argv[] = {arg0, nullptr};
  QCoreApplication qapp(argc, argv);  // Qt Network runs on its event loop

  ui::DownloadRequest request;
  request.repo = QString::fromStdString(a.repo);
  request.revision = QString::fromStdString(a.revision);
  request.outDir = QString::fromStdString(a.out);
  request.endpoint = QString::fromStdString(a.endpoint);

  std::snprintf(g_interrupt_message, sizeof g_interrupt_message,
                "\ninterrupted: what was downloaded is kept in %s (*.part files); run the same command again to "
                "resume\n",
                a.out.c_str());
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);

  ui::ModelDownloader downloader;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  bool lineOpen = false;  // a \r progress line is on the terminal
  qint64 lastPrinted = -1;
  QElapsedTimer sinceLine;
  sinceLine.start();
  QString file;
  int index = 0, count = 0;
  QString error;
  bool ok = false;
  auto print = [&](const QString& text) {
    if (lineOpen) std::cerr << "\r\033[K";
    lineOpen = false;
    std::cerr << text.toStdString() << std::endl;
  };

  QObject::connect(&downloader, &ui::ModelDownloader::fileStarted, [&](const QString& path, int i, int n) {
    file = path;
    index = i;
    count = n;
    if (!tty && !a.quiet) print(QStringLiteral("[%1/%2] %3").arg(i).arg(n).arg(path));
  });
  QObject::connect(&downloader, &ui::ModelDownloader::progressChanged,
                   [&](qint64 done, qint64 total, double speed, double left) {
                     if (a.quiet) return;
                     const QString line = progressLine(done, total, speed, left, file, index, count);
                     if (tty) {
                       std::cerr << "\r\033[K" << line.toStdString() << std::flush;
                       lineOpen = true;
                     } else if (done != lastPrinted && (sinceLine.elapsed() >= 5000 || done == total)) {
                       print(line);  // not a terminal: a line every 5 s, and the last one
                       lastPrinted = done;
                       sinceLine.restart();
                     }
                   });
  QObject::connect(&downloader, &ui::ModelDownloader::notice, [&](const QString& text) {
    if (!text.isEmpty() && !a.quiet) print(text);
  });
  QObject::connect(&downloader, &ui::ModelDownloader::finished,
                   [&](const QString& dir, int files, qint64 bytes) {
                     if (lineOpen) std::cerr << "\n";
                     lineOpen = false;
                     std::cout << "downloaded " << request.repo.toStdString() << " (" << request.revision.toStdString()
                               << ") into " << dir.toStdString() << ": " << files << " files, "
                               << ui::SettingsViewModel::formatBytes(static_cast<double>(bytes)).toStdString()
                               << ", every file verified\n";
                     ok = true;
                     QCoreApplication::quit();
                   });
  QObject::connect(&downloader, &ui::ModelDownloader::failed, [&](const QString& message) {
    error = message;
    QCoreApplication::quit();
  });
  QTimer::singleShot(0, &downloader, [&] { downloader.start(request); });
  QCoreApplication::exec();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (lineOpen) std::cerr << "\n";
  if (ok) return kExitOk;
  return report(make_error(ErrorCategory::io, "download.failed", error.toStdString()));
}

}  // namespace

void register_download(CLI::App& app, RunFn& run) {
  auto args = std::make_shared<DownloadArgs>();
  auto* cmd = app.add_subcommand("download",
                                 "Download a model from the Hugging Face Hub into a folder (resumable, verified)");
  cmd->add_option("--repo", args->repo, "repository id, e.g. nvidia/Cosmos-Reason1-7B")->required();
  cmd->add_option("--revision", args->revision, "branch, tag or commit")->capture_default_str();
  cmd->add_option("--out", args->out, "destination folder (created; files already there are kept)")->required();
  cmd->add_option("--endpoint", args->endpoint, "hub URL (default: $HF_ENDPOINT, else https://huggingface.co)");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress on stderr");
  cmd->footer("A token for gated or private models comes from $HF_TOKEN (or huggingface-cli login).\n"
              "An interrupted download keeps its *.part files: the same command resumes it.");
  cmd->callback([&run, args] { run = [args] { return run_download(*args); }; });
}

}  // namespace cosmos::cli
