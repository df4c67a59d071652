// ConversationStore: full-text search (conversation_store_search.cpp): words, prefixes, CJK, emoji,
// query syntax taken as text, snippets, ranking, the index following changes, speed, a closed store.
#include <QElapsedTimer>
#include <QtTest>

#include "conversation_db_util.h"
#include "conversation_store.h"
#include "conversation_store_fixture.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::SearchHit;

class TestConversationStoreSearch : public QObject, protected ConversationStoreFolder {
  Q_OBJECT

 private slots:
  void init() { makeFolder(); }  // a fresh folder per test (and per data row)

  // --- search ---

  void search_data() {
    QTest::addColumn<QString>("query");
    QTest::addColumn<QStringList>("expected");  // the hits' message contents, best first
    QTest::addColumn<QString>("marked");         // a part of the first snippet, [ ] for the markers
    const QString u1 = QStringLiteral("How do I configure the build so that warnings are errors?");
    const QString a1 = QStringLiteral("Add -Werror to CMAKE_CXX_FLAGS; \"quoted\" text, a*b globs, this OR that.");
    const QString u2 = QStringLiteral("我喜欢机器学习模型");
    const QString a2 = QStringLiteral("机器学习是人工智能的一个分支。");
    const QString u3 = QStringLiteral("Thumbs up 👍 for the release 🚀, 100% sure");
    QTest::newRow("word") << "configure" << QStringList{u1} << "[configure]";
    QTest::newRow("case-insensitive") << "CONFIGURE" << QStringList{u1} << "[configure]";
    QTest::newRow("two words, any order") << "errors build" << QStringList{u1} << "[build]";
    QTest::newRow("prefix of the last word") << "warnings are err" << QStringList{u1} << "[err]ors";
    QTest::newRow("short prefix") << "build co" << QStringList{u1} << "[co]nfigure";
    QTest::newRow("word in the reasoning") << "neural" << QStringList{a1} << "[neural]";
    QTest::newRow("CJK, two characters, mid-sentence") << "学习" << QStringList{a2, u2} << "[学习]";
    QTest::newRow("CJK, four characters") << "学习模型" << QStringList{u2} << "机器[学习模型]";
    QTest::newRow("CJK in the reasoning") << "深度学习" << QStringList{a2} << "[深度学习]";
    QTest::newRow("emoji") << "👍" << QStringList{u3} << "[👍]";
    QTest::newRow("emoji and a word") << "🚀 RELEASE" << QStringList{u3} << "[release] [🚀]";
    QTest::newRow("double quotes are text") << "\"quoted\"" << QStringList{a1} << "[\"quoted\"]";
    QTest::newRow("an unbalanced quote") << "\"quoted" << QStringList{a1} << "[\"quoted]";
    QTest::newRow("a lone quote") << "\"" << QStringList{a1} << "[\"]quoted";
    QTest::newRow("star is text") << "a*b" << QStringList{a1} << "[a*b]";
    QTest::newRow("star is not a prefix operator") << "configu*" << QStringList{} << "";
    QTest::newRow("minus is text") << "-Werror" << QStringList{a1} << "[-Werror]";
    QTest::newRow("OR is not an operator") << "configure OR zzzz" << QStringList{} << "";
    QTest::newRow("OR is a word, found") << "this OR that" << QStringList{a1} << "[this] [OR] [that]";
    QTest::newRow("NEAR and parentheses") << "NEAR(configure build)" << QStringList{} << "";
    QTest::newRow("column filter syntax") << "content:configure" << QStringList{} << "";
    QTest::newRow("caret and braces") << "^{configure}" << QStringList{} << "";
    QTest::newRow("percent is not a wildcard") << "%" << QStringList{u3} << "[%]";
    QTest::newRow("underscore is not a wildcard") << "_" << QStringList{a1} << "CMAKE[_]CXX[_]FLAGS";
    QTest::newRow("deleted conversations are left out") << "secret" << QStringList{} << "";
    QTest::newRow("no match") << "zzzz" << QStringList{} << "";
    QTest::newRow("blank") << "  \t " << QStringList{} << "";
  }
  void search() {
    QFETCH(QString, query);
    QFETCH(QStringList, expected);
    QFETCH(QString, marked);
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c1 = store.createConversation(QStringLiteral("Build"));
    const qint64 u1 = store.addMessage(c1, 0, QStringLiteral("user"),
                                       QStringLiteral("How do I configure the build so that warnings are errors?"));
    store.addMessage(c1, u1, QStringLiteral("assistant"),
                     QStringLiteral("Add -Werror to CMAKE_CXX_FLAGS; \"quoted\" text, a*b globs, this OR that."),
                     QStringLiteral("Recall neural compilers."));
    const qint64 c2 = store.createConversation();
    const qint64 u2 = store.addMessage(c2, 0, QStringLiteral("user"), QStringLiteral("我喜欢机器学习模型"));
    store.addMessage(c2, u2, QStringLiteral("assistant"), QStringLiteral("机器学习是人工智能的一个分支。"),
                     QStringLiteral("用户想了解深度学习"));
    const qint64 c3 = store.createConversation();
    store.addMessage(c3, 0, QStringLiteral("user"), QStringLiteral("Thumbs up 👍 for the release 🚀, 100% sure"));
    const qint64 gone = store.createConversation(QStringLiteral("Gone"));
    store.addMessage(gone, 0, QStringLiteral("user"), QStringLiteral("a secret about how to configure 机器学习"));
    QVERIFY(store.deleteConversation(gone));

    const QList<SearchHit> hits = store.search(query);
    QVERIFY2(store.lastError().isEmpty(), qPrintable(store.lastError()));
    QStringList got;
    for (const SearchHit& h : hits) got << store.message(h.messageId)->content;
    QCOMPARE(got, expected);
    for (int i = 0; i < hits.size(); ++i) {
      QCOMPARE(hits[i].rank, i);
      QCOMPARE(hits[i].conversationId, store.message(hits[i].messageId)->conversationId);
      QCOMPARE(hits[i].title, store.conversation(hits[i].conversationId)->title);
      QVERIFY(hits[i].snippet.contains(ConversationStore::kMatchStart));
      QCOMPARE(hits[i].snippet.count(ConversationStore::kMatchStart),
               hits[i].snippet.count(ConversationStore::kMatchEnd));
    }
    marked.replace(u'[', ConversationStore::kMatchStart).replace(u']', ConversationStore::kMatchEnd);
    if (!marked.isEmpty()) QVERIFY2(hits.first().snippet.contains(marked), qPrintable(hits.first().snippet));
  }

