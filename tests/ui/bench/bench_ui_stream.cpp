// bench_ui_stream: the desktop app's QML (qrc:/CosmosChat/Main.qml, the same compiled module as
// cosmos-chat) and its real view-models, with an EngineHost around the scripted FakeChatEngine
// (tests/ui/fake_chat_engine.h) streaming a realistic reply (a <think> block, then Markdown
// paragraphs, lists and code blocks) at ~1,000 pieces per second for --seconds N (default 30).
// Reported, never a failing test (not registered with ctest):
//   - frames: intervals between QQuickWindow::frameSwapped (presented frames) and between
//     afterAnimating (the GUI thread's frame ticks): count, median, p99, max, over 16.7 ms;
//   - the GUI thread's CPU time (CLOCK_THREAD_CPUTIME_ID, read on the GUI thread at the start and
//     end of the stream) as % of one core, and the process's;
//   - piecesReady signals per second and the time the GUI thread spends handling each batch
//     (ChatViewModel::onPieces and the QML bindings it updates);
//   - the final message: answer and reasoning length, Markdown blocks.
// By default the app renders only when something changes, as it does for real (the CPU use is the
// app's; frame intervals follow the ~30 Hz piecesReady batches and the animations). --continuous
// asks for a new frame as soon as one is on screen (an always-animating UI, unthrottled where the
// platform has no vsync): the intervals are then what a frame costs, and one over 16.7 ms is a
// frame that would be dropped at 60 Hz; its CPU use is that of rendering flat out.
//
// Run it on a display, under Xvfb or offscreen (the platform is reported):
//   xvfb-run -a -s "-screen 0 1920x1080x24" build/bin/bench_ui_stream --seconds 30
//   QT_QPA_PLATFORM=offscreen build/bin/bench_ui_stream --seconds 30 --continuous --json
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QGuiApplication>
#include <QJsonDocument>
#include <QJsonObject>
#include <QQmlApplicationEngine>
#include <QQmlContext>
#include <QQmlExtensionPlugin>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>
#include <QtQml/qqml.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "app_context.h"
#include "chat_view_model.h"
#include "conversation_list_model.h"
#include "conversation_store.h"
#include "conversation_transfer.h"
#include "download_view_model.h"
#include "engine_host.h"
#include "fake_chat_engine.h"
#include "message_blocks_model.h"
#include "search_results_model.h"
#include "settings_view_model.h"
#include "stats_view_model.h"

Q_IMPORT_QML_PLUGIN(CosmosChatPlugin)

