// ConversationListModel: roles, the invokables, undo, and fine-grained model signals as the store
// changes (checked by QAbstractItemModelTester and against the store after every step).
#include <QAbstractItemModelTester>
#include <QRandomGenerator>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

#include "conversation_list_model.h"
#include "conversation_store.h"

using cosmos::ui::ConversationListModel;
using cosmos::ui::ConversationStore;

class TestConversationListModel : public QObject {
  Q_OBJECT

 private slots:
  void init() {
    QVERIFY(dir_.isValid());
    store_ = std::make_unique<ConversationStore>();
    const QString path = dir_.filePath(QStringLiteral("c%1.sqlite").arg(++n_));
    QVERIFY2(store_->open(path), qPrintable(store_->lastError()));
    a_ = store_->createConversation(QStringLiteral("alpha"));
    store_->addMessage(a_, 0, QStringLiteral("user"), QStringLiteral("first"));
    b_ = store_->createConversation(QStringLiteral("beta"));
    c_ = store_->createConversation(QStringLiteral("gamma"));  // rows: gamma, beta, alpha
    model_ = std::make_unique<ConversationListModel>(store_.get());
    tester_ = std::make_unique<QAbstractItemModelTester>(
        model_.get(), QAbstractItemModelTester::FailureReportingMode::QtTest);
  }
  void cleanup() {
    tester_.reset();
    model_.reset();
    store_.reset();
  }

  void roles() {
    const QHash<int, QByteArray> names = model_->roleNames();
    QCOMPARE(names.value(ConversationListModel::ConversationIdRole), QByteArray("conversationId"));
    QCOMPARE(names.value(ConversationListModel::TitleRole), QByteArray("title"));
    QCOMPARE(names.value(ConversationListModel::UpdatedRole), QByteArray("updated"));
    QCOMPARE(names.value(ConversationListModel::MessageCountRole), QByteArray("messageCount"));
    QCOMPARE(model_->rowCount(), 3);
    QCOMPARE(model_->property("count").toInt(), 3);
    QCOMPARE(ids(), (QList<qint64>{c_, b_, a_}));
    const QModelIndex alpha = model_->index(2);
    QCOMPARE(alpha.data(ConversationListModel::TitleRole).toString(), QStringLiteral("alpha"));
    QCOMPARE(alpha.data(ConversationListModel::MessageCountRole).toInt(), 1);
    QCOMPARE(alpha.data(ConversationListModel::UpdatedRole).toDateTime(), store_->conversation(a_)->updatedAt);
    QVERIFY(alpha.data(ConversationListModel::UpdatedRole).toDateTime().isValid());
    QCOMPARE(model_->rowOf(b_), 1);
    QCOMPARE(model_->idAt(0), c_);
    QCOMPARE(model_->idAt(3), qint64(0));
    QCOMPARE(model_->titleOf(a_), QStringLiteral("alpha"));
    QCOMPARE(model_->titleOf(-5), QString());
  }

  void newConversationIsInsertedAtTop() {
    QSignalSpy inserted(model_.get(), &QAbstractItemModel::rowsInserted);
    QSignalSpy reset(model_.get(), &QAbstractItemModel::modelReset);
    QSignalSpy count(model_.get(), &ConversationListModel::countChanged);
    const qint64 id = model_->newConversation();
    QVERIFY(id > 0);
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(inserted.first().at(1).toInt(), 0);
    QCOMPARE(reset.count(), 0);
    QCOMPARE(count.count(), 1);
    QCOMPARE(model_->idAt(0), id);
    QCOMPARE(model_->rowCount(), 4);
  }

