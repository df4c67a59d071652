// ChatViewModel branches (chat_view_model_branches.cpp) over the fixture of chat_view_model_fixture.h:
// the sibling roles, switchSibling and openMessage with the smallest model signals, switching
// refused while a reply streams. The rest of the view model is tested in test_chat_view_model.cpp.
#include <QSignalSpy>
#include <QtTest>

#include "chat_view_model_fixture.h"

class TestChatViewModelBranches : public QObject, protected ChatViewModelFixture {
  Q_OBJECT

 private slots:
  void init() { initFixture(); }
  void cleanup() { cleanupFixture(); }

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
};

QTEST_GUILESS_MAIN(TestChatViewModelBranches)
#include "test_chat_view_model_branches.moc"
