// ChatViewModel over a real ConversationStore (SQLite in a QTemporaryDir) and EngineHost with the
// scripted FakeChatEngine (chat_view_model_fixture.h): streaming into the last row through the
// reasoning parser (split tags, bare </think>), blocks, saving while streaming, stop, engine errors,
// regenerate and edit adding siblings, what is sent to the engine, canSend/blockedReason, a reply
// cut by a crash, and the generation settings saved in each reply's meta. One test runs the real
// engine on the tiny test model. Branches (the sibling roles, switchSibling and openMessage with
// the smallest model signals) are tested in test_chat_view_model_branches.cpp.
#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QMetaProperty>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>

#include "chat_view_model_fixture.h"
#include "cosmos/test_model.h"

class TestChatViewModel : public QObject, protected ChatViewModelFixture {
  Q_OBJECT

 private slots:
  void init() { initFixture(); }
  void cleanup() { cleanupFixture(); }

  void exposesTheDocumentedRolesAndProperties() {
    const auto names = vm_->roleNames().values();
    for (const char* role : {"messageId", "role", "content", "reasoning", "thinking", "streaming", "thoughtSeconds",
                             "stats", "blocks", "siblingIndex", "siblingCount"})
      QVERIFY2(names.contains(QByteArray(role)), role);
    const QMetaObject* mo = vm_->metaObject();
    for (const char* name : {"conversationId", "busy", "canSend", "blockedReason", "errorText"}) {
      const int i = mo->indexOfProperty(name);
      QVERIFY2(i >= 0 && mo->property(i).hasNotifySignal(), name);
    }
  }

  void blockedReasonFollowsTheEngine() {
    QSignalSpy canSend(vm_.get(), &ChatViewModel::canSendChanged);
    QCOMPARE(vm_->blockedReason(), QStringLiteral("Load a model first"));
    QVERIFY(!vm_->send(QStringLiteral("hi")));
    FakeLoad slow;
    slow.steps = 10;
    slow.stepDelayMs = 20;
    script_->setLoad(slow);
    host_->loadModel(QStringLiteral("/models/fake"));
    QCOMPARE(vm_->blockedReason(), QStringLiteral("Loading the model…"));
    QVERIFY(!vm_->canSend());
    QTRY_VERIFY(vm_->canSend());
    QVERIFY(vm_->blockedReason().isEmpty());
    QVERIFY(canSend.count() >= 2);
    script_->pushStream(stream({QStringLiteral("a"), QStringLiteral("b")}, 30));
    QVERIFY(vm_->send(QStringLiteral("hi")));
    QCOMPARE(vm_->blockedReason(), QStringLiteral("Generating…"));
    QVERIFY(vm_->busy());
    QVERIFY(!vm_->send(QStringLiteral("again")));
    QVERIFY(!vm_->regenerate());
    QVERIFY(waitIdle());
    QVERIFY(vm_->canSend());
    QCOMPARE(vm_->rowCount(), 2);
  }

