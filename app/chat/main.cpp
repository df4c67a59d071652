// cosmos-chat: the desktop app. Wires the view-models of cosmos_ui to the QML views of the
// CosmosChat module (docs/UI_ARCHITECTURE.md) and loads the model given with --model or, failing
// that, the one chosen in the settings.
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QGuiApplication>
#include <QIcon>
#include <QPalette>
#include <QQmlApplicationEngine>
#include <QQmlContext>
#include <QQmlExtensionPlugin>
#include <QtQml/qqml.h>
#include <QQuickStyle>
#include <QStandardPaths>
#include <QTextStream>
#include <QUrl>

#include <spdlog/spdlog.h>

#include <cstdio>

#include "chat_engine.h"
#include "app_context.h"
#include "chat_view_model.h"
#include "conversation_list_model.h"
#include "conversation_store.h"
#include "conversation_transfer.h"
#include "cosmos/cuda_backend.h"
#include "cosmos/logging.h"
#include "download_view_model.h"
#include "engine_host.h"
#include "qt_log_bridge.h"
#include "search_results_model.h"
#include "settings_view_model.h"
#include "stats_view_model.h"

// The CosmosChat QML module is a static library (app/chat/CMakeLists.txt): keep its plugin.
Q_IMPORT_QML_PLUGIN(CosmosChatPlugin)

#ifndef COSMOS_VERSION
#define COSMOS_VERSION "0.0.0"
#endif

