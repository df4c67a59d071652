// ChatViewModel "Generate N answers" (generateAnswers / sendForAnswers) over the fixture of
// chat_view_model_fixture.h, with the FakeChatEngine's scripted batches (answers interleaved
// round-robin): n sibling replies under the user message, each streaming only its own text into
// its own message (interleaved pieces land in the right one), switching between them while they
// stream, an answer restarted by the engine starting over, stop keeping every partial answer, a
// failed answer keeping the others, what is stored (reloaded and compared), the seeds, the prompt
// sent, and the action refused with greedy sampling.
#include <QSignalSpy>
#include <QtTest>

#include "chat_view_model_fixture.h"

using cosmos::ui::StoredMessage;

namespace {

constexpr std::uint64_t kSeed = 1000;

// Answer i's pieces: distinct per answer, so a piece in the wrong sibling shows.
QStringList piecesOf(int i, int count) {
  QStringList out;
  for (int k = 0; k < count; ++k) out << QStringLiteral("a%1.%2 ").arg(i + 1).arg(k);
  out << QStringLiteral("end%1").arg(i + 1);
  return out;
}
QString textOf(int i, int count) { return piecesOf(i, count).join(QString()); }

}  // namespace

class TestChatViewModelAnswers : public QObject, protected ChatViewModelFixture {
  Q_OBJECT

 private:
  void useSampling(float temperature, int topK = 0) {
    vm_->setSettingsProvider([temperature, topK] {
      ChatSettings s;
      s.systemPrompt = QStringLiteral("SYS");
      s.options.max_new_tokens = 64;
      s.options.sampling.temperature = temperature;
      s.options.sampling.top_k = topK;
      s.options.sampling.seed = kSeed;
      return s;
    });
    vm_->notifySettingsChanged();
  }
  // The conversation "ask" → "first" (one reply), then sampling that allows several answers.
  bool askedOnce() {
    if (!loadModel() || !sendReplied(QStringLiteral("ask"), QStringLiteral("first"))) return false;
    useSampling(0.8f);
    return true;
  }
  qint64 askId() const { return cell(0, ChatViewModel::MessageIdRole).toLongLong(); }
  // The stored replies under "ask" that came from the batch (the first one is the single reply).
  QList<StoredMessage> answers() const {
    QList<StoredMessage> all = store_->children(askId(), vm_->conversationId());
    if (!all.isEmpty()) all.removeFirst();
    return all;
  }
  static FakeBatch batchOf(int n, int pieces, int delayMs) {
    FakeBatch b;
    b.delayMs = delayMs;
    for (int i = 0; i < n; ++i) {
      FakeAnswer a;
      a.pieces = piecesOf(i, pieces);
      b.answers.push_back(a);
    }
    return b;
  }

 private slots:
  void init() { initFixture(); }
  void cleanup() { cleanupFixture(); }

  void exposesTheProperties() {
    const QMetaObject* mo = vm_->metaObject();
    for (const char* name : {"canGenerateAnswers", "answersBlockedReason", "canSwitchVersions"}) {
      const int i = mo->indexOfProperty(name);
      QVERIFY2(i >= 0 && mo->property(i).hasNotifySignal(), name);
    }
    QCOMPARE(vm_->property("minAnswers").toInt(), 2);
    QCOMPARE(vm_->property("maxAnswers").toInt(), 8);
    QVERIFY(vm_->roleNames().values().contains(QByteArray("error")));
  }