  // Tags split across pieces, with a delay so the think time is measurable.
  void streamsThroughTheReasoningParser() {
    QVERIFY(loadModel());
    script_->pushStream(stream({QStringLiteral("<think>\nI "), QStringLiteral("think"), QStringLiteral("</thi"),
                                QStringLiteral("nk>\n\n<answer>\nHello "), QStringLiteral("**world**\n\n"),
                                QStringLiteral("```\ncode\n\nmore\n```"), QStringLiteral("\n</answer>")},
                               40));
    QSignalSpy conversation(vm_.get(), &ChatViewModel::conversationIdChanged);
    bool sawThinking = false;
    int changesOffLastRow = 0;
    int blockResets = 0;
    connect(vm_.get(), &QAbstractItemModel::dataChanged, this, [&](const QModelIndex& a, const QModelIndex& b) {
      if (a.row() != b.row() || a.row() != vm_->rowCount() - 1) ++changesOffLastRow;
      sawThinking = sawThinking || cell(a.row(), ChatViewModel::ThinkingRole).toBool();
    });
    QVERIFY(vm_->send(QStringLiteral("Hi")));
    QCOMPARE(conversation.count(), 1);
    QVERIFY(vm_->conversationId() > 0);
    QCOMPARE(vm_->rowCount(), 2);
    QCOMPARE(cell(0, ChatViewModel::RoleRole).toString(), QStringLiteral("user"));
    QCOMPARE(cell(1, ChatViewModel::RoleRole).toString(), QStringLiteral("assistant"));
    QVERIFY(cell(1, ChatViewModel::StreamingRole).toBool());
    connect(blocks(1), &QAbstractItemModel::modelReset, this, [&] { ++blockResets; });
    QAbstractItemModelTester blocksTester(blocks(1), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(waitIdle());

    QCOMPARE(changesOffLastRow, 0);
    QVERIFY(sawThinking);
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("Hello **world**\n\n```\ncode\n\nmore\n```"));
    QCOMPARE(cell(1, ChatViewModel::ReasoningRole).toString(), QStringLiteral("I think"));
    QCOMPARE(cell(1, ChatViewModel::ThinkingRole).toBool(), false);
    QCOMPARE(cell(1, ChatViewModel::StreamingRole).toBool(), false);
    const double thought = cell(1, ChatViewModel::ThoughtSecondsRole).toDouble();
    QVERIFY2(thought > 0.01 && thought < 2, qPrintable(QString::number(thought)));
    QCOMPARE(cell(1, ChatViewModel::StatsRole).toMap().value(QStringLiteral("stop_reason")).toString(),
             QStringLiteral("eos"));
    QCOMPARE(blockTexts(blocks(1)), (QStringList{QStringLiteral("Hello **world**"), QStringLiteral("```\ncode\n\nmore\n```")}));
    QCOMPARE(blockResets, 0);
    QCOMPARE(blockTexts(blocks(0)), QStringList{QStringLiteral("Hi")});

    // What the engine got: the system prompt, then the branch.
    QCOMPARE(script_->requests().size(), std::size_t(1));
    QCOMPARE(script_->requests()[0].size(), std::size_t(2));
    QCOMPARE(script_->requestRole(0, 0), QStringLiteral("system"));
    QCOMPARE(script_->requestText(0, 0), QStringLiteral("SYS"));
    QCOMPARE(script_->requestText(0, 1), QStringLiteral("Hi"));

    // What the store holds.
    const auto path = store_->path(store_->latestLeaf(vm_->conversationId()));
    QCOMPARE(path.size(), 2);
    QCOMPARE(path[0].content, QStringLiteral("Hi"));
    QCOMPARE(path[1].id, cell(1, ChatViewModel::MessageIdRole).toLongLong());
    QCOMPARE(path[1].parentId, path[0].id);
    QCOMPARE(path[1].content, cell(1, ChatViewModel::ContentRole).toString());
    QCOMPARE(path[1].reasoning, QStringLiteral("I think"));
    QCOMPARE(path[1].meta.value(QStringLiteral("stats")).toMap().value(QStringLiteral("generated_tokens")).toInt(), 7);
    QVERIFY(path[1].meta.value(QStringLiteral("thoughtSeconds")).toDouble() > 0);
    QVERIFY(!path[1].meta.contains(QStringLiteral("streaming")));
    QCOMPARE(store_->conversation(vm_->conversationId())->title, QStringLiteral("Hi"));
  }