  void renameIsDataChanged() {
    QSignalSpy changed(model_.get(), &QAbstractItemModel::dataChanged);
    QSignalSpy reset(model_.get(), &QAbstractItemModel::modelReset);
    QSignalSpy moved(model_.get(), &QAbstractItemModel::rowsMoved);
    QVERIFY(model_->rename(1, QStringLiteral("Beta, renamed")));
    QCOMPARE(changed.count(), 1);
    QCOMPARE(changed.first().at(0).toModelIndex().row(), 1);
    QCOMPARE(changed.first().at(1).toModelIndex().row(), 1);
    QVERIFY(changed.first().at(2).value<QList<int>>().contains(ConversationListModel::TitleRole));
    QCOMPARE(reset.count(), 0);
    QCOMPARE(moved.count(), 0);
    QCOMPARE(model_->index(1).data(ConversationListModel::TitleRole).toString(), QStringLiteral("Beta, renamed"));
    QCOMPARE(store_->conversation(b_)->title, QStringLiteral("Beta, renamed"));
    QVERIFY(!model_->rename(7, QStringLiteral("x")));
    QVERIFY(!model_->rename(-1, QStringLiteral("x")));
  }

  void removeAndUndo() {
    QSignalSpy removed(model_.get(), &QAbstractItemModel::rowsRemoved);
    QSignalSpy inserted(model_.get(), &QAbstractItemModel::rowsInserted);
    QSignalSpy undo(model_.get(), &ConversationListModel::undoChanged);
    QVERIFY(!model_->canUndo());
    QVERIFY(model_->remove(1));  // beta
    QCOMPARE(removed.count(), 1);
    QCOMPARE(removed.first().at(1).toInt(), 1);
    QCOMPARE(ids(), (QList<qint64>{c_, a_}));
    QVERIFY(store_->isDeleted(b_));
    QVERIFY(model_->canUndo());
    QCOMPARE(model_->property("canUndo").toBool(), true);
    QCOMPARE(model_->undoTitle(), QStringLiteral("beta"));
    QCOMPARE(undo.count(), 1);
    QVERIFY(model_->remove(0));  // gamma
    QCOMPARE(model_->undoTitle(), QStringLiteral("gamma"));
    QCOMPARE(ids(), (QList<qint64>{a_}));

    QVERIFY(model_->undoRemove());  // the last removed comes back first, in its place
    QCOMPARE(ids(), (QList<qint64>{c_, a_}));
    QCOMPARE(model_->undoTitle(), QStringLiteral("beta"));
    QVERIFY(model_->undoRemove());
    QCOMPARE(ids(), (QList<qint64>{c_, b_, a_}));
    QCOMPARE(inserted.count(), 2);
    QVERIFY(!model_->canUndo());
    QVERIFY(!model_->undoRemove());
    QCOMPARE(store_->messages(a_).size(), 1);
  }

  void purgeForgetsUndo() {
    QVERIFY(model_->remove(2));  // alpha, with its message
    QCOMPARE(model_->purgeRemoved(), 1);
    QVERIFY(!model_->canUndo());
    QVERIFY(!model_->undoRemove());
    QVERIFY(!store_->conversation(a_).has_value());
    QCOMPARE(model_->rowCount(), 2);
  }

  void undoFollowsOtherViews() {
    QVERIFY(model_->remove(0));
    QVERIFY(model_->canUndo());
    QSignalSpy undo(model_.get(), &ConversationListModel::undoChanged);
    QVERIFY(store_->restoreConversation(c_));  // e.g. another window
    QVERIFY(!model_->canUndo());
    QCOMPARE(undo.count(), 1);
    QCOMPARE(ids(), (QList<qint64>{c_, b_, a_}));
  }