namespace {

using cosmos::ui::ChatViewModel;
using cosmos::ui::EngineHost;
using cosmos::ui::testing::FakeChatEngine;
using cosmos::ui::testing::FakeScript;
using cosmos::ui::testing::FakeStream;
using Clock = std::chrono::steady_clock;

constexpr double kFrameBudgetMs = 1000.0 / 60.0;

// --- the reply ---

const char* const kReasoning[] = {
    "The user asks whether the robot arm will drop the cup. Let me look at what is known: the cup "
    "is full, the arm moves fast, and the gripper holds the cup by its side. ",
    "A fast motion means a large acceleration at the start and at the end of the move. The liquid "
    "lags behind the cup, so it sloshes toward the back and then spills over the rim. ",
    "The grip force has to balance the cup's weight plus the inertial force, m times a. If the "
    "friction coefficient is about 0.5, the normal force must be at least twice that sum.\n\n",
    "Wait, the question is about dropping, not spilling. Dropping happens when the tangential "
    "force exceeds the friction limit; spilling happens much earlier. Both matter for the answer. ",
    "I should give the physics, a rule of thumb for the acceleration, and a small check the "
    "controller can run before moving.\n\n",
};

const char* const kAnswer[] = {
    "## Will the arm drop the cup?\n\nProbably **not drop** it, but it will very likely **spill**. "
    "A full cup tolerates little acceleration: the liquid surface tilts by `atan(a / g)`, and with "
    "only a few millimetres of headroom that is a few degrees.\n\n",
    "The grip is a different story. The gripper keeps the cup as long as friction holds:\n\n"
    "- the normal force `N` times the friction coefficient `μ` must exceed `m (g + a)`;\n"
    "- a typical parallel gripper gives 20–40 N, enough for a 0.4 kg cup up to about 3 g;\n"
    "- a wet surface halves `μ`, so spilled coffee makes a drop more likely.\n\n",
    "A quick check the controller can run before each move:\n\n"
    "```python\n"
    "def safe_acceleration(mass_kg, grip_n, mu, headroom_m, radius_m, g=9.81):\n"
    "    \"\"\"Largest acceleration that neither slips nor spills.\"\"\"\n"
    "    slip = mu * grip_n / mass_kg - g\n"
    "    spill = g * headroom_m / radius_m\n"
    "    return max(0.0, min(slip, spill))\n"
    "\n"
    "print(safe_acceleration(0.4, 30, 0.5, 0.005, 0.04))\n"
    "```\n\n",
    "With these numbers the spill limit is about 1.2 m/s², far below the slip limit of about "
    "27 m/s². So the arm should *slow down*: plan the move with a trapezoidal velocity profile and "
    "cap the acceleration at the spill limit.\n\n",
    "| Case | Limit | Value |\n|---|---|---|\n| Slip | μN/m − g | 27 m/s² |\n"
    "| Spill | g·h/r | 1.2 m/s² |\n\n",
    "> In short: the cup stays in the gripper, the coffee does not. Lower the acceleration or "
    "fill the cup less.\n\n",
};

// Splits text into token-sized pieces: a word (spaces before it included, at most 5 letters), a
// punctuation mark, or a newline.
void appendPieces(const QString& text, QStringList& out) {
  QString piece;
  auto flush = [&] {
    if (!piece.isEmpty()) out << piece;
    piece.clear();
  };
  for (const QChar c : text) {
    if (c == QLatin1Char('\n')) {
      flush();
      out << QString(c);
    } else if (c == QLatin1Char(' ')) {
      if (!piece.isEmpty() && !piece.back().isSpace()) flush();
      piece += c;
    } else if (c.isLetterOrNumber()) {
      if (!piece.isEmpty() && !piece.back().isSpace() && !piece.back().isLetterOrNumber()) flush();
      int letters = 0;
      for (const QChar p : piece) letters += p.isLetterOrNumber() ? 1 : 0;
      if (letters >= 5) flush();
      piece += c;
    } else {
      flush();
      piece += c;
      flush();
    }
  }
  flush();
}

// About `total` pieces: reasoning for a tenth of them (at most 3,000), then the answer's sections
// in turn; whole sections only, so the code fences close.
QStringList replyPieces(int total) {
  QStringList pieces;
  appendPieces(QStringLiteral("<think>\n"), pieces);
  const int reasoningPieces = std::min(total / 10, 3000);
  for (std::size_t i = 0; pieces.size() < reasoningPieces; ++i)
    appendPieces(QString::fromUtf8(kReasoning[i % std::size(kReasoning)]), pieces);
  appendPieces(QStringLiteral("\n</think>\n\n<answer>\n"), pieces);
  for (std::size_t i = 0; pieces.size() < total; ++i)
    appendPieces(QString::fromUtf8(kAnswer[i % std::size(kAnswer)]), pieces);
  appendPieces(QStringLiteral("\n</answer>"), pieces);
  return pieces;
}

// The fake engine, paced on an absolute schedule: FakeStream::delayMs sleeps whole milliseconds
// per piece (about 900/s for 1 ms once the oversleep is counted); this delivers piece i at
// start + i / rate.
class PacedFakeEngine final : public cosmos::ui::ChatEngine {
 public:
  PacedFakeEngine(std::shared_ptr<FakeScript> script, double piecesPerSecond)
      : fake_(std::move(script)),
        period_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / piecesPerSecond))) {}

  cosmos::Result<cosmos::ui::EngineInfo> load(const cosmos::ui::EngineLoadRequest& request,
                                              const std::function<bool(double)>& progress) override {
    return fake_.load(request, progress);
  }
  cosmos::Result<cosmos::GenerationResult> generate(const std::vector<cosmos::ChatMessage>& messages,
                                                    const cosmos::GenerateOptions& options,
                                                    const cosmos::StreamCallback& onPiece) override {
    const Clock::time_point start = Clock::now();
    long long n = 0;
    return fake_.generate(messages, options, [&](std::string_view piece, const cosmos::GenerationStats& stats) {
      std::this_thread::sleep_until(start + period_ * (++n));
      return onPiece(piece, stats);
    });
  }
  std::vector<cosmos::Result<cosmos::GenerationResult>> generateMany(const std::vector<cosmos::ChatMessage>& messages,
                                                                     const cosmos::GenerateOptions& options, int n,
                                                                     const cosmos::ui::AnswerCallbacks& callbacks) override {
    return fake_.generateMany(messages, options, n, callbacks);  // not paced: the benchmark streams one reply
  }
  int contextUsed() const override { return fake_.contextUsed(); }

 private:
  FakeChatEngine fake_;
  Clock::duration period_;
};

