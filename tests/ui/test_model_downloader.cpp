// The model download (HubClient, FileDownload, ModelDownloader, DownloadViewModel, `cosmos-cli
// download`) against a local stand-in for the Hugging Face Hub (fake_hub_server.h): a complete
// download with every hash checked, a dropped connection resumed with Range, a restart from a
// .part, 404, 401 and the token, a corrupted file, too little disk space, pause/resume and cancel.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRandomGenerator>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <functional>

#include "cosmos/test_model.h"
#include "download_view_model.h"
#include "fake_hub_server.h"
#include "hub_client.h"
#include "model_downloader.h"
#include "settings_view_model.h"

using cosmos::ui::DownloadRequest;
using cosmos::ui::DownloadViewModel;
using cosmos::ui::HubClient;
using cosmos::ui::ModelDownloader;
using cosmos::ui::RetryPolicy;
using cosmos::ui::SettingsViewModel;

namespace {

const QString kRepo = QStringLiteral("acme/tiny-model");

QByteArray randomBytes(int size, quint32 seed) {
  QByteArray out(size, Qt::Uninitialized);
  QRandomGenerator gen(seed);
  for (int i = 0; i < size; ++i) out[i] = static_cast<char>(gen.bounded(256));
  return out;
}

QByteArray readFile(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void writeFile(const QString& path, const QByteArray& data) {
  QDir().mkpath(QFileInfo(path).absolutePath());
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(data);
}

bool waitFor(const std::function<bool()>& done, int timeoutMs = 30000) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > timeoutMs) return false;
    QTest::qWait(10);
  }
  return true;
}

RetryPolicy fastRetries() {
  RetryPolicy p;
  p.maxAttempts = 4;
  p.firstDelayMs = 20;
  p.maxDelayMs = 100;
  p.stallTimeoutMs = 20000;
  return p;
}

// The outcome of one run of a ModelDownloader.
struct Outcome {
  ModelDownloader::State state = ModelDownloader::State::Idle;
  QString error;
  QString cancelled;
  QStringList notices;
};

}  // namespace

