// SearchResultsModel: the snippet turned into safe rich text (escaping first, so text a person
// typed such as "<b>" stays text; markers to <b>), and the model over a real ConversationStore:
// roles, a blank query, following the store (new matches, deleted conversations) without a reset
// when nothing changed. QAbstractItemModelTester checks every signal.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

#include "conversation_store.h"
#include "search_results_model.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::SearchResultsModel;

namespace {
const QString S(QChar(0x0002));  // a match starts
const QString E(QChar(0x0003));  // a match ends
}  // namespace

class TestSearchResultsModel : public QObject {
  Q_OBJECT

 private slots:
  void highlightSnippet_data() {
    QTest::addColumn<QString>("snippet");
    QTest::addColumn<QString>("color");
    QTest::addColumn<QString>("rich");
    QTest::addColumn<QString>("plain");
    QTest::newRow("one match") << "the " + S + "robot" + E + " arm" << "" << "the <b>robot</b> arm" << "the robot arm";
    QTest::newRow("two matches") << S + "cup" + E + " and " + S + "Cup" + E << ""
                                 << "<b>cup</b> and <b>Cup</b>" << "cup and Cup";
    QTest::newRow("typed markup stays text") << "say " + S + "<b>" + E + "hi</b>" << ""
                                             << "say <b>&lt;b&gt;</b>hi&lt;/b&gt;" << "say <b>hi</b>";
    QTest::newRow("entities and quotes") << "a & b \"" + S + "x" + E + "\" <i>" << ""
                                         << "a &amp; b &quot;<b>x</b>&quot; &lt;i&gt;" << "a & b \"x\" <i>";
    QTest::newRow("whitespace collapsed") << "line one\n\n  " + S + "two" + E + "\t end" << ""
                                          << "line one <b>two</b> end" << "line one two end";
    QTest::newRow("an unclosed match is closed") << "…end of " + S + "snip" << "" << "…end of <b>snip</b>"
                                                 << "…end of snip";
    QTest::newRow("a stray end marker is dropped") << "x" + E + "y " + S + S + "z" + E << "" << "xy <b>z</b>"
                                                   << "xy z";
    QTest::newRow("no match") << "plain text" << "" << "plain text" << "plain text";
    QTest::newRow("colored") << S + "hit" + E << "#4a8500" << "<b><font color=\"#4a8500\">hit</font></b>" << "hit";
    QTest::newRow("a color cannot inject")
        << S + "hit" + E << "\"><script>" << "<b><font color=\"&quot;&gt;&lt;script&gt;\">hit</font></b>" << "hit";
  }
  void highlightSnippet() {
    QFETCH(QString, snippet);
    QFETCH(QString, color);
    QFETCH(QString, rich);
    QFETCH(QString, plain);
    QCOMPARE(SearchResultsModel::highlightSnippet(snippet, color), rich);
    QCOMPARE(SearchResultsModel::plainSnippet(snippet), plain);
  }

  void init() {
    QVERIFY(dir_.isValid());
    store_ = std::make_unique<ConversationStore>();
    QVERIFY2(store_->open(dir_.filePath(QStringLiteral("s%1.sqlite").arg(++n_))), qPrintable(store_->lastError()));
    robot_ = store_->createConversation(QStringLiteral("Robots"));
    const qint64 q =
        store_->addMessage(robot_, 0, QStringLiteral("user"), QStringLiteral("Will the robot drop the cup?"));
    robotReply_ = store_->addMessage(robot_, q, QStringLiteral("assistant"),
                                     QStringLiteral("No: the <b>gripper</b> & the robot hold it."));
    other_ = store_->createConversation(QStringLiteral("Weather"));
    store_->addMessage(other_, 0, QStringLiteral("user"), QStringLiteral("Is it raining?"));
    model_ = std::make_unique<SearchResultsModel>(store_.get());
    tester_ = std::make_unique<QAbstractItemModelTester>(model_.get(),
                                                         QAbstractItemModelTester::FailureReportingMode::QtTest);
  }
  void cleanup() {
    tester_.reset();
    model_.reset();
    store_.reset();
  }

