// ChatViewModel over a real ConversationStore (SQLite in a QTemporaryDir) and EngineHost with the
// scripted FakeChatEngine: streaming into the last row through the reasoning parser (split tags,
// bare </think>), blocks, saving while streaming, stop, engine errors, regenerate and edit adding
// siblings, what is sent to the engine, canSend/blockedReason; branches (the sibling roles,
// switchSibling and openMessage with the smallest model signals) and the generation settings saved
// in each reply's meta. One test runs the real engine on the tiny test model.
#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QMetaProperty>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>

#include "chat_view_model.h"
#include "conversation_store.h"
#include "cosmos/test_model.h"
#include "engine_host.h"
#include "fake_chat_engine.h"
#include "message_blocks_model.h"

using cosmos::ui::ChatSettings;
using cosmos::ui::ChatViewModel;
using cosmos::ui::ConversationStore;
using cosmos::ui::EngineHost;
using cosmos::ui::MessageBlocksModel;
using namespace cosmos::ui::testing;

namespace {

QStringList blockTexts(const MessageBlocksModel* m) {
  QStringList out;
  for (const auto& b : m->blocks()) out << b.text;
  return out;
}

FakeStream stream(const QStringList& pieces, int delayMs = 0) {
  FakeStream s;
  s.pieces = pieces;
  s.delayMs = delayMs;
  return s;
}

}  // namespace