class TestModelDownloader : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  FakeHub hub_;
  QMap<QString, QByteArray> files_;  // the repository's files
  int counter_ = 0;
  QString out_;

  QString file(const QString& path) const { return QDir(out_).filePath(path); }

  void addRepo() {
    for (auto it = files_.cbegin(); it != files_.cend(); ++it)
      hub_.addFile(kRepo, QStringLiteral("main"), it.key(), it.value(), it.key().endsWith(QLatin1String(".safetensors")));
  }

  DownloadRequest request(const QString& repo = kRepo) const {
    DownloadRequest r;
    r.repo = repo;
    r.outDir = out_;
    r.endpoint = hub_.endpoint();
    return r;
  }

  Outcome run(ModelDownloader& d, const DownloadRequest& r) {
    Outcome o;
    QObject ctx;
    connect(&d, &ModelDownloader::failed, &ctx, [&o](const QString& m) { o.error = m; });
    connect(&d, &ModelDownloader::cancelled, &ctx, [&o](const QString& m) { o.cancelled = m; });
    connect(&d, &ModelDownloader::notice, &ctx, [&o](const QString& m) { if (!m.isEmpty()) o.notices << m; });
    d.start(r);
    if (!waitFor([&d] { return !d.active(); })) qWarning("the download did not end");
    o.state = d.state();
    return o;
  }

  Outcome run(const DownloadRequest& r, qint64 freeSpace = -1) {
    ModelDownloader d;
    d.setRetryPolicy(fastRetries());
    if (freeSpace >= 0) d.setFreeSpaceProvider([freeSpace](const QString&) { return freeSpace; });
    return run(d, r);
  }

  void verifyAllFiles() {
    for (auto it = files_.cbegin(); it != files_.cend(); ++it) {
      QVERIFY2(readFile(file(it.key())) == it.value(), qPrintable(it.key()));
      QVERIFY(!QFile::exists(file(it.key()) + QStringLiteral(".part")));
    }
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    qunsetenv("HF_TOKEN");
    qunsetenv("HUGGING_FACE_HUB_TOKEN");
    qunsetenv("HF_TOKEN_PATH");
    qunsetenv("HF_ENDPOINT");
    qputenv("HF_HOME", tmp_.filePath(QStringLiteral("hf-home")).toUtf8());  // no saved token
    QCoreApplication::setApplicationName(QStringLiteral("cosmos-chat-test"));
    QVERIFY(hub_.listen());
    files_[QStringLiteral("config.json")] = "{\"model_type\": \"fake\"}\n";
    files_[QStringLiteral("model-00001-of-00002.safetensors")] = randomBytes(700000, 1);
    files_[QStringLiteral("model-00002-of-00002.safetensors")] = randomBytes(1300000, 2);
    files_[QStringLiteral("tokenizer/vocab.txt")] = randomBytes(150000, 3);
    files_[QStringLiteral("empty.txt")] = QByteArray();
    addRepo();
    hub_.addFile(kRepo, QStringLiteral("with-missing"), QStringLiteral("config.json"), "{}", false);
    hub_.addFile(kRepo, QStringLiteral("with-missing"), QStringLiteral("missing.bin"), "x", false);
    hub_.addFile(QStringLiteral("acme/evil"), QStringLiteral("main"), QStringLiteral("../outside.txt"), "x", false);
  }

  void init() {
    out_ = tmp_.filePath(QStringLiteral("out-%1").arg(++counter_));
    hub_.requests.clear();
    hub_.faults.clear();
    hub_.requiredToken.clear();
    hub_.pageSize = 0;
    hub_.redirectHost.clear();
    qunsetenv("HF_TOKEN");
  }

  void endpoint_data() {
    QTest::addColumn<QString>("explicitEndpoint");
    QTest::addColumn<QString>("env");
    QTest::addColumn<QString>("expected");
    QTest::newRow("default") << "" << "" << "https://huggingface.co";
    QTest::newRow("HF_ENDPOINT") << "" << "https://hf-mirror.com/" << "https://hf-mirror.com";
    QTest::newRow("setting wins") << "http://127.0.0.1:9/" << "https://hf-mirror.com" << "http://127.0.0.1:9";
    QTest::newRow("blank setting") << "  " << "http://mirror.local" << "http://mirror.local";
  }
  void endpoint() {
    QFETCH(QString, explicitEndpoint);
    QFETCH(QString, env);
    QFETCH(QString, expected);
    qputenv("HF_ENDPOINT", env.toUtf8());
    QCOMPARE(HubClient::resolveEndpoint(explicitEndpoint), expected);
    qunsetenv("HF_ENDPOINT");
    QVERIFY(HubClient::checkEndpoint(QStringLiteral("ftp://x")).contains(QStringLiteral("not an http(s) URL")));
    QCOMPARE(HubClient::checkEndpoint(hub_.endpoint()), QString());
  }

  void names_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<bool>("repoOk");
    QTest::addColumn<bool>("pathOk");
    QTest::newRow("owner/name") << "nvidia/Cosmos-Reason1-7B" << true << true;
    QTest::newRow("name only") << "gpt2" << true << true;
    QTest::newRow("nested path") << "a/b/c" << false << true;
    QTest::newRow("dot dot") << "../x" << false << false;
    QTest::newRow("absolute") << "/etc/passwd" << false << false;
    QTest::newRow("space") << "nvidia/Cosmos Reason" << false << true;
    QTest::newRow("empty") << "" << false << false;
    QTest::newRow("dot segment") << "a/./b" << false << false;
  }
  void names() {
    QFETCH(QString, text);
    QFETCH(bool, repoOk);
    QFETCH(bool, pathOk);
    QCOMPARE(HubClient::checkRepo(text).isEmpty(), repoOk);
    QCOMPARE(HubClient::isSafePath(text), pathOk);
  }

  void urls() {
    cosmos::ui::HubTarget t;
    t.endpoint = QStringLiteral("https://huggingface.co");
    t.repo = QStringLiteral("nvidia/Cosmos-Reason1-7B");
    t.revision = QStringLiteral("refs/pr/1");
    HubClient c(nullptr, t, {});
    QCOMPARE(c.treeUrl().toString(QUrl::FullyEncoded),
             QStringLiteral("https://huggingface.co/api/models/nvidia/Cosmos-Reason1-7B/tree/refs%2Fpr%2F1?recursive=true"));
    QCOMPARE(c.fileUrl(QStringLiteral("sub dir/a#b.json")).toString(QUrl::FullyEncoded),
             QStringLiteral("https://huggingface.co/nvidia/Cosmos-Reason1-7B/resolve/refs%2Fpr%2F1/sub%20dir/a%23b.json"));
  }

  // Scenarios that start from an empty folder.
  void download_data() {
    QTest::addColumn<QString>("scenario");
    QTest::addColumn<QString>("revision");
    QTest::addColumn<QString>("error");  // empty: succeeds
    QTest::newRow("complete") << "complete" << "main" << "";
    QTest::newRow("paged file list") << "paged" << "main" << "";
    QTest::newRow("dropped mid-file, resumed with Range") << "drop" << "main" << "";
    QTest::newRow("dropped in a small file") << "drop-small" << "main" << "";
    QTest::newRow("HTTP 503 once") << "503" << "main" << "";
    QTest::newRow("Range ignored after a drop") << "ignore-range" << "main" << "";
    QTest::newRow("always 500") << "500" << "main" << "gave up after 4 attempts";
    QTest::newRow("404 file") << "404" << "with-missing" << "not found: acme/tiny-model/with-missing/missing.bin (HTTP 404)";
    QTest::newRow("404 revision") << "404" << "nope" << "not found: acme/tiny-model/nope (file list) (HTTP 404)";
    QTest::newRow("corrupt LFS file") << "corrupt" << "main" << "model-00002-of-00002.safetensors is corrupt: its SHA-256";
    QTest::newRow("corrupt small file") << "corrupt-small" << "main" << "config.json is corrupt: its git SHA-1";
    QTest::newRow("not enough disk space") << "disk" << "main" << "Not enough free disk space in";
    QTest::newRow("unsafe path") << "evil" << "main" << "unsafe path, \"../outside.txt\"";
    QTest::newRow("unreachable hub") << "unreachable" << "main" << "Cannot reach the hub at http://127.0.0.1:1: Connection refused";
  }
  void download() {
    QFETCH(QString, scenario);
    QFETCH(QString, revision);
    QFETCH(QString, error);
    const QString big = QStringLiteral("model-00002-of-00002.safetensors");
    qint64 freeSpace = -1;
    DownloadRequest r = request(scenario == u"evil" ? QStringLiteral("acme/evil") : kRepo);
    r.revision = revision;
    if (scenario == u"paged") hub_.pageSize = 2;
    if (scenario == u"unreachable") r.endpoint = QStringLiteral("http://127.0.0.1:1");
    if (scenario == u"drop") hub_.faults[big].dropAfter = 400000;
    if (scenario == u"drop-small") hub_.faults[QStringLiteral("config.json")].dropAfter = 5;
    if (scenario == u"503") hub_.faults[big].statusOnce = 503;
    if (scenario == u"500") hub_.faults[big].status = 500;
    if (scenario == u"ignore-range") {
      hub_.faults[big].dropAfter = 400000;
      hub_.faults[big].ignoreRange = true;
    }
    if (scenario == u"404") hub_.faults[QStringLiteral("missing.bin")].status = 404;
    if (scenario == u"corrupt") hub_.faults[big].corrupt = true;
    if (scenario == u"corrupt-small") hub_.faults[QStringLiteral("config.json")].corrupt = true;
    if (scenario == u"disk") freeSpace = 1000000;

    const Outcome o = run(r, freeSpace);
    if (!error.isEmpty()) {
      QCOMPARE(o.state, ModelDownloader::State::Failed);
      QVERIFY2(o.error.contains(error), qPrintable(o.error));
      if (scenario.startsWith(QLatin1String("corrupt"))) {  // never becomes the file; the bad bytes are gone
        const QString name = scenario == u"corrupt" ? big : QStringLiteral("config.json");
        QVERIFY(!QFile::exists(file(name)));
        QVERIFY(!QFile::exists(file(name) + QStringLiteral(".part")));
      }
      if (scenario == u"disk") {
        QVERIFY2(o.error.contains(QStringLiteral("needs 2.2 MB more, only 1.0 MB are free")), qPrintable(o.error));
        QCOMPARE(hub_.count("/resolve/"), 0);
      }
      if (scenario == u"evil") QVERIFY(!QFile::exists(tmp_.filePath(QStringLiteral("outside.txt"))));
      return;
    }
    QVERIFY2(o.state == ModelDownloader::State::Finished, qPrintable(o.error));
    verifyAllFiles();
    QVERIFY(hub_.count("/cdn/") >= 2);  // the LFS files came through the redirect
    if (scenario == u"complete") QCOMPARE(hub_.count("/resolve/", true), 0);
    if (scenario == u"paged") QCOMPARE(hub_.count("/tree/"), 3);  // 6 entries (5 files, 1 folder) in pages of 2
    if (scenario == u"drop") {
      QCOMPARE(hub_.ranges(big.toUtf8()), (QList<QByteArray>{"bytes=400000-", "bytes=400000-"}));  // resolve, then cdn
      QVERIFY(!o.notices.filter(QStringLiteral("retrying in")).isEmpty());
    }
    if (scenario == u"drop-small") QCOMPARE(hub_.ranges("config.json"), QList<QByteArray>{"bytes=5-"});
    if (scenario == u"ignore-range") QCOMPARE(hub_.count(big.toUtf8(), true), 2);
    if (scenario == u"503") QCOMPARE(hub_.count(("/resolve/main/" + big).toUtf8()), 2);
  }

  // A .part left by an earlier run (or a file already complete) is resumed, not fetched again.
  void restart_data() {
    QTest::addColumn<QString>("scenario");
    QTest::addColumn<QString>("error");
    QTest::newRow("good .part resumes with Range") << "good-part" << "";
    QTest::newRow(".part with wrong bytes") << "bad-part" << "is corrupt";
    QTest::newRow(".part longer than the file") << "long-part" << "";
    QTest::newRow("complete .part") << "full-part" << "";
    QTest::newRow("file already there") << "have-file" << "";
    QTest::newRow("file there with another size") << "wrong-size" << "";
  }
  void restart() {
    QFETCH(QString, scenario);
    QFETCH(QString, error);
    const QString big = QStringLiteral("model-00002-of-00002.safetensors");
    const QByteArray content = files_[big];
    const QString part = file(big) + QStringLiteral(".part");
    if (scenario == u"good-part") writeFile(part, content.left(600000));
    if (scenario == u"bad-part") writeFile(part, randomBytes(600000, 99));
    if (scenario == u"long-part") writeFile(part, content + "extra");
    if (scenario == u"full-part") writeFile(part, content);
    if (scenario == u"have-file") writeFile(file(big), content);
    if (scenario == u"wrong-size") writeFile(file(big), "old");
    const Outcome o = run(request());
    if (!error.isEmpty()) {
      QVERIFY2(o.error.contains(error), qPrintable(o.error));
      QVERIFY(!QFile::exists(file(big)) && !QFile::exists(part));
      return;
    }
    QVERIFY2(o.state == ModelDownloader::State::Finished, qPrintable(o.error));
    verifyAllFiles();
    const QByteArray resolve = "/resolve/main/" + big.toUtf8();
    if (scenario == u"good-part") {
      QCOMPARE(hub_.ranges(resolve), QList<QByteArray>{"bytes=600000-"});
      QVERIFY(o.notices.join(QLatin1Char('\n')).contains(QStringLiteral("Resuming")));
    }
    if (scenario == u"long-part" || scenario == u"wrong-size") {
      QCOMPARE(hub_.count(resolve), 1);
      QCOMPARE(hub_.count(resolve, true), 0);
    }
    if (scenario == u"full-part" || scenario == u"have-file") QCOMPARE(hub_.count(resolve), 0);
  }

  void auth_data() {
    QTest::addColumn<QString>("envToken");
    QTest::addColumn<QString>("fileToken");
    QTest::addColumn<QString>("error");
    QTest::newRow("no token: 401") << "" << "" << "needs a Hugging Face token (HF_TOKEN) (HTTP 401)";
    QTest::newRow("HF_TOKEN") << "secret" << "" << "";
    QTest::newRow("wrong HF_TOKEN") << "wrong" << "" << "the token given was refused";
    QTest::newRow("huggingface-cli login token") << "" << "secret" << "";
  }
  void auth() {
    QFETCH(QString, envToken);
    QFETCH(QString, fileToken);
    QFETCH(QString, error);
    hub_.requiredToken = "secret";
    hub_.redirectHost = QStringLiteral("localhost");  // another host: the token must not follow
    const QString home = tmp_.filePath(QStringLiteral("hf-home-%1").arg(counter_));
    qputenv("HF_HOME", home.toUtf8());
    if (!fileToken.isEmpty()) writeFile(home + QStringLiteral("/token"), fileToken.toUtf8() + "\n");
    if (!envToken.isEmpty()) qputenv("HF_TOKEN", envToken.toUtf8());
    const Outcome o = run(request());
    qputenv("HF_HOME", tmp_.filePath(QStringLiteral("hf-home")).toUtf8());
    if (!error.isEmpty()) {
      QCOMPARE(o.state, ModelDownloader::State::Failed);
      QVERIFY2(o.error.contains(error), qPrintable(o.error));
      return;
    }
    QVERIFY2(o.state == ModelDownloader::State::Finished, qPrintable(o.error));
    verifyAllFiles();
    for (const FakeHub::Request& req : hub_.requests) {
      if (req.path.startsWith("/cdn/"))
        QVERIFY2(req.authorization.isEmpty(), req.path.constData());
      else
        QCOMPARE(req.authorization, QByteArray("Bearer secret"));
    }
  }

  // Cancel keeps the .part; a new start resumes it with Range. Pause/resume continues the same way.
  void interrupt_data() {
    QTest::addColumn<bool>("pause");
    QTest::newRow("cancel, then start again") << false;
    QTest::newRow("pause, then resume") << true;
  }
  void interrupt() {
    QFETCH(bool, pause);
    const QString big = QStringLiteral("model-00002-of-00002.safetensors");
    hub_.faults[big].stallAfter = 250000;
    ModelDownloader d;
    d.setRetryPolicy(fastRetries());
    QSignalSpy cancelled(&d, &ModelDownloader::cancelled);
    QSignalSpy finished(&d, &ModelDownloader::finished);
    d.start(request());
    const qint64 before = files_.value(QStringLiteral("config.json")).size() + files_.value(QStringLiteral("empty.txt")).size() +
                          files_.value(QStringLiteral("model-00001-of-00002.safetensors")).size();
    QVERIFY(waitFor([&] { return d.bytesDone() >= before + 250000; }));
    hub_.faults[big].stallAfter = -1;
    if (pause) {
      d.pause();
      QCOMPARE(d.state(), ModelDownloader::State::Paused);
      QTest::qWait(50);
      QCOMPARE(d.state(), ModelDownloader::State::Paused);
      d.resume();
      QVERIFY(waitFor([&] { return !d.active(); }));
    } else {
      d.cancel();
      QCOMPARE(d.state(), ModelDownloader::State::Cancelled);
      QCOMPARE(cancelled.count(), 1);
      const QString message = cancelled.at(0).at(0).toString();
      QVERIFY2(message.contains(QStringLiteral("kept in")) && message.contains(QStringLiteral(".part")), qPrintable(message));
      QCOMPARE(QFileInfo(file(big) + QStringLiteral(".part")).size(), 250000);
      QVERIFY(!QFile::exists(file(big)));
      hub_.closeStalled();
      const Outcome o = run(d, request());
      QVERIFY2(o.state == ModelDownloader::State::Finished, qPrintable(o.error));
    }
    hub_.closeStalled();
    QCOMPARE(d.state(), ModelDownloader::State::Finished);
    QCOMPARE(finished.count(), 1);
    verifyAllFiles();
    QVERIFY(hub_.ranges(("/resolve/main/" + big).toUtf8()).contains("bytes=250000-"));
  }

  // The page's view-model: on its thread, progress, and the model folder set when it is a model.
  void viewModel_data() {
    QTest::addColumn<bool>("realModel");
    QTest::newRow("not a model folder") << false;
    QTest::newRow("the tiny model") << true;
  }
  void viewModel() {
    QFETCH(bool, realModel);
    QString repo = kRepo;
    if (realModel) {
      if (!QFile::exists(QStringLiteral(COSMOS_TEST_TOKENIZER))) QSKIP("test tokenizer missing: run packaging/setup.sh");
      const QString dir = tmp_.filePath(QStringLiteral("tiny-source"));
      cosmos::TestModelOptions o;
      o.preset = "tiny";
      o.seed = 1;
      o.shards = 2;
      o.tokenizer_json = COSMOS_TEST_TOKENIZER;
      o.out_dir = dir.toStdString();
      const auto st = cosmos::make_test_model(o);
      QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
      repo = QStringLiteral("acme/tiny-real");
      for (const QFileInfo& fi : QDir(dir).entryInfoList(QDir::Files))
        hub_.addFile(repo, QStringLiteral("main"), fi.fileName(), readFile(fi.filePath()),
                     fi.fileName().endsWith(QLatin1String(".safetensors")));
    }
    SettingsViewModel settings(tmp_.filePath(QStringLiteral("settings-%1.ini").arg(counter_)));
    DownloadViewModel vm(&settings, tmp_.filePath(QStringLiteral("download-%1.ini").arg(counter_)));
    QCOMPARE(vm.repo(), QStringLiteral("nvidia/Cosmos-Reason1-7B"));
    QCOMPARE(vm.targetDir(), QDir::home().filePath(QStringLiteral("models/Cosmos-Reason1-7B")));
    vm.setRepo(repo);
    vm.setDestination(QUrl::fromLocalFile(out_).toString());
    vm.setEndpoint(hub_.endpoint());
    QCOMPARE(vm.targetDir(), out_);
    QCOMPARE(vm.effectiveEndpoint(), hub_.endpoint());
    vm.setRetryPolicy(fastRetries());
    QSignalSpy finished(&vm, &DownloadViewModel::finished);
    vm.start();
    QVERIFY(vm.active());
    QVERIFY(finished.wait(60000));
    QCOMPARE(vm.state(), QStringLiteral("finished"));
    QCOMPARE(vm.fraction(), 1.0);
    QCOMPARE(vm.fileIndex(), vm.fileCount());
    QVERIFY(vm.statusText().contains(QStringLiteral("Downloaded ") + repo));
    if (realModel) {
      QVERIFY2(vm.modelReady(), qPrintable(vm.errorText()));
      QCOMPARE(settings.modelDir(), out_);
    } else {
      QVERIFY(!vm.modelReady());
      QVERIFY2(vm.errorText().contains(QStringLiteral("cannot be loaded as a model")), qPrintable(vm.errorText()));
      QCOMPARE(settings.modelDir(), QString());
    }
    // Remembered for the next time.
    DownloadViewModel again(&settings, tmp_.filePath(QStringLiteral("download-%1.ini").arg(counter_)));
    QCOMPARE(again.repo(), repo);
    QCOMPARE(again.destination(), out_);
    QCOMPARE(again.endpoint(), hub_.endpoint());
  }

  void formatting_data() {
    QTest::addColumn<double>("seconds");
    QTest::addColumn<QString>("text");
    QTest::newRow("unknown") << -1.0 << "";
    QTest::newRow("seconds") << 12.4 << "12 s";
    QTest::newRow("minutes") << 200.0 << "3 min 20 s";
    QTest::newRow("hours") << 7500.0 << "2 h 05 min";
  }
  void formatting() {
    QFETCH(double, seconds);
    QFETCH(QString, text);
    QCOMPARE(DownloadViewModel::formatDuration(seconds), text);
  }

  void cli_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("token");
    QTest::addColumn<int>("exitCode");
    QTest::addColumn<QString>("check");  // in stderr on failure, in stdout on success
    QTest::newRow("download") << QStringList{"--repo", kRepo} << "" << 0 << "downloaded acme/tiny-model (main) into";
    QTest::newRow("404 repository") << QStringList{"--repo", "acme/nothing"} << "" << 1
                                    << "not found: acme/nothing/main (file list) (HTTP 404)";
    QTest::newRow("401 without token") << QStringList{"--repo", kRepo, "--revision", "main"} << "-" << 1
                                       << "needs a Hugging Face token (HF_TOKEN)";
    QTest::newRow("HF_TOKEN") << QStringList{"--repo", kRepo} << "secret" << 0 << "every file verified";
    QTest::newRow("bad repository id") << QStringList{"--repo", "not a repo"} << "" << 1
                                       << "is not a Hugging Face repository id";
    QTest::newRow("no --out") << QStringList{"--repo", kRepo, "NOOUT"} << "" << 106 << "--out";
  }
  void cli() {
#ifndef COSMOS_CLI_PATH
    QSKIP("cosmos-cli is not built");
#else
    QFETCH(QStringList, args);
    QFETCH(QString, token);
    QFETCH(int, exitCode);
    QFETCH(QString, check);
    if (!token.isEmpty()) hub_.requiredToken = "secret";
    QStringList all{QStringLiteral("--log-file"), tmp_.filePath(QStringLiteral("cli.log")), QStringLiteral("download"),
                    QStringLiteral("--endpoint"), hub_.endpoint()};
    if (args.removeAll(QStringLiteral("NOOUT")) == 0) all << QStringLiteral("--out") << out_;
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove(QStringLiteral("HF_TOKEN"));
    if (token == u"secret") env.insert(QStringLiteral("HF_TOKEN"), token);
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(COSMOS_CLI_PATH), all + args);
    QVERIFY(p.waitForStarted());
    // The hub answers on this thread's event loop: wait without blocking it.
    QVERIFY(waitFor([&p] { return p.state() == QProcess::NotRunning; }, 60000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(p.exitCode() == exitCode, qPrintable(QStringLiteral("exit code %1: %2").arg(p.exitCode()).arg(err)));
    if (exitCode != 0) {
      QVERIFY2(err.contains(check), qPrintable(err));
      return;
    }
    QVERIFY2(out.contains(check), qPrintable(out));
    QVERIFY2(err.contains(QStringLiteral("100.0%")), qPrintable(err));  // the progress line
    verifyAllFiles();
#endif
  }
};

QTEST_MAIN(TestModelDownloader)
#include "test_model_downloader.moc"
