// Importing conversations: every kind of bad file refused with the database unchanged (a full dump
// before and after), a file too big or unreadable, and all-or-nothing inserts.
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QtTest>

#include "conversation_db_util.h"
#include "conversation_import.h"
#include "conversation_import_fixture.h"
#include "conversation_store.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::ImportResult;

// moc reads this file and does not know raw strings: those here keep their quotes balanced and
// hold no backslash (else it finds no class and the test does not link).

class TestConversationImportErrors : public QObject, protected ConversationStoreFolder {
  Q_OBJECT

 private slots:
  void init() { makeFolder(); }

  void badImportsLeaveTheDatabaseUnchanged_data() {
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<QString>("error");  // a part of the error
    const QByteArray ours(kOurs);
    const auto withConversation = [](const QByteArray& conversation) {
      return R"({"format": "cosmos-chat-conversations", "version": 1, "conversations": [)" + conversation + "]}";
    };
    const auto withMessages = [&](const QByteArray& messages) {
      return withConversation(R"({"id": 1, "title": "t", "messages": [)" + messages + "]}");
    };
    const QByteArray user = R"({"id": 1, "role": "user", "content": "hi"})";

    QTest::newRow("empty file") << QByteArray() << "the file is empty";
    QTest::newRow("only whitespace") << QByteArray(" \n\t") << "the file is empty";
    QTest::newRow("truncated in the middle") << ours.left(ours.size() / 2) << "the file is truncated";
    QTest::newRow("truncated in a string") << QByteArray("{\"format\": \"cosmos-chat-conv") << "the file is truncated";
    QTest::newRow("truncated before the last brace") << ours.left(ours.lastIndexOf('}')) << "the file is truncated";
    QTest::newRow("invalid JSON") << QByteArray("{\"format\": \"x\",,\n \"version\": 1}")
                                  << "invalid JSON at byte 16 (line 1, column 17): unterminated object";
    QTest::newRow("invalid JSON on line 3") << QByteArray("{\n  \"a\": 1,\n  \"b\" 2\n}") << "(line 3, column ";
    QTest::newRow("garbage after the document") << ours + "xyz"
                                                << "invalid JSON at byte";
    QTest::newRow("a JSON string") << QByteArray(R"("hello")")
                                   << "invalid JSON at byte 1";  // Qt reads objects and arrays only
    QTest::newRow("neither format nor messages") << QByteArray(R"({"foo": 1})") << "$: not a conversation file";
    QTest::newRow("another format") << QByteArray(R"({"format": "chatgpt", "version": 1, "conversations": []})")
                                    << "$.format: \"chatgpt\" is not a Cosmos Chat conversation export";
    QTest::newRow("format missing") << QByteArray(R"({"version": 1, "conversations": []})")
                                    << "$.format: missing field";
    QTest::newRow("newer version")
        << QByteArray(R"({"format": "cosmos-chat-conversations", "version": 2, "conversations": []})")
        << "$.version: the file was made by a newer Cosmos Chat (format version 2; this version reads version 1)";
    QTest::newRow("unknown top-level field")
        << QByteArray(R"({"format": "cosmos-chat-conversations", "version": 1, "tags": [], "conversations": []})")
        << "$.tags: unknown field: the file was made by a newer Cosmos Chat";
    QTest::newRow("version missing") << QByteArray(R"({"format": "cosmos-chat-conversations", "conversations": []})")
                                     << "$.version: missing field";
    QTest::newRow("version is a string")
        << QByteArray(R"({"format": "cosmos-chat-conversations", "version": "1", "conversations": []})")
        << "$.version: expected an integer, got a string";
    QTest::newRow("version 0") << QByteArray(
                                      R"({"format": "cosmos-chat-conversations", "version": 0, "conversations": []})")
                               << "$.version: 0 is not a format version";
    QTest::newRow("conversations is an object")
        << QByteArray(R"({"format": "cosmos-chat-conversations", "version": 1, "conversations": {}})")
        << "$.conversations: expected an array, got an object";
    QTest::newRow("a conversation is a number")
        << withConversation("1") << "$.conversations[0]: expected an object, got a number";
    QTest::newRow("messages missing") << withConversation(R"({"id": 1, "title": "t"})")
                                      << "$.conversations[0].messages: missing field";
    QTest::newRow("title is a number") << withConversation(R"({"id": 1, "title": 5, "messages": []})")
                                       << "$.conversations[0].title: expected a string, got a number";
    QTest::newRow("content missing") << withMessages(R"({"id": 1, "role": "user"})")
                                     << "$.conversations[0].messages[0].content: missing field";
    QTest::newRow("content is a number")
        << withMessages(user + R"(, {"id": 2, "parent_id": 1, "role": "assistant", "content": 7})")
        << "$.conversations[0].messages[1].content: expected a string, got a number";
    QTest::newRow("unknown role")
        << withMessages(user + R"(, {"id": 2, "parent_id": 1, "role": "robot", "content": "x"})")
        << "$.conversations[0].messages[1].role: unknown role \"robot\" (expected system, user, assistant or tool)";
    QTest::newRow("developer is OpenAI's only") << withMessages(R"({"id": 1, "role": "developer", "content": "x"})")
                                                << "messages[0].role: unknown role \"developer\"";
    QTest::newRow("role missing") << withMessages(R"({"id": 1, "content": "x"})")
                                  << "$.conversations[0].messages[0].role: missing field";
    QTest::newRow("parent that does not exist")
        << withMessages(user + R"(, {"id": 2, "parent_id": 99, "role": "assistant", "content": "x"})")
        << "$.conversations[0].messages[1].parent_id: 99 is not an earlier message of this conversation";
    QTest::newRow("parent after its child")
        << withMessages(
               R"({"id": 1, "parent_id": 2, "role": "user", "content": "x"},
                  {"id": 2, "role": "user", "content": "y"})")
        << "$.conversations[0].messages[0].parent_id: 2 is not an earlier message";
    QTest::newRow("its own parent") << withMessages(R"({"id": 1, "parent_id": 1, "role": "user", "content": "x"})")
                                    << "$.conversations[0].messages[0].parent_id: 1 is not an earlier message";
    QTest::newRow("parent in another conversation")
        << withConversation(R"({"id": 1, "messages": [{"id": 5, "role": "user", "content": "a"}]},
                               {"id": 2, "messages": [{"id": 6, "parent_id": 5, "role": "user", "content": "b"}]})")
        << "$.conversations[1].messages[0].parent_id: 5 is not an earlier message";
    QTest::newRow("an id twice") << withMessages(user + "," + user)
                                 << "$.conversations[0].messages[1].id: 1 is used by two messages";
    QTest::newRow("id missing") << withMessages(R"({"role": "user", "content": "x"})")
                                << "$.conversations[0].messages[0].id: missing field";
    QTest::newRow("id not an integer") << withMessages(R"({"id": 1.5, "role": "user", "content": "x"})")
                                       << "$.conversations[0].messages[0].id: expected an integer, got a number";
    QTest::newRow("current_leaf not a message")
        << withConversation(R"({"id": 1, "current_leaf": 42, "messages": [{"id": 1, "role": "user", "content": "x"}]})")
        << "$.conversations[0].current_leaf: 42 is not a message of this conversation";
    QTest::newRow("bad time") << withConversation(R"({"id": 1, "created_at": "yesterday", "messages": []})")
                              << "$.conversations[0].created_at: \"yesterday\" is not an ISO 8601 date and time";
    QTest::newRow("bad message time") << withMessages(R"({"id": 1, "role": "user", "content": "x", "created_at": 5})")
                                      << "$.conversations[0].messages[0].created_at: expected a string, got a number";
    QTest::newRow("meta is an array") << withMessages(R"({"id": 1, "role": "user", "content": "x", "meta": []})")
                                      << "$.conversations[0].messages[0].meta: expected an object, got an array";
    QTest::newRow("the second conversation is bad")
        << withConversation(R"({"id": 1, "messages": [{"id": 1, "role": "user", "content": "fine"}]},
                               {"id": 2, "messages": [{"id": 2, "role": "robot", "content": "x"}]})")
        << "$.conversations[1].messages[0].role: unknown role";
    QTest::newRow("OpenAI: empty array") << QByteArray("[]") << "$: the array is empty";
    QTest::newRow("OpenAI: array of numbers") << QByteArray("[1, 2]") << "$[0]: expected a message";
    QTest::newRow("OpenAI: unknown role")
        << QByteArray(R"([{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}])")
        << "$[1].role: unknown role \"robot\"";
    QTest::newRow("OpenAI: content missing") << QByteArray(R"([{"role": "user"}])") << "$[0].content: missing field";
    QTest::newRow("OpenAI: content is a number")
        << QByteArray(R"([{"role": "user", "content": 3}])")
        << "$[0].content: expected a string, an array of text parts or null, got a number";
    QTest::newRow("OpenAI: image part")
        << QByteArray(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "see"},
             {"type": "image_url", "image_url": {"url": "x"}}]}]})")
        << "$.messages[0].content[1].type: part type \"image_url\" is not supported (only text parts are)";
    QTest::newRow("OpenAI: a message is a string")
        << QByteArray(R"([{"role": "user", "content": "x"}, "hi"])") << "$[1]: expected an object, got a string";
    QTest::newRow("OpenAI: a conversation without messages")
        << QByteArray(R"([{"title": "a", "messages": []}, {"title": "b"}])") << "$[1].messages: missing field";
    QTest::newRow("OpenAI: messages is an object")
        << QByteArray(R"({"messages": {}})") << "$.messages: expected an array, got an object";
  }
  void badImportsLeaveTheDatabaseUnchanged() {
    QFETCH(QByteArray, json);
    QFETCH(QString, error);
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    seed(store);
    const QStringList before = dumpDatabase(dbPath_);
    QSignalSpy changed(&store, &ConversationStore::conversationsChanged);
    const ImportResult r = cosmos::ui::importConversationsFromData(store, json);
    QVERIFY(!r.ok);
    QVERIFY2(r.error.contains(error), qPrintable(r.error));
    QVERIFY(r.conversationIds.isEmpty());
    QCOMPARE(r.duplicatesSkipped, 0);
    QCOMPARE(changed.count(), 0);
    QCOMPARE(dumpDatabase(dbPath_), before);
  }

  void hugeFileIsRefusedUnread() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    seed(store);
    const QStringList before = dumpDatabase(dbPath_);
    const QString path = dir_.filePath(QStringLiteral("huge.json"));
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      QVERIFY(f.resize(cosmos::ui::kImportMaxBytes + 1));  // sparse: nothing is written
    }
    QElapsedTimer timer;
    timer.start();
    const ImportResult r = cosmos::ui::importConversations(store, path);
    QVERIFY(!r.ok);
    QVERIFY2(r.error.contains(QStringLiteral("files over 256 MiB are not imported")) && r.error.contains(path),
             qPrintable(r.error));
    QVERIFY2(timer.elapsed() < 1000, "the file must not be read");
    QCOMPARE(dumpDatabase(dbPath_), before);

    // At the limit: read (and refused as JSON, not for its size).
    QVERIFY(QFile::resize(path, 100));
    const ImportResult small = cosmos::ui::importConversations(store, path);
    QVERIFY(!small.ok);
    QVERIFY2(small.error.contains(QStringLiteral("invalid JSON")), qPrintable(small.error));
  }

  void fileErrors() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const QString missing = dir_.filePath(QStringLiteral("missing.json"));
    ImportResult r = cosmos::ui::importConversations(store, missing);
    QVERIFY(!r.ok);
    QVERIFY2(r.error.startsWith(QStringLiteral("cannot read ") + missing), qPrintable(r.error));
    r = cosmos::ui::importConversations(store, dir_.path());
    QVERIFY(!r.ok);
    QVERIFY2(r.error.contains(dir_.path()), qPrintable(r.error));

    const QString good = dir_.filePath(QStringLiteral("good.json"));
    QFile f(good);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(kOurs);
    f.close();
    r = cosmos::ui::importConversations(store, good);
    QVERIFY2(r.ok, qPrintable(r.error));
    QCOMPARE(r.conversationIds.size(), 2);

    const QString bad = dir_.filePath(QStringLiteral("bad.json"));
    QFile g(bad);
    QVERIFY(g.open(QIODevice::WriteOnly));
    g.write(R"([{"role": "robot", "content": "x"}])");
    g.close();
    r = cosmos::ui::importConversations(store, bad);
    QCOMPARE(r.error,
             bad + QStringLiteral(": $[0].role: unknown role \"robot\" (expected system, user, assistant or tool)"));

    ConversationStore closed;
    r = cosmos::ui::importConversationsFromData(closed, kOurs);
    QVERIFY(!r.ok);
    QVERIFY2(r.error.contains(QStringLiteral("not open")), qPrintable(r.error));
  }

  void failureWhileInsertingRollsEverythingBack() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    seed(store);
    RawDb raw(dbPath_);
    QVERIFY(
        raw.exec(QStringLiteral("CREATE TRIGGER boom BEFORE INSERT ON messages WHEN new.content = 'boom' "
                                "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")));
    const QStringList before = dumpDatabase(dbPath_);
    const QByteArray json = R"([{"title": "1", "messages": [{"role": "user", "content": "first"}]},
                                {"title": "2", "messages": [{"role": "user", "content": "second"}]},
                                {"title": "3", "messages": [{"role": "user", "content": "third"},
                                                            {"role": "assistant", "content": "boom"}]}])";
    QSignalSpy changed(&store, &ConversationStore::conversationsChanged);
    ImportResult r = cosmos::ui::importConversationsFromData(store, json);
    QVERIFY(!r.ok);
    QVERIFY2(r.error.contains(QStringLiteral("injected failure")), qPrintable(r.error));
    QCOMPARE(changed.count(), 0);
    QCOMPARE(dumpDatabase(dbPath_), before);  // the first two are not there either
    QVERIFY(store.search(QStringLiteral("first")).isEmpty());

    QVERIFY(raw.exec(QStringLiteral("DROP TRIGGER boom")));
    r = cosmos::ui::importConversationsFromData(store, json);
    QVERIFY2(r.ok, qPrintable(r.error));
    QCOMPARE(r.conversationIds.size(), 3);
    QCOMPARE(changed.count(), 1);
  }

 private:
  // Something to keep: a conversation with a branch and a deleted one.
  static void seed(ConversationStore& store) {
    const qint64 c = store.createConversation(QStringLiteral("Kept"));
    const qint64 u = store.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("question"));
    store.addMessage(c, u, QStringLiteral("assistant"), QStringLiteral("answer one"), QStringLiteral("why"),
                     {{QStringLiteral("stats"), QVariantMap{{QStringLiteral("generated_tokens"), 2}}}});
    store.addMessage(c, u, QStringLiteral("assistant"), QStringLiteral("answer two"));
    const qint64 gone = store.createConversation(QStringLiteral("Gone"));
    store.addMessage(gone, 0, QStringLiteral("user"), QStringLiteral("bye"));
    store.deleteConversation(gone);
  }
};

QTEST_GUILESS_MAIN(TestConversationImportErrors)
#include "test_conversation_import_errors.moc"