// --- measurements ---

double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
double processCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Summary {
  int count = 0;
  double median = 0, p99 = 0, max = 0;
  int over = 0;  // above kFrameBudgetMs
};

Summary summarize(std::vector<double> values) {
  Summary s;
  s.count = static_cast<int>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    const auto i = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
    return values[std::min(i, values.size() - 1)];
  };
  s.median = at(0.5);
  s.p99 = at(0.99);
  s.max = values.back();
  s.over = static_cast<int>(std::count_if(values.begin(), values.end(), [](double v) { return v > kFrameBudgetMs; }));
  return s;
}

std::vector<double> intervals(const std::vector<qint64>& stampsNs) {
  std::vector<double> out;
  for (std::size_t i = 1; i < stampsNs.size(); ++i)
    out.push_back(static_cast<double>(stampsNs[i] - stampsNs[i - 1]) / 1e6);
  return out;
}

QJsonObject toJson(const Summary& s, bool frames) {
  QJsonObject o{{QStringLiteral("count"), s.count},
                {QStringLiteral("median_ms"), s.median},
                {QStringLiteral("p99_ms"), s.p99},
                {QStringLiteral("max_ms"), s.max}};
  if (frames) o.insert(QStringLiteral("over_16_7_ms"), s.over);
  return o;
}

// Timestamps of frames (frameSwapped: the render thread in the threaded render loop; guarded).
struct FrameLog {
  QElapsedTimer clock;
  std::atomic<bool> recording{false};
  std::mutex mutex;
  std::vector<qint64> swapped;      // frameSwapped
  std::vector<qint64> animating;    // afterAnimating, GUI thread only
  std::atomic<bool> swappedOnGui{false};
  std::atomic<int> allSwaps{0};
};