  void streamingMovesThenOnlyChangesData() {
    const qint64 m = store_->addMessage(a_, 0, QStringLiteral("assistant"), QStringLiteral("..."));
    QCOMPARE(ids(), (QList<qint64>{a_, c_, b_}));
    QPersistentModelIndex gamma = model_->index(1);
    QSignalSpy moved(model_.get(), &QAbstractItemModel::rowsMoved);
    QSignalSpy changed(model_.get(), &QAbstractItemModel::dataChanged);
    QSignalSpy reset(model_.get(), &QAbstractItemModel::modelReset);
    QSignalSpy layout(model_.get(), &QAbstractItemModel::layoutChanged);
    for (int i = 0; i < 3; ++i) QVERIFY(store_->updateMessage(m, QStringLiteral("partial %1").arg(i), {}, {}));
    QCOMPARE(moved.count(), 0);
    QCOMPARE(reset.count(), 0);
    QCOMPARE(layout.count(), 0);
    QCOMPARE(changed.count(), 3);
    QCOMPARE(changed.last().at(0).toModelIndex().row(), 0);
    QVERIFY(changed.last().at(2).value<QList<int>>().contains(ConversationListModel::UpdatedRole));
    QCOMPARE(model_->index(0).data(ConversationListModel::UpdatedRole).toDateTime(),
             store_->conversation(a_)->updatedAt);

    store_->addMessage(b_, 0, QStringLiteral("user"), QStringLiteral("hi"));  // the last row goes to the top
    QCOMPARE(moved.count(), 1);
    QCOMPARE(ids(), (QList<qint64>{b_, a_, c_}));
    QCOMPARE(gamma.row(), 2);  // persistent indexes follow the move
    QCOMPARE(model_->index(0).data(ConversationListModel::MessageCountRole).toInt(), 1);
    QCOMPARE(reset.count(), 0);
  }

  void staysInSyncWithStore_data() {
    QTest::addColumn<quint32>("seed");
    QTest::newRow("seed 1") << 1u;
    QTest::newRow("seed 2") << 2u;
    QTest::newRow("seed 42") << 42u;
  }
  void staysInSyncWithStore() {
    QFETCH(quint32, seed);
    QRandomGenerator rng(seed);
    QSignalSpy reset(model_.get(), &QAbstractItemModel::modelReset);
    QList<qint64> deleted;
    for (int step = 0; step < 120; ++step) {
      const QList<qint64> listed = ids();
      const auto pick = [&] { return listed.at(static_cast<int>(rng.bounded(static_cast<quint32>(listed.size())))); };
      switch (rng.bounded(6)) {
        case 0: model_->newConversation(); break;
        case 1:
          if (!listed.isEmpty()) model_->remove(model_->rowOf(pick()));
          break;
        case 2: model_->undoRemove(); break;
        case 3:
          if (!listed.isEmpty()) model_->rename(model_->rowOf(pick()), QStringLiteral("t%1").arg(step));
          break;
        case 4:
          if (!listed.isEmpty()) store_->deleteConversation(pick());  // behind the model's back
          break;
        default:
          if (!listed.isEmpty()) store_->addMessage(pick(), 0, QStringLiteral("user"), QStringLiteral("m%1").arg(step));
          break;
      }
      const auto expected = store_->conversations();
      QCOMPARE(model_->rowCount(), expected.size());
      for (int i = 0; i < expected.size(); ++i) {
        const QModelIndex idx = model_->index(i);
        QCOMPARE(idx.data(ConversationListModel::ConversationIdRole).toLongLong(), expected.at(i).id);
        QCOMPARE(idx.data(ConversationListModel::TitleRole).toString(), expected.at(i).title);
        QCOMPARE(idx.data(ConversationListModel::MessageCountRole).toInt(), expected.at(i).messageCount);
      }
    }
    QCOMPARE(reset.count(), 0);
  }

  void failedWriteIsReported() {
    QSignalSpy errors(model_.get(), &ConversationListModel::errorOccurred);
    store_->close();
    QVERIFY(!model_->rename(0, QStringLiteral("x")));
    QCOMPARE(errors.count(), 1);
    QVERIFY(model_->lastError().contains(QStringLiteral("not open")));
    QCOMPARE(model_->newConversation(), qint64(-1));
    QCOMPARE(errors.count(), 2);
  }

 private:
  QList<qint64> ids() const {
    QList<qint64> out;
    for (int i = 0; i < model_->rowCount(); ++i)
      out << model_->index(i).data(ConversationListModel::ConversationIdRole).toLongLong();
    return out;
  }

  QTemporaryDir dir_;
  int n_ = 0;
  std::unique_ptr<ConversationStore> store_;
  std::unique_ptr<ConversationListModel> model_;
  std::unique_ptr<QAbstractItemModelTester> tester_;
  qint64 a_ = 0, b_ = 0, c_ = 0;
};

QTEST_GUILESS_MAIN(TestConversationListModel)
#include "test_conversation_list_model.moc"