  void searchSnippet_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("query");
    QTest::addColumn<QString>("snippet");
    const QString s(QChar(0x02)), e(QChar(0x03)), ell(QChar(0x2026));
    QTest::newRow("short text, whole") << "Just a short answer." << "short" << "Just a " + s + "short" + e + " answer.";
    QTest::newRow("long text: 4 words before, 12 in all")
        << "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
           "seventeen eighteen nineteen twenty"
        << "eight"
        << ell + "four five six seven " + s + "eight" + e + " nine ten eleven twelve thirteen fourteen fifteen" + ell;
    QTest::newRow("match at the start")
        << "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi"
        << "alpha" << s + "alpha" + e + " beta gamma delta epsilon zeta eta theta iota kappa lambda mu" + ell;
    QTest::newRow("every match in the window marked, whitespace collapsed")
        << "cats\n\nand   dogs and cats\tand more cats" << "cats"
        << s + "cats" + e + " and dogs and " + s + "cats" + e + " and more " + s + "cats" + e;
    QTest::newRow("two words marked") << "red green blue" << "blue red" << s + "red" + e + " green " + s + "blue" + e;
    QTest::newRow("overlapping matches merged") << "abcdef" << "abcd cdef" << s + "abcdef" + e;
    QTest::newRow("marker characters in the text are removed")
        << QStringLiteral("x\u0002y\u0003z marker") << "marker" << "xyz " + s + "marker" + e;
    QTest::newRow("CJK counts characters as half words")
        << QStringLiteral("第一第二第三第四第五机器学习第六第七第八第九第十第十一第十二") << "机器学习"
        << ell + QStringLiteral("第二第三第四第五") + s + QStringLiteral("机器学习") + e +
               QStringLiteral("第六第七第八第九第十第十") + ell;
    QTest::newRow("a very long word is cut by characters")
        << QString(1000, u'x') + QStringLiteral("needle") + QString(1000, u'y') << "needle"
        << ell + QString(60, u'x') + s + "needle" + e + QString(174, u'y') + ell;
  }
  void searchSnippet() {
    QFETCH(QString, text);
    QFETCH(QString, query);
    QFETCH(QString, snippet);
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation();
    store.addMessage(c, 0, QStringLiteral("user"), text);
    const QList<SearchHit> hits = store.search(query);
    QCOMPARE(hits.size(), 1);
    QCOMPARE(hits.first().snippet, snippet);
  }

  void searchRanksAndFollowsChanges() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation(QStringLiteral("Ranking"));
    const qint64 reasoningOnly = store.addMessage(c, 0, QStringLiteral("assistant"), QStringLiteral("unrelated"),
                                                  QStringLiteral("think about kernels"));
    const qint64 once = store.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("kernels, once"));
    const qint64 many = store.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("kernels kernels kernels"));
    QList<qint64> ids;
    for (const SearchHit& h : store.search(QStringLiteral("kernels"))) ids << h.messageId;
    QCOMPARE(ids, (QList<qint64>{many, once, reasoningOnly}));
    // A reasoning match shows the reasoning.
    QCOMPARE(store.search(QStringLiteral("kernels")).last().snippet,
             QStringLiteral("think about \u0002kernels\u0003"));
    QCOMPARE(store.search(QStringLiteral("kernels"), 2).size(), 2);
    QCOMPARE(store.search(QStringLiteral("kernels"), 0).size(), 1);  // at least one

    // Updates (a streaming reply) and deletes keep the index in step.
    QVERIFY(store.updateMessage(many, QStringLiteral("rewritten completely"), {}, {}));
    ids.clear();
    for (const SearchHit& h : store.search(QStringLiteral("kernels"))) ids << h.messageId;
    QCOMPARE(ids, (QList<qint64>{once, reasoningOnly}));
    QCOMPARE(store.search(QStringLiteral("rewritten")).size(), 1);
    QVERIFY(store.deleteConversation(c));
    QVERIFY(store.search(QStringLiteral("rewritten")).isEmpty());
    QCOMPARE(store.purgeDeleted(), 1);
    RawDb raw(dbPath_);
    QVERIFY(raw.exec(QStringLiteral("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")));
    QCOMPARE(raw.scalar(QStringLiteral("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'rewritten'"))
                 .toInt(), 0);
  }

  void searchIsFastEnough() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation();
    qint64 parent = 0;
    QString filler;
    for (int w = 0; w < 200; ++w) filler += QStringLiteral("word%1 ").arg(w);
    for (int i = 0; i < 1000; ++i)
      parent = store.addMessage(c, parent, i % 2 ? QStringLiteral("assistant") : QStringLiteral("user"),
                                filler + QStringLiteral("token%1").arg(i));
    QElapsedTimer timer;
    timer.start();
    QCOMPARE(store.search(QStringLiteral("token987")).size(), 1);
    QCOMPARE(store.search(QStringLiteral("word17 word18")).size(), 50);
    QVERIFY2(timer.elapsed() < 2000, qPrintable(QString::number(timer.elapsed())));
  }

  void searchWhenClosed() {
    ConversationStore store;
    QVERIFY(store.search(QStringLiteral("x")).isEmpty());
    QVERIFY(store.lastError().contains(QStringLiteral("not open")));
  }
};

QTEST_GUILESS_MAIN(TestConversationStoreSearch)
#include "test_conversation_store_search.moc"