// Runs the event loop until pred() or the timeout; false on timeout.
template <typename Pred>
bool waitFor(Pred pred, int timeoutMs) {
  QElapsedTimer t;
  t.start();
  while (!pred()) {
    if (t.elapsed() > timeoutMs) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
  }
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  QGuiApplication app(argc, argv);
  QCoreApplication::setApplicationName(QStringLiteral("cosmos-chat-bench"));
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Streams a fake reply through the app's QML and reports frame times and CPU use."));
  parser.addHelpOption();
  const QCommandLineOption secondsOpt(QStringLiteral("seconds"), QStringLiteral("Stream for N seconds (30)."),
                                      QStringLiteral("N"), QStringLiteral("30"));
  const QCommandLineOption rateOpt(QStringLiteral("rate"), QStringLiteral("Pieces per second (1000)."),
                                   QStringLiteral("N"), QStringLiteral("1000"));
  const QCommandLineOption continuousOpt(QStringLiteral("continuous"),
                                         QStringLiteral("Ask for a frame after each frame (frame cost, not the app's cadence)."));
  const QCommandLineOption jsonOpt(QStringLiteral("json"), QStringLiteral("Print the results as JSON too."));
  parser.addOptions({secondsOpt, rateOpt, continuousOpt, jsonOpt});
  parser.process(app);
  const int seconds = std::max(1, parser.value(secondsOpt).toInt());
  const int rate = std::max(1, parser.value(rateOpt).toInt());
  const bool continuous = parser.isSet(continuousOpt);

  // Everything the app would write goes to a temporary folder.
  QTemporaryDir dir;
  if (!dir.isValid()) {
    std::fprintf(stderr, "bench_ui_stream: no temporary folder\n");
    return 1;
  }
  QQuickStyle::setStyle(QStringLiteral("Fusion"));

  auto script = std::make_shared<FakeScript>();
  cosmos::ui::testing::FakeLoad load;
  load.steps = 1;
  script->setLoad(load);
  FakeStream stream;
  stream.pieces = replyPieces(rate * seconds);
  stream.promptTokens = 40;
  script->pushStream(stream);

  cosmos::ui::ConversationStore store;
  if (!store.open(dir.filePath(QStringLiteral("conversations.sqlite")))) {
    std::fprintf(stderr, "bench_ui_stream: %s\n", qPrintable(store.lastError()));
    return 1;
  }
  cosmos::ui::SettingsViewModel settings(dir.filePath(QStringLiteral("settings.ini")));
  cosmos::ui::DownloadViewModel download(&settings, dir.filePath(QStringLiteral("download.ini")));
  EngineHost engine(std::make_unique<PacedFakeEngine>(script, rate));

  // piecesReady: counted, and the GUI thread's time in ChatViewModel::onPieces (connected between
  // the two lambdas: slots run in connection order).
  QElapsedTimer handlerClock;
  int batches = 0;
  std::vector<double> handlerMs;
  bool streaming = false;
  QObject::connect(&engine, &EngineHost::piecesReady, &app, [&] { handlerClock.start(); });
  ChatViewModel chat(&engine, &store);
  QObject::connect(&engine, &EngineHost::piecesReady, &app, [&] {
    if (!streaming) return;
    ++batches;
    handlerMs.push_back(static_cast<double>(handlerClock.nsecsElapsed()) / 1e6);
  });
  chat.setSettingsProvider([&settings] {
    return cosmos::ui::ChatSettings{settings.generateOptions(), settings.systemPrompt()};
  });
  cosmos::ui::ConversationListModel conversations(&store);
  cosmos::ui::SearchResultsModel searchResults(&store);
  cosmos::ui::ConversationTransfer transfer(&store);
  cosmos::ui::StatsViewModel stats(&engine);

  QVariantMap appInfo;
  appInfo.insert(QStringLiteral("version"), QStringLiteral("bench"));
  appInfo.insert(QStringLiteral("dataDir"), dir.path());
  appInfo.insert(QStringLiteral("logFile"), QString());
  appInfo.insert(QStringLiteral("databaseFile"), store.filePath());
  appInfo.insert(QStringLiteral("recoveryNotice"), QString());
  appInfo.insert(QStringLiteral("storeError"), QString());
  appInfo.insert(QStringLiteral("startupError"), QString());
  appInfo.insert(QStringLiteral("systemDark"), false);
  appInfo.insert(QStringLiteral("modelsDir"), dir.path());

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
  qml.load(QUrl(QStringLiteral("qrc:/CosmosChat/Main.qml")));
  auto* window = qml.rootObjects().isEmpty() ? nullptr : qobject_cast<QQuickWindow*>(qml.rootObjects().first());
  if (!window) {
    std::fprintf(stderr, "bench_ui_stream: cannot create qrc:/CosmosChat/Main.qml\n");
    return 1;
  }
  window->resize(1240, 820);  // the app's default size, whatever the screen

  FrameLog frames;
  frames.clock.start();
  QThread* guiThread = QThread::currentThread();
  QObject::connect(window, &QQuickWindow::frameSwapped, window, [&frames, guiThread] {
    ++frames.allSwaps;
    if (QThread::currentThread() == guiThread) frames.swappedOnGui = true;
    if (!frames.recording) return;
    std::lock_guard lock(frames.mutex);
    frames.swapped.push_back(frames.clock.nsecsElapsed());
  }, Qt::DirectConnection);
  QObject::connect(window, &QQuickWindow::afterAnimating, window, [&frames] {
    if (frames.recording) frames.animating.push_back(frames.clock.nsecsElapsed());
  });
  if (continuous) {
    // Queued to the GUI thread: ask for the next frame once one is on screen.
    QObject::connect(window, &QQuickWindow::frameSwapped, window, [window] { window->update(); }, Qt::QueuedConnection);
  }

  engine.loadModel(QStringLiteral("/bench/fake-model"));
  if (!waitFor([&] { return engine.state() == EngineHost::Ready && frames.allSwaps > 0; }, 20000)) {
    std::fprintf(stderr, "bench_ui_stream: the fake model did not load or no frame was shown\n");
    return 1;
  }
  waitFor([] { return false; }, 1000);  // settle: the chat view is laid out

  // The stream.
  {
    std::lock_guard lock(frames.mutex);
    frames.recording = true;
  }
  streaming = true;
  QElapsedTimer wall;
  wall.start();
  const double guiCpu0 = threadCpuSeconds();
  const double procCpu0 = processCpuSeconds();
  if (!chat.send(QStringLiteral("A robot arm holds a full cup and moves fast. Is it about to drop the cup?"))) {
    std::fprintf(stderr, "bench_ui_stream: send refused: %s\n", qPrintable(chat.blockedReason()));
    return 1;
  }
  const bool finished = waitFor([&] { return !chat.busy(); }, (seconds * 3 + 30) * 1000);
  const double guiCpu = threadCpuSeconds() - guiCpu0;
  const double procCpu = processCpuSeconds() - procCpu0;
  const double wallS = static_cast<double>(wall.nsecsElapsed()) / 1e9;
  streaming = false;
  {
    std::lock_guard lock(frames.mutex);
    frames.recording = false;
  }
  waitFor([] { return false; }, 300);  // the last frames

  const int last = chat.rowCount() - 1;
  const QModelIndex reply = chat.index(last);
  const QString content = chat.data(reply, ChatViewModel::ContentRole).toString();
  const QString reasoning = chat.data(reply, ChatViewModel::ReasoningRole).toString();
  auto* blocks = qobject_cast<cosmos::ui::MessageBlocksModel*>(chat.data(reply, ChatViewModel::BlocksRole).value<QObject*>());
  const int blockCount = blocks ? blocks->rowCount() : 0;

  std::vector<qint64> swapped;
  {
    std::lock_guard lock(frames.mutex);
    swapped = frames.swapped;
  }
  const Summary presented = summarize(intervals(swapped));
  const Summary ticks = summarize(intervals(frames.animating));
  const Summary handler = summarize(handlerMs);
  const QString platform = QGuiApplication::platformName();
  const QString renderLoop = frames.swappedOnGui ? QStringLiteral("basic (frames on the GUI thread)")
                                                 : QStringLiteral("threaded (frames on the render thread)");
  const QString mode = continuous ? QStringLiteral("continuous (a frame requested after each frame)")
                                  : QStringLiteral("natural (frames only on changes)");

  std::printf("bench_ui_stream: %d s at %d pieces/s, platform %s, %s render loop, %s\n", seconds, rate,
              qPrintable(platform), qPrintable(renderLoop), qPrintable(mode));
  std::printf("  stream: %lld pieces in %.2f s wall (%s)\n", static_cast<long long>(stream.pieces.size()), wallS,
              finished ? "finished" : "TIMED OUT");
  std::printf("  %-30s %7s %9s %9s %9s %9s\n", "", "count", "median", "p99", "max", ">16.7ms");
  auto row = [](const char* name, const Summary& s, bool frameRow) {
    std::printf("  %-30s %7d %7.2fms %7.2fms %7.2fms", name, s.count, s.median, s.p99, s.max);
    if (frameRow) std::printf(" %9d", s.over);
    std::printf("\n");
  };
  row("frame interval (frameSwapped)", presented, true);
  row("GUI frame tick (afterAnimating)", ticks, true);
  row("piecesReady handling (GUI)", handler, false);
  std::printf("  frames/s %.1f; piecesReady %.1f/s (%d batches)\n", presented.count / wallS, batches / wallS, batches);
  std::printf("  CPU: GUI thread %.1f%% of one core (%.2f s), whole process %.1f%% (%.2f s)\n",
              100.0 * guiCpu / wallS, guiCpu, 100.0 * procCpu / wallS, procCpu);
  std::printf("  final reply: answer %lld chars, reasoning %lld chars, %d Markdown blocks\n",
              static_cast<long long>(content.size()), static_cast<long long>(reasoning.size()), blockCount);

  if (parser.isSet(jsonOpt)) {
    QJsonObject o{
        {QStringLiteral("seconds"), seconds},
        {QStringLiteral("rate"), rate},
        {QStringLiteral("platform"), platform},
        {QStringLiteral("render_loop"), frames.swappedOnGui ? QStringLiteral("basic") : QStringLiteral("threaded")},
        {QStringLiteral("continuous"), continuous},
        {QStringLiteral("finished"), finished},
        {QStringLiteral("pieces"), static_cast<int>(stream.pieces.size())},
        {QStringLiteral("wall_s"), wallS},
        {QStringLiteral("frame_interval"), toJson(presented, true)},
        {QStringLiteral("gui_frame_tick"), toJson(ticks, true)},
        {QStringLiteral("pieces_ready_handling"), toJson(handler, false)},
        {QStringLiteral("pieces_ready_per_s"), batches / wallS},
        {QStringLiteral("gui_cpu_percent"), 100.0 * guiCpu / wallS},
        {QStringLiteral("process_cpu_percent"), 100.0 * procCpu / wallS},
        {QStringLiteral("answer_chars"), static_cast<int>(content.size())},
        {QStringLiteral("reasoning_chars"), static_cast<int>(reasoning.size())},
        {QStringLiteral("blocks"), blockCount},
    };
    std::printf("%s\n", QJsonDocument(o).toJson(QJsonDocument::Indented).constData());
  }
  return finished ? 0 : 2;
}