class TestChatViewModel : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<QTemporaryDir> dir_;
  std::unique_ptr<ConversationStore> store_;
  std::shared_ptr<FakeScript> script_;
  std::unique_ptr<EngineHost> host_;
  std::unique_ptr<ChatViewModel> vm_;
  std::unique_ptr<QAbstractItemModelTester> tester_;

  QVariant cell(int row, int role) const { return vm_->data(vm_->index(row), role); }
  MessageBlocksModel* blocks(int row) const {
    return qobject_cast<MessageBlocksModel*>(cell(row, ChatViewModel::BlocksRole).value<QObject*>());
  }
  bool loadModel() {
    QSignalSpy states(host_.get(), &EngineHost::stateChanged);
    host_->loadModel(QStringLiteral("/models/fake"));
    while (host_->state() != EngineHost::Ready && states.wait(5000)) {
    }
    return host_->state() == EngineHost::Ready;
  }
  // Sends and waits for the reply to end.
  bool sendAndWait(const QString& text) {
    QSignalSpy busy(vm_.get(), &ChatViewModel::busyChanged);
    if (!vm_->send(text)) return false;
    while (vm_->busy() && busy.wait(10000)) {
    }
    return !vm_->busy();
  }
  bool waitIdle() {
    QSignalSpy busy(vm_.get(), &ChatViewModel::busyChanged);
    while (vm_->busy() && busy.wait(10000)) {
    }
    return !vm_->busy();
  }
  QStringList contents() const {
    QStringList out;
    for (int i = 0; i < vm_->rowCount(); ++i) out << cell(i, ChatViewModel::ContentRole).toString();
    return out;
  }
  QString place(int row) const {  // "2/3"
    return QStringLiteral("%1/%2").arg(cell(row, ChatViewModel::SiblingIndexRole).toInt())
        .arg(cell(row, ChatViewModel::SiblingCountRole).toInt());
  }
  bool regenerateAndWait(const QString& reply) {
    script_->pushStream(stream({reply}));
    return vm_->regenerate() && waitIdle();
  }
  bool sendReplied(const QString& text, const QString& reply) {
    script_->pushStream(stream({reply}));
    return sendAndWait(text);
  }

 private slots:
  void init() {
    dir_ = std::make_unique<QTemporaryDir>();
    store_ = std::make_unique<ConversationStore>();
    QVERIFY2(store_->open(dir_->filePath(QStringLiteral("chat.sqlite"))), qPrintable(store_->lastError()));
    script_ = std::make_shared<FakeScript>();
    host_ = std::make_unique<EngineHost>(makeFakeEngine(script_));
    vm_ = std::make_unique<ChatViewModel>(host_.get(), store_.get());
    vm_->setSettingsProvider([] {
      ChatSettings s;
      s.systemPrompt = QStringLiteral("SYS");
      s.options.max_new_tokens = 64;
      return s;
    });
    tester_ = std::make_unique<QAbstractItemModelTester>(vm_.get(),
                                                         QAbstractItemModelTester::FailureReportingMode::QtTest);
  }
  void cleanup() {
    tester_.reset();
    vm_.reset();
    host_.reset();
    store_.reset();
    dir_.reset();
  }

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

  // The tree: ask → {v1 → q1 → a1, v2, v3 → q3 → a3}, built with regenerate (twice: 3 replies),
  // switchSibling and send; the view shows ask, v1, q1, a1 (the newest). Each row switches from there.
  void switchSiblingShowsTheBranch_data() {
    QTest::addColumn<int>("row");
    QTest::addColumn<int>("delta");
    QTest::addColumn<QStringList>("shown");  // empty: refused, nothing changes
    QTest::addColumn<QString>("place");
    QTest::newRow("to the newest version, with its descendants")
        << 1 << 2 << QStringList{"ask", "v3", "q3", "a3"} << "3/3";
    QTest::newRow("to the middle version, no descendants") << 1 << 1 << QStringList{"ask", "v2"} << "2/3";
    QTest::newRow("past the last") << 1 << 3 << QStringList{} << "1/3";
    QTest::newRow("before the first") << 1 << -1 << QStringList{} << "1/3";
    QTest::newRow("a message without siblings") << 2 << 1 << QStringList{} << "1/1";
    QTest::newRow("the first message, no siblings") << 0 << -1 << QStringList{} << "1/1";
    QTest::newRow("out of range") << 9 << 1 << QStringList{} << "";
  }
  void switchSiblingShowsTheBranch() {
    QFETCH(int, row);
    QFETCH(int, delta);
    QFETCH(QStringList, shown);
    QFETCH(QString, place);
    QVERIFY(loadModel());
    QVERIFY(sendReplied(QStringLiteral("ask"), QStringLiteral("v1")));
    QCOMPARE(this->place(1), QStringLiteral("1/1"));
    QVERIFY(regenerateAndWait(QStringLiteral("v2")));
    QVERIFY(regenerateAndWait(QStringLiteral("v3")));
    QCOMPARE(contents(), (QStringList{"ask", "v3"}));
    QCOMPARE(this->place(1), QStringLiteral("3/3"));
    QCOMPARE(this->place(0), QStringLiteral("1/1"));
    const qint64 askId = cell(0, ChatViewModel::MessageIdRole).toLongLong();
    QCOMPARE(store_->children(askId, vm_->conversationId()).size(), 3);
    QVERIFY(sendReplied(QStringLiteral("q3"), QStringLiteral("a3")));
    QVERIFY(vm_->switchSibling(1, -2));
    QCOMPARE(contents(), (QStringList{"ask", "v1"}));
    QCOMPARE(this->place(1), QStringLiteral("1/3"));
    QVERIFY(sendReplied(QStringLiteral("q1"), QStringLiteral("a1")));
    QCOMPARE(contents(), (QStringList{"ask", "v1", "q1", "a1"}));
    QCOMPARE(script_->requestText(4, 2), QStringLiteral("v1"));  // the reply to q1 saw the v1 branch

    const QStringList before = contents();
    QSignalSpy reset(vm_.get(), &QAbstractItemModel::modelReset);
    QSignalSpy changed(vm_.get(), &QAbstractItemModel::dataChanged);
    QSignalSpy removed(vm_.get(), &QAbstractItemModel::rowsRemoved);
    QSignalSpy inserted(vm_.get(), &QAbstractItemModel::rowsInserted);
    const bool ok = vm_->switchSibling(row, delta);
    QCOMPARE(ok, !shown.isEmpty());
    QCOMPARE(reset.count(), 0);
    if (!ok) {
      QCOMPARE(contents(), before);
      QCOMPARE(changed.count() + removed.count() + inserted.count(), 0);
      if (!place.isEmpty()) QCOMPARE(this->place(row), place);
      return;
    }
    QCOMPARE(contents(), shown);
    QCOMPARE(this->place(row), place);
    // The switched row changes in place; only rows after it are removed and inserted.
    QCOMPARE(changed.count(), 1);
    QCOMPARE(changed.first().at(0).toModelIndex().row(), row);
    QCOMPARE(changed.first().at(1).toModelIndex().row(), row);
    QCOMPARE(removed.count(), 1);
    QCOMPARE(removed.first().at(1).toInt(), row + 1);
    QCOMPARE(removed.first().at(2).toInt(), 3);
    QCOMPARE(inserted.count(), shown.size() > row + 1 ? 1 : 0);
    if (!inserted.isEmpty()) {
      QCOMPARE(inserted.first().at(1).toInt(), row + 1);
      QCOMPARE(inserted.first().at(2).toInt(), static_cast<int>(shown.size()) - 1);
    }
    QCOMPARE(blockTexts(blocks(row)), QStringList{shown.at(row)});
    // What the next request sends is the branch shown.
    QVERIFY(sendReplied(QStringLiteral("next"), QStringLiteral("n")));
    const auto last = script_->requests().back();
    QCOMPARE(last.size(), std::size_t(shown.size() + 2));  // system + the branch + "next"
    QCOMPARE(QString::fromStdString(last[2].parts[0].text), shown.at(1));
  }

  void editMakesAUserSiblingToSwitchTo() {
    QVERIFY(loadModel());
    QVERIFY(sendReplied(QStringLiteral("A"), QStringLiteral("r1")));
    QVERIFY(sendReplied(QStringLiteral("B"), QStringLiteral("r2")));
    script_->pushStream(stream({QStringLiteral("r3")}));
    QVERIFY(vm_->editAndResend(2, QStringLiteral("B2")));
    QVERIFY(waitIdle());
    QCOMPARE(contents(), (QStringList{"A", "r1", "B2", "r3"}));
    QCOMPARE(place(2), QStringLiteral("2/2"));
    QCOMPARE(place(3), QStringLiteral("1/1"));
    QVERIFY(vm_->switchSibling(2, -1));
    QCOMPARE(contents(), (QStringList{"A", "r1", "B", "r2"}));
    QCOMPARE(place(2), QStringLiteral("1/2"));
    QCOMPARE(cell(2, ChatViewModel::RoleRole).toString(), QStringLiteral("user"));
    // Root siblings (an edit of the first message) switch the same way.
    script_->pushStream(stream({QStringLiteral("r4")}));
    QVERIFY(vm_->editAndResend(0, QStringLiteral("A2")));
    QVERIFY(waitIdle());
    QCOMPARE(contents(), (QStringList{"A2", "r4"}));
    QCOMPARE(place(0), QStringLiteral("2/2"));
    QVERIFY(vm_->switchSibling(0, -1));
    QCOMPARE(contents(), (QStringList{"A", "r1", "B2", "r3"}));  // A's newest leaf: under B2
    QVERIFY(!vm_->switchSibling(0, -1));
    QVERIFY(vm_->switchSibling(0, 1));
    QCOMPARE(contents(), (QStringList{"A2", "r4"}));
  }

  void switchingIsRefusedWhileAReplyStreams() {
    QVERIFY(loadModel());
    QVERIFY(sendReplied(QStringLiteral("ask"), QStringLiteral("v1")));
    script_->pushStream(stream({QStringLiteral("v"), QStringLiteral("2")}, 60));
    QVERIFY(vm_->regenerate());
    QVERIFY(vm_->busy());
    QVERIFY(!vm_->switchSibling(1, -1));
    QVERIFY(waitIdle());
    QCOMPARE(place(1), QStringLiteral("2/2"));
    QVERIFY(vm_->switchSibling(1, -1));
    QCOMPARE(contents(), (QStringList{"ask", "v1"}));
  }

  // openMessage shows the branch through a message (a search result) and asks to reveal its row.
  void openMessageShowsItsBranch() {
    QVERIFY(loadModel());
    QVERIFY(sendReplied(QStringLiteral("ask"), QStringLiteral("v1")));
    QVERIFY(sendReplied(QStringLiteral("deeper"), QStringLiteral("d1")));
    const qint64 v1 = cell(1, ChatViewModel::MessageIdRole).toLongLong();
    QVERIFY(vm_->switchSibling(0, 0) == false);
    script_->pushStream(stream({QStringLiteral("v2")}));
    QVERIFY(vm_->editAndResend(2, QStringLiteral("other")));
    QVERIFY(waitIdle());
    const qint64 conversation = vm_->conversationId();
    vm_->newConversation();
    QSignalSpy reveal(vm_.get(), &ChatViewModel::revealRequested);
    QVERIFY(vm_->openMessage(conversation, v1));
    QCOMPARE(contents(), (QStringList{"ask", "v1", "other", "v2"}));  // v1's newest leaf
    const qint64 deeper = store_->children(v1, conversation).first().id;
    QVERIFY(vm_->openMessage(conversation, deeper));
    QCOMPARE(contents(), (QStringList{"ask", "v1", "deeper", "d1"}));
    QCOMPARE(place(2), QStringLiteral("1/2"));
    QCOMPARE(reveal.count(), 2);
    QCOMPARE(reveal.at(0).at(0).toInt(), 1);
    QCOMPARE(reveal.at(1).at(0).toInt(), 2);
    QVERIFY(vm_->openMessage(conversation, 999999));  // unknown message: the latest branch
    QCOMPARE(contents(), (QStringList{"ask", "v1", "other", "v2"}));
    QCOMPARE(reveal.count(), 2);
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