namespace {

// Qt 6.4 has no QStyleHints::colorScheme: a dark window color in the platform palette means the
// desktop prefers dark.
bool systemPrefersDark() {
  const QColor window = QGuiApplication::palette().color(QPalette::Window);
  return window.lightness() < 128;
}

// Markdown links take their color from the application palette when the text is parsed; keep it
// readable on the theme's background (Theme.qml's `link`).
void applyLinkColor(const QString& theme, bool systemDark) {
  const bool dark = theme == QLatin1String("dark") || (theme == QLatin1String("system") && systemDark);
  QPalette palette = QGuiApplication::palette();
  const QColor link(dark ? QStringLiteral("#7cb7ff") : QStringLiteral("#0b5cad"));
  palette.setColor(QPalette::Link, link);
  palette.setColor(QPalette::LinkVisited, link);
  QGuiApplication::setPalette(palette);
}

void setApplicationNames() {
  QCoreApplication::setApplicationName(QStringLiteral("cosmos-chat"));
  QCoreApplication::setOrganizationName(QString());
  QCoreApplication::setApplicationVersion(QStringLiteral(COSMOS_VERSION));
}

struct Options {
  QCommandLineOption model{QStringLiteral("model"),
                           QStringLiteral("Load the model folder DIR (config.json, *.safetensors, tokenizer.json)."),
                           QStringLiteral("DIR")};
  QCommandLineOption verbose{QStringLiteral("verbose"), QStringLiteral("Debug output on the console.")};
};

void configureParser(QCommandLineParser& parser, const Options& options) {
  parser.setApplicationDescription(QStringLiteral("Local chat with NVIDIA Cosmos-Reason1-7B."));
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addOption(options.model);
  parser.addOption(options.verbose);
}

// --help and --version answer without a display (QGuiApplication needs one).
bool wantsTextOnly(int argc, char* argv[]) {
  for (int i = 1; i < argc; ++i) {
    const QByteArray a(argv[i]);
    if (a == "--help" || a == "-h" || a == "--help-all" || a == "--version" || a == "-v") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char* argv[]) {
  const Options options;
  if (wantsTextOnly(argc, argv)) {
    QCoreApplication core(argc, argv);
    setApplicationNames();
    QCommandLineParser parser;
    configureParser(parser, options);
    parser.process(core);  // prints and exits
    return 0;
  }

  QGuiApplication app(argc, argv);
  setApplicationNames();
  QGuiApplication::setApplicationDisplayName(QStringLiteral("Cosmos Chat"));
  QGuiApplication::setDesktopFileName(QStringLiteral("io.github.cosmoschat.CosmosChat"));  // packaging/*.desktop
  QGuiApplication::setWindowIcon(QIcon(QStringLiteral(":/cosmos-chat.svg")));

  QCommandLineParser parser;
  configureParser(parser, options);
  parser.process(app);
  const QCommandLineOption& modelOption = options.model;
  const QCommandLineOption& verboseOption = options.verbose;

  // Logging: the console and a rotating file in the data folder; Qt's messages go to the same log.
  const QString dataDir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
  QDir().mkpath(dataDir);
  cosmos::LogOptions logOptions;
  logOptions.verbose = parser.isSet(verboseOption);
  logOptions.file = QDir(dataDir).filePath(QStringLiteral("cosmos.log")).toStdString();
  const std::string logError = cosmos::setup_logging(logOptions);
  if (!logError.empty()) std::fprintf(stderr, "cosmos-chat: %s\n", logError.c_str());
  spdlog::flush_on(spdlog::level::info);  // the log file is read while the app runs (tests, support)
  cosmos::ui::install_qt_log_bridge();
  spdlog::info("cosmos-chat {} starting; data folder {}", COSMOS_VERSION, dataDir.toStdString());

  QQuickStyle::setStyle(QStringLiteral("Fusion"));
  const bool systemDark = systemPrefersDark();

  // The view-models (declared before the QML engine, so they outlive it).
  cosmos::ui::ConversationStore store;
  QString storeError;
  if (!store.open()) {
    storeError = QStringLiteral("Conversations cannot be saved: %1").arg(store.lastError());
    spdlog::error("{}", storeError.toStdString());
  }
  cosmos::ui::SettingsViewModel settings;
  cosmos::ui::EngineHost engine(cosmos::ui::makeRealChatEngine());
  // The precisions the settings offer follow the device the loaded model runs on.
  QObject::connect(&engine, &cosmos::ui::EngineHost::infoChanged, &settings,
                   [&settings, &engine] { settings.setGpuInUse(engine.onGpu()); });
  cosmos::ui::ChatViewModel chat(&engine, &store);
  chat.setSettingsProvider([&settings] {
    return cosmos::ui::ChatSettings{settings.generateOptions(), settings.systemPrompt()};
  });
  // "Generate N answers" is offered only when sampling can make them differ (not greedy).
  QObject::connect(&settings, &cosmos::ui::SettingsViewModel::temperatureChanged, &chat,
                   [&chat] { chat.notifySettingsChanged(); });
  QObject::connect(&settings, &cosmos::ui::SettingsViewModel::topKChanged, &chat,
                   [&chat] { chat.notifySettingsChanged(); });
  cosmos::ui::ConversationListModel conversations(&store);
  cosmos::ui::SearchResultsModel searchResults(&store);
  cosmos::ui::ConversationTransfer transfer(&store);
  cosmos::ui::StatsViewModel stats(&engine);
  cosmos::ui::DownloadViewModel download(&settings);  // its thread ends (keeping .part files) at exit

  // The model to load: --model for this run (remembered, as if chosen in the settings), else the
  // settings' folder.
  QString startupError;
  QString modelDir = settings.modelDir();
  if (parser.isSet(modelOption)) {
    modelDir = QFileInfo(parser.value(modelOption)).absoluteFilePath();
    const QString problem = settings.validateModelDir(modelDir);
    if (problem.isEmpty()) {
      settings.setModelDir(modelDir);
    } else {
      startupError = QStringLiteral("--model %1: %2").arg(parser.value(modelOption), problem);
      spdlog::error("{}", startupError.toStdString());
      modelDir.clear();
    }
  }

  QVariantMap appInfo;
  appInfo.insert(QStringLiteral("version"), QStringLiteral(COSMOS_VERSION));
  appInfo.insert(QStringLiteral("dataDir"), dataDir);
  appInfo.insert(QStringLiteral("logFile"), QString::fromStdString(logOptions.file));
  appInfo.insert(QStringLiteral("databaseFile"), store.filePath());
  appInfo.insert(QStringLiteral("recoveryNotice"), store.recoveryNotice());
  appInfo.insert(QStringLiteral("storeError"), storeError);
  appInfo.insert(QStringLiteral("startupError"), startupError);
  appInfo.insert(QStringLiteral("systemDark"), systemDark);
  // Where the folder dialogs open: ~/models when it exists (the README's download target).
  const QString models = QDir::home().filePath(QStringLiteral("models"));
  appInfo.insert(QStringLiteral("modelsDir"), QFileInfo(models).isDir() ? models : QDir::homePath());
  applyLinkColor(settings.theme(), systemDark);
  QObject::connect(&settings, &cosmos::ui::SettingsViewModel::themeChanged, &app,
                   [&settings, systemDark] { applyLinkColor(settings.theme(), systemDark); });

  QQmlApplicationEngine qml;
  cosmos::ui::AppContextObjects objects;
  objects.engine = &engine;
  objects.chat = &chat;
  objects.conversations = &conversations;
  objects.searchResults = &searchResults;
  objects.transfer = &transfer;
  objects.stats = &stats;
  objects.settings = &settings;
  objects.download = &download;
  objects.appInfo = appInfo;
  cosmos::ui::exposeToQml(qml.rootContext(), objects);
  QObject::connect(
      &qml, &QQmlApplicationEngine::objectCreated, &app,
      [](QObject* object, const QUrl& url) {
        if (!object) {
          spdlog::critical("cannot create {}", url.toString().toStdString());
          QCoreApplication::exit(1);
        }
      },
      Qt::QueuedConnection);
  qml.load(QUrl(QStringLiteral("qrc:/CosmosChat/Main.qml")));
  if (qml.rootObjects().isEmpty()) return 1;

  // With a usable GPU the model loads there: "auto" then chooses among the GPU's formats by its free
  // memory (not the host's), before anything is loaded.
  if (const auto gpu = cosmos::gpu_memory_info(); gpu && gpu->total > gpu->used) {
    settings.setGpuInUse(true);
    settings.setMemoryBudget(static_cast<double>(gpu->total - gpu->used));
  }
  if (!modelDir.isEmpty()) {
    engine.loadModel(modelDir, QStringLiteral("auto"), settings.resolvedPrecision(), settings.contextLength(),
                     settings.keepQuantizedWeights(), settings.resolvedKvCache());
  }

  const int rc = QGuiApplication::exec();
  spdlog::info("cosmos-chat exits ({})", rc);
  return rc;
}