  // A bare </think>: the answer so far becomes reasoning (answer_reset).
  void bareCloseThinkResetsTheAnswer() {
    QVERIFY(loadModel());
    script_->pushStream(stream({QStringLiteral("Reasoning first "), QStringLiteral("then </th"), QStringLiteral("ink>"),
                                QStringLiteral("\n\nThe answer.")},
                               40));
    QVERIFY(sendAndWait(QStringLiteral("q")));
    QCOMPARE(cell(1, ChatViewModel::ReasoningRole).toString(), QStringLiteral("Reasoning first then"));
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("The answer."));
    QCOMPARE(blockTexts(blocks(1)), QStringList{QStringLiteral("The answer.")});
    QVERIFY(cell(1, ChatViewModel::ThoughtSecondsRole).toDouble() > 0.01);
  }

  // The second turn sends the whole branch, the first reply as the model wrote it.
  void secondTurnSendsTheBranch() {
    QVERIFY(loadModel());
    script_->pushStream(stream({QStringLiteral("<think>a</think>"), QStringLiteral("<answer>B</answer>")}));
    QVERIFY(sendAndWait(QStringLiteral("one")));
    script_->pushStream(stream({QStringLiteral("two")}));
    QVERIFY(sendAndWait(QStringLiteral("again")));
    QCOMPARE(vm_->rowCount(), 4);
    QCOMPARE(script_->requests().size(), std::size_t(2));
    QCOMPARE(script_->requests()[1].size(), std::size_t(4));
    QCOMPARE(script_->requestText(1, 1), QStringLiteral("one"));
    QCOMPARE(script_->requestRole(1, 2), QStringLiteral("assistant"));
    QCOMPARE(script_->requestText(1, 2), QStringLiteral("<think>a</think><answer>B</answer>"));
    QCOMPARE(script_->requestText(1, 3), QStringLiteral("again"));
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("B"));
    const auto path = store_->path(store_->latestLeaf(vm_->conversationId()));
    QCOMPARE(path.size(), 4);
    QCOMPARE(path[2].parentId, path[1].id);
  }

  void stopKeepsThePartialReply() {
    QVERIFY(loadModel());
    FakeStream endless = stream({QStringLiteral("word ")}, 2);
    endless.untilStopped = true;
    script_->pushStream(endless);
    QSignalSpy changed(vm_.get(), &QAbstractItemModel::dataChanged);
    QVERIFY(vm_->send(QStringLiteral("talk")));
    QVERIFY(changed.wait(5000));
    vm_->stop();
    QVERIFY(waitIdle());
    const QString partial = cell(1, ChatViewModel::ContentRole).toString();
    QVERIFY(partial.startsWith(QStringLiteral("word word")));
    QCOMPARE(cell(1, ChatViewModel::StatsRole).toMap().value(QStringLiteral("stop_reason")).toString(),
             QStringLiteral("cancelled"));
    const auto reply = store_->message(cell(1, ChatViewModel::MessageIdRole).toLongLong());
    QVERIFY(reply.has_value());
    QCOMPARE(reply->content, partial);
    QCOMPARE(reply->meta.value(QStringLiteral("stopped")).toBool(), true);
    QVERIFY(vm_->errorText().isEmpty());
    QVERIFY(vm_->canSend());
  }

  void engineErrorKeepsThePartialReply() {
    QVERIFY(loadModel());
    FakeStream failing = stream({QStringLiteral("Part "), QStringLiteral("one, "), QStringLiteral("two"),
                                 QStringLiteral(" never")});
    failing.failAfter = 3;
    script_->pushStream(failing);
    QSignalSpy error(vm_.get(), &ChatViewModel::errorTextChanged);
    QVERIFY(sendAndWait(QStringLiteral("go")));
    QCOMPARE(vm_->errorText(), failing.error);
    QCOMPARE(error.count(), 1);
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("Part one, two"));
    QCOMPARE(cell(1, ChatViewModel::StreamingRole).toBool(), false);
    const auto reply = store_->message(cell(1, ChatViewModel::MessageIdRole).toLongLong());
    QCOMPARE(reply->content, QStringLiteral("Part one, two"));
    QCOMPARE(reply->meta.value(QStringLiteral("error")).toString(), failing.error);
    QVERIFY(vm_->canSend());
    vm_->clearError();
    QVERIFY(vm_->errorText().isEmpty());
  }

  void regenerateAddsASiblingReply() {
    QVERIFY(loadModel());
    script_->pushStream(stream({QStringLiteral("first")}));
    QVERIFY(sendAndWait(QStringLiteral("ask")));
    const qint64 userId = cell(0, ChatViewModel::MessageIdRole).toLongLong();
    const qint64 firstReply = cell(1, ChatViewModel::MessageIdRole).toLongLong();
    script_->pushStream(stream({QStringLiteral("second")}));
    QVERIFY(vm_->regenerate());
    QVERIFY(waitIdle());
    QCOMPARE(vm_->rowCount(), 2);
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("second"));
    QVERIFY(cell(1, ChatViewModel::MessageIdRole).toLongLong() != firstReply);
    const auto replies = store_->children(userId, vm_->conversationId());
    QCOMPARE(replies.size(), 2);
    QCOMPARE(replies[0].content, QStringLiteral("first"));
    QCOMPARE(replies[1].content, QStringLiteral("second"));
    // The regenerated request does not contain the old reply.
    QCOMPARE(script_->requests()[1].size(), std::size_t(2));
    QCOMPARE(script_->requestText(1, 1), QStringLiteral("ask"));
    // Reopening shows the latest branch.
    QVERIFY(vm_->openConversation(vm_->conversationId()));
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("second"));
  }

  void editAndResendAddsASiblingQuestion_data() {
    QTest::addColumn<int>("row");
    QTest::newRow("the first message") << 0;
    QTest::newRow("a later message") << 2;
  }
  void editAndResendAddsASiblingQuestion() {
    QFETCH(int, row);
    QVERIFY(loadModel());
    script_->pushStream(stream({QStringLiteral("r1")}));
    QVERIFY(sendAndWait(QStringLiteral("A")));
    script_->pushStream(stream({QStringLiteral("r2")}));
    QVERIFY(sendAndWait(QStringLiteral("B")));
    const qint64 oldId = cell(row, ChatViewModel::MessageIdRole).toLongLong();
    const qint64 parent = row == 0 ? 0 : cell(row - 1, ChatViewModel::MessageIdRole).toLongLong();
    QVERIFY(!vm_->editAndResend(row + 1, QStringLiteral("not a user row")));
    script_->pushStream(stream({QStringLiteral("r3")}));
    QVERIFY(vm_->editAndResend(row, QStringLiteral("edited")));
    QVERIFY(waitIdle());
    QCOMPARE(vm_->rowCount(), row + 2);
    QCOMPARE(cell(row, ChatViewModel::ContentRole).toString(), QStringLiteral("edited"));
    QCOMPARE(cell(row + 1, ChatViewModel::ContentRole).toString(), QStringLiteral("r3"));
    const auto siblings = store_->children(parent, vm_->conversationId());
    QCOMPARE(siblings.size(), 2);
    QCOMPARE(siblings[0].id, oldId);
    QCOMPARE(siblings[1].content, QStringLiteral("edited"));
    const auto last = script_->requests().back();
    QCOMPARE(last.size(), std::size_t(row + 2));  // system + the branch up to the edit
    QCOMPARE(QString::fromStdString(last.back().parts[0].text), QStringLiteral("edited"));
    QCOMPARE(store_->messages(vm_->conversationId()).size(), 6);
  }

  // A reply still marked streaming in the store (the app was killed mid-reply) reopens with its
  // saved text and stop_reason "interrupted"; a finished one does not.
  void aReplyCutByACrashReopensAsInterrupted() {
    const qint64 c = store_->createConversation();
    const qint64 q = store_->addMessage(c, 0, QStringLiteral("user"), QStringLiteral("ask"));
    const qint64 cut = store_->addMessage(c, q, QStringLiteral("assistant"), QStringLiteral("half a rep"), {},
                                          QVariantMap{{QStringLiteral("streaming"), true}});
    QVERIFY(q > 0 && cut > 0);
    vm_->openConversation(c);
    QCOMPARE(contents(), (QStringList{"ask", "half a rep"}));
    QCOMPARE(cell(1, ChatViewModel::StatsRole).toMap().value(QStringLiteral("stop_reason")).toString(),
             QStringLiteral("interrupted"));
    QCOMPARE(cell(1, ChatViewModel::StreamingRole).toBool(), false);
    QVERIFY(store_->updateMessage(cut, QStringLiteral("half a rep"), {}, QVariantMap{}));
    vm_->newConversation();
    vm_->openConversation(c);
    QVERIFY(!cell(1, ChatViewModel::StatsRole).toMap().contains(QStringLiteral("stop_reason")));
  }

  // Each reply records the model, precision and sampling it was generated with.
  void savesTheGenerationSettings_data() {
    QTest::addColumn<float>("temperature");
    QTest::addColumn<int>("topK");
    QTest::addColumn<float>("topP");
    QTest::addColumn<float>("minP");
    QTest::addColumn<float>("penalty");
    QTest::addColumn<quint64>("seed");
    QTest::addColumn<int>("maxNewTokens");
    QTest::addColumn<double>("storedTemperature");
    QTest::addColumn<QVariant>("storedSeed");
    QTest::newRow("typical") << 0.7f << 40 << 0.9f << 0.05f << 1.1f << quint64(42) << 256 << 0.7
                             << QVariant(qint64(42));
    QTest::newRow("greedy") << 0.0f << 0 << 1.0f << 0.0f << 1.0f << quint64(0) << 64 << 0.0 << QVariant(qint64(0));
    QTest::newRow("a 62-bit seed stays exact") << 0.6f << 20 << 0.95f << 0.0f << 1.05f << (quint64(1) << 62) + 1
                                               << 4096 << 0.6 << QVariant(qint64((quint64(1) << 62) + 1));
    QTest::newRow("a seed past qint64 is text") << 1.0f << 0 << 1.0f << 0.0f << 1.0f << ~quint64(0) << 8 << 1.0
                                                << QVariant(QStringLiteral("18446744073709551615"));
  }
  void savesTheGenerationSettings() {
    QFETCH(float, temperature);
    QFETCH(int, topK);
    QFETCH(float, topP);
    QFETCH(float, minP);
    QFETCH(float, penalty);
    QFETCH(quint64, seed);
    QFETCH(int, maxNewTokens);
    QFETCH(double, storedTemperature);
    QFETCH(QVariant, storedSeed);
    vm_->setSettingsProvider([=] {
      ChatSettings s;
      s.options.sampling.temperature = temperature;
      s.options.sampling.top_k = topK;
      s.options.sampling.top_p = topP;
      s.options.sampling.min_p = minP;
      s.options.sampling.repetition_penalty = penalty;
      s.options.sampling.seed = seed;
      s.options.max_new_tokens = maxNewTokens;
      return s;
    });
    QVERIFY(loadModel());
    script_->pushStream(stream({QStringLiteral("a"), QStringLiteral("b")}, 30));
    QVERIFY(vm_->send(QStringLiteral("hi")));
    const qint64 replyId = cell(1, ChatViewModel::MessageIdRole).toLongLong();
    // Already while it streams (a reply cut short by a crash still says how it was made).
    QCOMPARE(store_->message(replyId)->meta.value(QStringLiteral("model")).toString(), QStringLiteral("fake"));
    QVERIFY(waitIdle());
    const QVariantMap meta = store_->message(replyId)->meta;  // read back from the JSON column
    QCOMPARE(meta.value(QStringLiteral("model")).toString(), QStringLiteral("fake"));
    QCOMPARE(meta.value(QStringLiteral("precision")).toString(), QStringLiteral("bf16"));
    QVERIFY(meta.contains(QStringLiteral("stats")));
    const QVariantMap sampling = meta.value(QStringLiteral("sampling")).toMap();
    QCOMPARE(sampling.size(), 7);
    QCOMPARE(sampling.value(QStringLiteral("temperature")).toDouble(), storedTemperature);
    QCOMPARE(sampling.value(QStringLiteral("top_k")).toInt(), topK);
    const auto typed = [](float v) { return QString::number(v, 'g', 6).toDouble(); };  // 0.9f → 0.9
    QCOMPARE(sampling.value(QStringLiteral("top_p")).toDouble(), typed(topP));
    QCOMPARE(sampling.value(QStringLiteral("min_p")).toDouble(), typed(minP));
    QCOMPARE(sampling.value(QStringLiteral("repetition_penalty")).toDouble(), typed(penalty));
    QCOMPARE(sampling.value(QStringLiteral("max_new_tokens")).toInt(), maxNewTokens);
    if (storedSeed.typeId() == QMetaType::QString)
      QCOMPARE(sampling.value(QStringLiteral("seed")).toString(), storedSeed.toString());
    else
      QCOMPARE(sampling.value(QStringLiteral("seed")).toLongLong(), storedSeed.toLongLong());
    // The row's meta is the saved one, so the next turn's prompt is unaffected by it.
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("ab"));
  }

  // A reply that streams for ~1.5 s is in the store before it ends, and saved at least every second.
  void savesWhileStreaming() {
    QVERIFY(loadModel());
    script_->pushStream(stream(QStringList(15, QStringLiteral("tick ")), 100));
    QList<qint64> saves;
    QElapsedTimer clock;
    connect(vm_.get(), &ChatViewModel::messageSaved, this, [&] { saves.append(clock.elapsed()); });
    clock.start();
    QVERIFY(vm_->send(QStringLiteral("count")));
    const qint64 replyId = cell(1, ChatViewModel::MessageIdRole).toLongLong();
    QTRY_VERIFY_WITH_TIMEOUT(!store_->message(replyId)->content.isEmpty(), 1400);
    QVERIFY(vm_->busy());  // saved while still streaming
    QVERIFY(store_->message(replyId)->meta.value(QStringLiteral("streaming")).toBool());
    QVERIFY(waitIdle());
    const qint64 end = clock.elapsed();
    QVERIFY2(saves.size() >= 2, qPrintable(QString::number(saves.size())));
    qint64 previous = 0;
    for (qint64 t : saves) {
      QVERIFY2(t - previous <= ChatViewModel::kSaveIntervalMs + 250, qPrintable(QString::number(t - previous)));
      previous = t;
    }
    QVERIFY(end - saves.last() < 100);  // the final save
    QCOMPARE(store_->message(replyId)->content, QString(QStringLiteral("tick ")).repeated(15).trimmed());
  }

  // Opening another conversation stops the reply; it is still saved to its own message.
  void switchingConversationStopsAndSaves() {
    QVERIFY(loadModel());
    script_->pushStream(stream({QStringLiteral("old")}));
    QVERIFY(sendAndWait(QStringLiteral("first conversation")));
    const qint64 first = vm_->conversationId();
    vm_->newConversation();
    QCOMPARE(vm_->conversationId(), qint64(0));
    QCOMPARE(vm_->rowCount(), 0);
    FakeStream endless = stream({QStringLiteral("x")}, 2);
    endless.untilStopped = true;
    script_->pushStream(endless);
    QSignalSpy changed(vm_.get(), &QAbstractItemModel::dataChanged);
    QVERIFY(vm_->send(QStringLiteral("second conversation")));
    const qint64 second = vm_->conversationId();
    QVERIFY(second != first);
    const qint64 replyId = cell(1, ChatViewModel::MessageIdRole).toLongLong();
    QVERIFY(changed.wait(5000));
    QVERIFY(vm_->openConversation(first));
    QCOMPARE(vm_->rowCount(), 2);
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("old"));
    QVERIFY(waitIdle());
    QCOMPARE(cell(1, ChatViewModel::ContentRole).toString(), QStringLiteral("old"));  // untouched
    const auto reply = store_->message(replyId);
    QVERIFY(reply->content.startsWith(QStringLiteral("x")));
    QCOMPARE(reply->meta.value(QStringLiteral("stopped")).toBool(), true);
    QVERIFY(!vm_->openConversation(999999));
    QVERIFY(!vm_->errorText().isEmpty());
  }

  // The real engine on the tiny test model (random weights, the real tokenizer).
  void realEngineReplies() {
    const std::filesystem::path tokenizer = COSMOS_TEST_TOKENIZER;
    if (!std::filesystem::exists(tokenizer)) QSKIP("no test tokenizer (run packaging/fetch-test-tokenizer.sh)");
    QTemporaryDir modelDir;
    cosmos::TestModelOptions o;
    o.preset = "tiny";
    o.seed = 1;
    o.shards = 1;
    o.tokenizer_json = tokenizer;
    o.out_dir = modelDir.path().toStdString();
    const auto made = cosmos::make_test_model(o);
    QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());

    tester_.reset();
    vm_.reset();
    host_ = std::make_unique<EngineHost>(cosmos::ui::makeRealChatEngine());
    vm_ = std::make_unique<ChatViewModel>(host_.get(), store_.get());
    vm_->setSettingsProvider([] {
      ChatSettings s;
      s.systemPrompt = QString::fromUtf8(cosmos::kReasoningSystemPrompt);
      s.options.max_new_tokens = 12;
      s.options.sampling.temperature = 1.0f;
      s.options.sampling.seed = 7;
      return s;
    });
    QAbstractItemModelTester tester(vm_.get(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy states(host_.get(), &EngineHost::stateChanged);
    host_->loadModel(modelDir.path(), QStringLiteral("auto"), QStringLiteral("bf16"), 512);
    while ((host_->state() == EngineHost::Loading || host_->state() == EngineHost::NoModel) && states.wait(60000)) {
    }
    QVERIFY2(host_->state() == EngineHost::Ready, qPrintable(host_->errorText()));
    if (!host_->onGpu()) QVERIFY(!host_->deviceNote().isEmpty());  // "auto" says why the GPU is not used
    QVERIFY(host_->weightBytes() > 0);
    QCOMPARE(host_->contextLimit(), 512);

    QSignalSpy finished(host_.get(), &EngineHost::generationFinished);
    QVERIFY(vm_->send(QStringLiteral("Describe the scene.")));
    QVERIFY(finished.wait(120000));
    QVERIFY(waitIdle());
    QVERIFY2(vm_->errorText().isEmpty(), qPrintable(vm_->errorText()));
    const QString reply = cell(1, ChatViewModel::ContentRole).toString() + cell(1, ChatViewModel::ReasoningRole).toString();
    QVERIFY(!reply.isEmpty());
    const auto stored = store_->message(cell(1, ChatViewModel::MessageIdRole).toLongLong());
    QVERIFY(stored.has_value());
    QCOMPARE(stored->content + stored->reasoning, reply);
    QVERIFY(!stored->meta.value(QStringLiteral("raw")).toString().isEmpty());
    const QVariantMap stats = stored->meta.value(QStringLiteral("stats")).toMap();
    QVERIFY(stats.value(QStringLiteral("generated_tokens")).toInt() > 0);
    QVERIFY(stats.value(QStringLiteral("prompt_tokens")).toInt() > 10);
  }
};

QTEST_GUILESS_MAIN(TestChatViewModel)
#include "test_chat_view_model.moc"