  void answersStreamIntoTheirOwnSiblings_data() {
    QTest::addColumn<int>("n");
    QTest::newRow("2 answers") << 2;
    QTest::newRow("3 answers") << 3;
    QTest::newRow("8 answers") << 8;
  }
  void answersStreamIntoTheirOwnSiblings() {
    QFETCH(int, n);
    QVERIFY(askedOnce());
    const int pieces = 5;
    script_->pushBatch(batchOf(n, pieces, 12));  // ~70 ms: several batches of text reach the view
    QStringList shown;                           // row 1's text at each change
    int otherRows = 0;
    connect(vm_.get(), &QAbstractItemModel::dataChanged, this, [&](const QModelIndex& a, const QModelIndex& b) {
      if (a.row() != 1 || b.row() != 1) ++otherRows;
      shown << cell(1, ChatViewModel::ContentRole).toString();
    });
    QSignalSpy reset(vm_.get(), &QAbstractItemModel::modelReset);
    QSignalSpy saved(vm_.get(), &ChatViewModel::messageSaved);

    QVERIFY(vm_->generateAnswers(n));
    QVERIFY(vm_->busy());
    QVERIFY(vm_->canSwitchVersions());
    QVERIFY(!vm_->canSend());
    QVERIFY(!vm_->generateAnswers(n));  // not twice at once
    QCOMPARE(vm_->rowCount(), 2);
    QVERIFY(cell(1, ChatViewModel::StreamingRole).toBool());
    QCOMPARE(place(1), QStringLiteral("2/%1").arg(n + 1));  // the first new answer, after "first"
    QCOMPARE(answers().size(), n);                          // all stored at once
    QCOMPARE(cell(1, ChatViewModel::MessageIdRole).toLongLong(), answers().first().id);
    QVERIFY(waitIdle());

    // The shown row only ever held answer 1's text, growing; nothing else changed.
    QCOMPARE(otherRows, 0);
    QCOMPARE(reset.count(), 0);
    QVERIFY2(shown.size() >= 3, qPrintable(shown.join(QLatin1Char('|'))));
    for (const QString& s : shown) QVERIFY2(textOf(0, pieces).startsWith(s), qPrintable(s));
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), textOf(0, pieces));
    QCOMPARE(cell(1, ChatViewModel::StreamingRole).toBool(), false);
    QCOMPARE(blockTexts(blocks(1)), QStringList{textOf(0, pieces)});

    // One batch of n for the branch up to "ask" (the replies being made are not in the prompt).
    QCOMPARE(script_->batchSizes(), std::vector<int>{n});
    QCOMPARE(script_->batchOptions().at(0).sampling.seed, kSeed);
    const auto requests = script_->requests();
    QCOMPARE(requests.size(), std::size_t(2));
    QCOMPARE(requests[1].size(), std::size_t(2));
    QCOMPARE(script_->requestText(1, 0), QStringLiteral("SYS"));
    QCOMPARE(script_->requestText(1, 1), QStringLiteral("ask"));

    // Each stored answer holds its own text and its own seed, finished.
    const QList<StoredMessage> stored = answers();
    QCOMPARE(stored.size(), n);
    for (int i = 0; i < n; ++i) {
      const StoredMessage& m = stored[i];
      QCOMPARE(m.content, textOf(i, pieces));
      QCOMPARE(m.meta.value(QStringLiteral("raw")).toString(), textOf(i, pieces));
      QCOMPARE(m.meta.value(QStringLiteral("sampling")).toMap().value(QStringLiteral("seed")).toLongLong(),
               qint64(kSeed) + i);
      QVERIFY(!m.meta.contains(QStringLiteral("streaming")));
      QVERIFY(!m.meta.contains(QStringLiteral("stopped")));
      QVERIFY(!m.meta.contains(QStringLiteral("error")));
      const QVariantMap stats = m.meta.value(QStringLiteral("stats")).toMap();
      QCOMPARE(stats.value(QStringLiteral("stop_reason")).toString(), QStringLiteral("eos"));
      QCOMPARE(stats.value(QStringLiteral("generated_tokens")).toInt(), pieces + 1);
      QVERIFY(saved.contains(QVariantList{m.id}));
    }

    // Switching walks through the answers in order.
    for (int i = 1; i < n; ++i) {
      QVERIFY(vm_->switchSibling(1, 1));
      QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), textOf(i, pieces));
      QCOMPARE(place(1), QStringLiteral("%1/%2").arg(i + 2).arg(n + 1));
    }

    // Reloaded from the store: the newest answer is shown; each sibling has its text.
    ChatViewModel reloaded(host_.get(), store_.get());
    QVERIFY(reloaded.openConversation(vm_->conversationId()));
    QCOMPARE(reloaded.rowCount(), 2);
    auto text = [&](int row) { return reloaded.data(reloaded.index(row), ChatViewModel::ContentRole).toString(); };
    QCOMPARE(text(1), textOf(n - 1, pieces));
    QCOMPARE(reloaded.data(reloaded.index(1), ChatViewModel::SiblingCountRole).toInt(), n + 1);
    for (int i = n - 2; i >= 0; --i) {
      QVERIFY(reloaded.switchSibling(1, -1));
      QCOMPARE(text(1), textOf(i, pieces));
      QCOMPARE(reloaded.data(reloaded.index(1), ChatViewModel::StatsRole).toMap().value(QStringLiteral("stop_reason")),
               QVariant(QStringLiteral("eos")));
    }
    QVERIFY(reloaded.switchSibling(1, -1));
    QCOMPARE(text(1), QStringLiteral("first"));
  }

  // The composer's "send + N answers": the message, then n replies to it.
  void sendForAnswersAsksAndAnswers() {
    QVERIFY(loadModel());
    useSampling(1.0f);
    script_->pushBatch(batchOf(3, 2, 0));
    QVERIFY(vm_->sendForAnswers(QStringLiteral("ask"), 3));
    QCOMPARE(contents().first(), QStringLiteral("ask"));
    QVERIFY(waitIdle());
    QCOMPARE(contents(), (QStringList{QStringLiteral("ask"), textOf(0, 2)}));
    QCOMPARE(place(1), QStringLiteral("1/3"));
    const QList<StoredMessage> replies = store_->children(askId(), vm_->conversationId());
    QCOMPARE(replies.size(), 3);
    for (int i = 0; i < 3; ++i) QCOMPARE(replies[i].content, textOf(i, 2));
    QCOMPARE(script_->requests().size(), std::size_t(1));
    QCOMPARE(script_->requestText(0, 1), QStringLiteral("ask"));
    QVERIFY(!vm_->sendForAnswers(QStringLiteral("   "), 3));  // a blank message is not sent
  }

  // The reply chosen among the answers is the one the next message continues from.
  void theNextMessageContinuesTheChosenAnswer() {
    QVERIFY(askedOnce());
    script_->pushBatch(batchOf(3, 1, 0));
    QVERIFY(vm_->generateAnswers(3));
    QVERIFY(waitIdle());
    QVERIFY(vm_->switchSibling(1, 1));
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), textOf(1, 1));
    QVERIFY(sendReplied(QStringLiteral("more"), QStringLiteral("ok")));
    QCOMPARE(script_->requestText(2, 2), textOf(1, 1));
    QCOMPARE(script_->requestText(2, 3), QStringLiteral("more"));
  }

  // Switching while the answers stream: the chosen one shows its text so far and keeps growing;
  // Stop then ends all of them, each keeping its partial text, marked as stopped.
  void switchWhileStreamingThenStop() {
    QVERIFY(askedOnce());
    const int n = 3;
    FakeBatch b = batchOf(n, 2, 5);
    for (FakeAnswer& a : b.answers) a.untilStopped = true;
    script_->pushBatch(b);
    QVERIFY(vm_->generateAnswers(n));
    QTRY_VERIFY(cell(1, ChatViewModel::ContentRole).toString().startsWith(QStringLiteral("a1.0")));

    QVERIFY(vm_->switchSibling(1, 2));  // to answer 3 while it streams
    QVERIFY(vm_->busy());
    QCOMPARE(place(1), QStringLiteral("4/4"));
    QVERIFY(cell(1, ChatViewModel::StreamingRole).toBool());
    const QString at = cell(1, ChatViewModel::ContentRole).toString();
    QVERIFY2(at.startsWith(QStringLiteral("a3.0")), qPrintable(at));
    QCOMPARE(blockTexts(blocks(1)).join(QString()), at);
    QTRY_VERIFY(cell(1, ChatViewModel::ContentRole).toString().size() > at.size() + 10);  // still arriving
    QVERIFY(!cell(1, ChatViewModel::ContentRole).toString().contains(QStringLiteral("a1.")));
    QVERIFY(vm_->switchSibling(1, -1));  // answer 2, also streaming
    QVERIFY(cell(1, ChatViewModel::StreamingRole).toBool());
    QTRY_VERIFY(cell(1, ChatViewModel::ContentRole).toString().startsWith(QStringLiteral("a2.0")));

    vm_->stop();
    QVERIFY(waitIdle());
    QCOMPARE(cell(1, ChatViewModel::StreamingRole).toBool(), false);
    QCOMPARE(cell(1, ChatViewModel::StatsRole).toMap().value(QStringLiteral("stop_reason")).toString(),
             QStringLiteral("cancelled"));
    const QList<StoredMessage> stored = answers();
    QCOMPARE(stored.size(), n);
    for (int i = 0; i < n; ++i) {
      const StoredMessage& m = stored[i];
      const QString own = QStringLiteral("a%1.").arg(i + 1);
      QVERIFY2(m.content.startsWith(own + QStringLiteral("0")), qPrintable(m.content));
      for (int j = 0; j < n; ++j)
        if (j != i) QVERIFY2(!m.content.contains(QStringLiteral("a%1.").arg(j + 1)), qPrintable(m.content));
      QVERIFY(m.meta.value(QStringLiteral("stopped")).toBool());
      QVERIFY(!m.meta.contains(QStringLiteral("streaming")));
      QCOMPARE(m.meta.value(QStringLiteral("stats")).toMap().value(QStringLiteral("stop_reason")).toString(),
               QStringLiteral("cancelled"));
    }
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), stored[1].content);
  }

  // A single reply still refuses switching while it streams.
  void switchingRefusedWhileASingleReplyStreams() {
    QVERIFY(askedOnce());
    QVERIFY(regenerateAndWait(QStringLiteral("second")));
    FakeStream endless = stream({QStringLiteral("x")}, 5);
    endless.untilStopped = true;
    script_->pushStream(endless);
    QVERIFY(vm_->regenerate());
    QVERIFY(!vm_->canSwitchVersions());
    QVERIFY(!vm_->switchSibling(1, -1));
    vm_->stop();
    QVERIFY(waitIdle());
    QVERIFY(vm_->canSwitchVersions());
  }

  // The engine restarts answer 1 (it needed its memory): its text so far is void and it starts
  // over; the other answers are not touched.
  void restartClearsOneAnswer() {
    QVERIFY(askedOnce());
    FakeBatch b;
    b.delayMs = 45;  // longer than the 33 ms batching: each round's text reaches the view
    FakeAnswer first;
    first.pieces = {QStringLiteral("one"), QStringLiteral("-two"), QStringLiteral("-three")};
    first.restartAfter = 2;
    FakeAnswer second;
    second.pieces = {QStringLiteral("b1"), QStringLiteral("-b2"), QStringLiteral("-b3")};
    b.answers = {first, second};
    script_->pushBatch(b);
    QStringList shown;
    connect(vm_.get(), &QAbstractItemModel::dataChanged, this,
            [&] { shown << cell(1, ChatViewModel::ContentRole).toString(); });
    QVERIFY(vm_->generateAnswers(2));
    QVERIFY(waitIdle());
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("one-two-three"));
    // It had text, then none (the restart), then the new text.
    const qsizetype cleared = shown.indexOf(QString());
    QVERIFY2(cleared > 0, qPrintable(shown.join(QLatin1Char('|'))));
    QVERIFY(shown.mid(0, cleared).contains(QStringLiteral("one")));
    QCOMPARE(blockTexts(blocks(1)), QStringList{QStringLiteral("one-two-three")});
    const QList<StoredMessage> stored = answers();
    QCOMPARE(stored[0].content, QStringLiteral("one-two-three"));
    QCOMPARE(stored[0].meta.value(QStringLiteral("raw")).toString(), QStringLiteral("one-two-three"));
    QCOMPARE(stored[1].content, QStringLiteral("b1-b2-b3"));
  }

  // Answer 2 of 3 fails: it keeps its text and shows its error; the others finish.
  void failedAnswerKeepsTheOthers() {
    QVERIFY(askedOnce());
    FakeBatch b = batchOf(3, 3, 2);
    b.answers[1].failAfter = 2;
    b.answers[1].error = QStringLiteral("out of memory for this answer");
    script_->pushBatch(b);
    QVERIFY(vm_->generateAnswers(3));
    QVERIFY(waitIdle());
    QVERIFY2(vm_->errorText().contains(QStringLiteral("Answer 2 of 3 failed: out of memory for this answer")),
             qPrintable(vm_->errorText()));
    const QList<StoredMessage> stored = answers();
    QCOMPARE(stored.size(), 3);
    QCOMPARE(stored[0].content, textOf(0, 3));
    QCOMPARE(stored[2].content, textOf(2, 3));
    QVERIFY(!stored[0].meta.contains(QStringLiteral("error")));
    QCOMPARE(stored[1].content, QStringLiteral("a2.0 a2.1"));
    QCOMPARE(stored[1].meta.value(QStringLiteral("error")).toString(), QStringLiteral("out of memory for this answer"));
    QVERIFY(!stored[1].meta.contains(QStringLiteral("streaming")));
    QCOMPARE(cell(1, ChatViewModel::ErrorRole).toString(), QString());
    QVERIFY(vm_->switchSibling(1, 1));
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("a2.0 a2.1"));
    QCOMPARE(cell(1, ChatViewModel::ErrorRole).toString(), QStringLiteral("out of memory for this answer"));
    QVERIFY(vm_->canSend());
  }

  // The failed answer is the one shown: its row says so as it ends.
  void failedAnswerShownEndsWithItsError() {
    QVERIFY(askedOnce());
    FakeBatch b = batchOf(2, 3, 2);
    b.answers[0].failAfter = 1;
    script_->pushBatch(b);
    QVERIFY(vm_->generateAnswers(2));
    QVERIFY(waitIdle());
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("a1.0"));
    QCOMPARE(cell(1, ChatViewModel::ErrorRole).toString(), QStringLiteral("the fake answer failed"));
    QCOMPARE(cell(1, ChatViewModel::StreamingRole).toBool(), false);
    QCOMPARE(answers()[1].content, textOf(1, 3));
  }

  void refusedWhenAnswersWouldBeTheSame_data() {
    QTest::addColumn<float>("temperature");
    QTest::addColumn<int>("topK");
    QTest::addColumn<int>("n");
    QTest::addColumn<QString>("reason");  // a part of answersBlockedReason; empty: allowed
    QTest::newRow("greedy") << 0.0f << 0 << 3 << QStringLiteral("temperature 0");
    QTest::newRow("top-k 1") << 0.7f << 1 << 3 << QStringLiteral("top-k 1");
    QTest::newRow("one answer") << 0.7f << 0 << 1 << QString();
    QTest::newRow("nine answers") << 0.7f << 0 << 9 << QString();
  }
  void refusedWhenAnswersWouldBeTheSame() {
    QFETCH(float, temperature);
    QFETCH(int, topK);
    QFETCH(int, n);
    QFETCH(QString, reason);
    QVERIFY(loadModel());
    QVERIFY(sendReplied(QStringLiteral("ask"), QStringLiteral("first")));
    QVERIFY(vm_->canGenerateAnswers());  // the fixture samples at temperature 1
    QSignalSpy canSend(vm_.get(), &ChatViewModel::canSendChanged);
    useSampling(temperature, topK);
    QVERIFY(canSend.count() >= 1);  // QML re-reads canGenerateAnswers
    QCOMPARE(vm_->canGenerateAnswers(), reason.isEmpty());
    QVERIFY2(vm_->answersBlockedReason().contains(reason), qPrintable(vm_->answersBlockedReason()));
    QVERIFY(!vm_->generateAnswers(n));
    QVERIFY(!vm_->sendForAnswers(QStringLiteral("again"), n));
    QVERIFY(!vm_->busy());
    if (!reason.isEmpty()) QCOMPARE(vm_->errorText(), vm_->answersBlockedReason());  // said, not silent
    QCOMPARE(contents(), (QStringList{QStringLiteral("ask"), QStringLiteral("first")}));
    QCOMPARE(store_->children(askId(), vm_->conversationId()).size(), 1);
    QVERIFY(script_->batchSizes().empty());
  }

  void refusedWithoutAModel() {
    useSampling(1.0f);
    QCOMPARE(vm_->answersBlockedReason(), QStringLiteral("Load a model first"));
    QVERIFY(!vm_->canGenerateAnswers());
    QVERIFY(!vm_->sendForAnswers(QStringLiteral("ask"), 2));
    QCOMPARE(vm_->rowCount(), 0);
  }
};

QTEST_GUILESS_MAIN(TestChatViewModelAnswers)
#include "test_chat_view_model_answers.moc"