  void rolesAndQuery() {
    const auto names = model_->roleNames();
    for (const char* role : {"conversationId", "messageId", "title", "snippet", "plainSnippet", "rank"})
      QVERIFY2(names.values().contains(QByteArray(role)), role);
    QVERIFY(!model_->active());
    QCOMPARE(model_->rowCount(), 0);

    QSignalSpy query(model_.get(), &SearchResultsModel::queryChanged);
    QSignalSpy count(model_.get(), &SearchResultsModel::countChanged);
    model_->setQuery(QStringLiteral("  gripper "));
    QCOMPARE(model_->query(), QStringLiteral("gripper"));
    QVERIFY(model_->active());
    QCOMPARE(query.count(), 1);
    QCOMPARE(count.count(), 1);
    QCOMPARE(model_->rowCount(), 1);
    const QModelIndex hit = model_->index(0);
    QCOMPARE(hit.data(SearchResultsModel::ConversationIdRole).toLongLong(), robot_);
    QCOMPARE(hit.data(SearchResultsModel::MessageIdRole).toLongLong(), robotReply_);
    QCOMPARE(hit.data(SearchResultsModel::TitleRole).toString(), QStringLiteral("Robots"));
    QCOMPARE(hit.data(SearchResultsModel::RankRole).toInt(), 0);
    QCOMPARE(model_->conversationIdAt(0), robot_);
    QCOMPARE(model_->messageIdAt(0), robotReply_);
    QCOMPARE(model_->conversationIdAt(1), qint64(0));
    // The <b> the reply's text holds is escaped; only the match is bold.
    const QString snippet = hit.data(SearchResultsModel::SnippetRole).toString();
    QVERIFY2(snippet.contains(QStringLiteral("&lt;b&gt;<b>gripper</b>&lt;/b&gt;")), qPrintable(snippet));
    QVERIFY2(snippet.contains(QStringLiteral("&amp;")), qPrintable(snippet));
    QVERIFY(hit.data(SearchResultsModel::PlainSnippetRole).toString().contains(QStringLiteral("<b>gripper</b> &")));

    model_->setQuery(QStringLiteral("gripper"));  // the same query: nothing happens
    QCOMPARE(query.count(), 1);
    model_->setHighlightColor(QStringLiteral("#112233"));
    QVERIFY(model_->index(0).data(SearchResultsModel::SnippetRole).toString().contains(QStringLiteral("#112233")));

    model_->setQuery(QStringLiteral("robot"));
    QCOMPARE(model_->rowCount(), 2);  // the question and the reply
    model_->clear();
    QVERIFY(!model_->active());
    QCOMPARE(model_->rowCount(), 0);
    model_->setQuery(QStringLiteral("   "));
    QVERIFY(!model_->active());
  }

  void followsTheStore() {
    model_->setQuery(QStringLiteral("rain"));
    QCOMPARE(model_->rowCount(), 1);
    QSignalSpy reset(model_.get(), &QAbstractItemModel::modelReset);
    store_->renameConversation(robot_, QStringLiteral("Robot arms"));  // the results are the same
    QCOMPARE(reset.count(), 0);
    const qint64 third = store_->createConversation(QStringLiteral("More weather"));
    store_->addMessage(third, 0, QStringLiteral("user"), QStringLiteral("Rain tomorrow?"));
    QCOMPARE(model_->rowCount(), 2);
    QVERIFY(store_->deleteConversation(other_));
    QCOMPARE(model_->rowCount(), 1);
    QCOMPARE(model_->conversationIdAt(0), third);
    QVERIFY(store_->restoreConversation(other_));
    QCOMPARE(model_->rowCount(), 2);
  }

  void noMatches() {
    QSignalSpy count(model_.get(), &SearchResultsModel::countChanged);
    model_->setQuery(QStringLiteral("submarine"));
    QVERIFY(model_->active());
    QCOMPARE(model_->rowCount(), 0);
    QCOMPARE(count.count(), 0);
  }

 private:
  QTemporaryDir dir_;
  int n_ = 0;
  std::unique_ptr<ConversationStore> store_;
  std::unique_ptr<SearchResultsModel> model_;
  std::unique_ptr<QAbstractItemModelTester> tester_;
  qint64 robot_ = 0, robotReply_ = 0, other_ = 0;
};

QTEST_GUILESS_MAIN(TestSearchResultsModel)
#include "test_search_results_model.moc"
