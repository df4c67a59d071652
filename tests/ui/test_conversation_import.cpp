// Importing conversations: our JSON format (docs/CONVERSATION_JSON.md) field by field and in a
// round trip, the OpenAI-style formats, every kind of bad file refused with the database unchanged
// (a full dump before and after), all-or-nothing inserts, duplicates, and cosmos-cli import.
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <memory>

#include "conversation_db_util.h"
#include "conversation_export.h"
#include "conversation_import.h"
#include "conversation_store.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::ImportResult;
using cosmos::ui::StoredMessage;

namespace {

// moc reads this file and does not know raw strings: those here keep their quotes balanced and
// hold no backslash (else it finds no class and the test does not link).

// A file in our format: two conversations, one with branches (current_leaf on the older branch).
const char kOurs[] = R"({
  "format": "cosmos-chat-conversations",
  "version": 1,
  "exported_at": "2025-01-02T03:04:05.000Z",
  "app": "Cosmos Chat 0.1.0",
  "conversations": [
    {
      "id": 17,
      "title": "Robots 🤖 and 机器人",
      "created_at": "2024-03-01T10:00:00.123Z",
      "updated_at": "2024-03-01T10:05:00.456Z",
      "current_leaf": 21,
      "messages": [
        {"id": 19, "parent_id": null, "role": "system", "content": "You are helpful.", "reasoning": "",
         "created_at": "2024-03-01T10:00:00.123Z", "meta": {}},
        {"id": 20, "parent_id": 19, "role": "user", "content": "Is the robot about to drop the cup?",
         "reasoning": "", "created_at": "2024-03-01T10:00:01.000Z", "meta": {}},
        {"id": 21, "parent_id": 20, "role": "assistant", "content": "No, the grip is firm.",
         "reasoning": "The gripper closes fully.", "created_at": "2024-03-01T10:00:05.000Z",
         "meta": {"stats": {"prompt_tokens": 12, "generated_tokens": 34, "ttft_s": 0.25, "decode_tok_per_s": 180.5,
                            "prefill_tok_per_s": 900},
                  "thoughtSeconds": 1.5, "raw": "<think>The gripper closes fully.</think>No, the grip is firm.",
                  "stopped": false, "model": "Cosmos-Reason1-7B", "precision": "bf16",
                  "sampling": {"temperature": 0.6, "top_k": 0, "top_p": 0.95, "min_p": 0, "repetition_penalty": 1.05,
                               "seed": 42, "max_new_tokens": 4096},
                  "future_key": [1, {"nested": null}]}},
        {"id": 25, "parent_id": 20, "role": "assistant", "content": "Yes — it is slipping.",
         "reasoning": "", "created_at": "2024-03-01T10:04:00.000Z",
         "meta": {"error": "stopped early", "stopped": true}},
        {"id": 26, "parent_id": 25, "role": "user", "content": "Why?", "created_at": "2024-03-01T10:05:00.456Z"},
        {"id": 30, "parent_id": 25, "role": "tool", "content": "[3, 4]"}
      ]
    },
    {"id": 18, "title": "", "created_at": "2024-02-01T00:00:00Z", "updated_at": "2024-02-01T00:00:00Z",
     "current_leaf": null, "messages": []}
  ]
})";

QJsonObject jsonObject(const QByteArray& json) { return QJsonDocument::fromJson(json).object(); }

QByteArray toJson(const QJsonValue& v) {
  return v.isArray() ? QJsonDocument(v.toArray()).toJson() : QJsonDocument(v.toObject()).toJson();
}

// The conversation in our format (the exporter's side, written here from the spec).
QJsonObject exportConversation(const ConversationStore& store, qint64 id) {
  const auto summary = store.conversation(id);
  QJsonArray messages;
  for (const StoredMessage& m : store.messages(id)) {
    messages.append(QJsonObject{{"id", m.id},
                                {"parent_id", m.parentId > 0 ? QJsonValue(m.parentId) : QJsonValue()},
                                {"role", m.role},
                                {"content", m.content},
                                {"reasoning", m.reasoning},
                                {"created_at", m.createdAt.toString(Qt::ISODateWithMs)},
                                {"meta", QJsonObject::fromVariantMap(m.meta)}});
  }
  const qint64 leaf = store.latestLeaf(id);
  return QJsonObject{{"id", id},
                     {"title", summary->title},
                     {"created_at", summary->createdAt.toString(Qt::ISODateWithMs)},
                     {"updated_at", summary->updatedAt.toString(Qt::ISODateWithMs)},
                     {"current_leaf", leaf > 0 ? QJsonValue(leaf) : QJsonValue()},
                     {"messages", messages}};
}

QByteArray exportAll(const ConversationStore& store) {
  QJsonArray conversations;
  for (const auto& c : store.conversations()) conversations.append(exportConversation(store, c.id));
  return toJson(QJsonObject{{"format", "cosmos-chat-conversations"},
                            {"version", 1},
                            {"exported_at", QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs)},
                            {"app", "Cosmos Chat test"},
                            {"conversations", conversations}});
}

// Everything about the stored conversations except their ids, in creation order.
QJsonArray normalized(const ConversationStore& store) {
  auto list = store.conversations();
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
    return a.createdAt != b.createdAt ? a.createdAt < b.createdAt : a.title < b.title;
  });
  QJsonArray out;
  for (const auto& c : list) {
    const QList<StoredMessage> messages = store.messages(c.id);
    QHash<qint64, int> index;
    QJsonArray ms;
    for (const StoredMessage& m : messages) {
      index.insert(m.id, static_cast<int>(index.size()));
      ms.append(QJsonObject{{"parent", m.parentId > 0 ? index.value(m.parentId) : -1},
                            {"role", m.role},
                            {"content", m.content},
                            {"reasoning", m.reasoning},
                            {"created", m.createdAt.toMSecsSinceEpoch()},
                            {"meta", QJsonObject::fromVariantMap(m.meta)}});
    }
    out.append(QJsonObject{{"title", c.title},
                           {"created", c.createdAt.toMSecsSinceEpoch()},
                           {"updated", c.updatedAt.toMSecsSinceEpoch()},
                           {"leaf", index.value(store.latestLeaf(c.id), -1)},
                           {"messages", ms}});
  }
  return out;
}

QString chain(const ConversationStore& store, qint64 id) {
  QStringList parts;
  qint64 previous = 0;
  for (const StoredMessage& m : store.messages(id)) {
    parts << m.role + u':' + m.content;
    if (m.parentId != previous) parts.last() += QStringLiteral(" (branch)");
    previous = m.id;
  }
  return store.conversation(id)->title + u'#' + parts.join(u'|');
}

}  // namespace

class TestConversationImport : public QObject {
  Q_OBJECT

 private slots:
  void init() {
    tmp_ = std::make_unique<QTemporaryDir>();
    QVERIFY(tmp_->isValid());
    dir_ = QDir(tmp_->path());
    dbPath_ = dir_.filePath(QStringLiteral("conversations.sqlite"));
  }

  void ourFormatFields() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const ImportResult r = cosmos::ui::importConversationsFromData(store, kOurs);
    QVERIFY2(r.ok, qPrintable(r.error));
    QVERIFY(r.error.isEmpty());
    QCOMPARE(r.conversationIds.size(), 2);
    QCOMPARE(r.duplicatesSkipped, 0);
    const qint64 c = r.conversationIds[0];

    const auto summary = *store.conversation(c);
    QCOMPARE(summary.title, QStringLiteral("Robots 🤖 and 机器人"));
    QCOMPARE(summary.createdAt, QDateTime::fromString(QStringLiteral("2024-03-01T10:00:00.123Z"), Qt::ISODateWithMs));
    QCOMPARE(summary.updatedAt.toMSecsSinceEpoch(),
             QDateTime::fromString(QStringLiteral("2024-03-01T10:05:00.456Z"), Qt::ISODateWithMs).toMSecsSinceEpoch());
    QCOMPARE(summary.messageCount, 6);

    const QList<StoredMessage> ms = store.messages(c);
    QCOMPARE(ms.size(), 6);
    const QJsonObject file = jsonObject(kOurs);
    const QJsonArray source =
        file[QStringLiteral("conversations")].toArray().first().toObject()[QStringLiteral("messages")].toArray();
    QHash<qint64, qint64> newId;  // source id → stored id
    for (int i = 0; i < ms.size(); ++i) {
      const QJsonObject s = source[i].toObject();
      newId.insert(s["id"].toInteger(), ms[i].id);
      QCOMPARE(ms[i].role, s["role"].toString());
      QCOMPARE(ms[i].content, s["content"].toString());
      QCOMPARE(ms[i].reasoning, s["reasoning"].toString());
      QCOMPARE(ms[i].parentId, s["parent_id"].isNull() ? 0 : newId.value(s["parent_id"].toInteger()));
      if (s.contains(u"created_at"))
        QCOMPARE(ms[i].createdAt, QDateTime::fromString(s["created_at"].toString(), Qt::ISODateWithMs));
      // meta verbatim (numbers, nesting, unknown keys)
      RawDb raw(dbPath_);
      const QJsonObject stored = jsonObject(
          raw.scalar(QStringLiteral("SELECT meta_json FROM messages WHERE id = %1").arg(ms[i].id)).toByteArray());
      QCOMPARE(stored, s["meta"].toObject());
    }
    QCOMPARE(ms[2].meta.value(QStringLiteral("sampling")).toMap().value(QStringLiteral("seed")).toInt(), 42);
    // The message without created_at got the import's time.
    QVERIFY(qAbs(ms[5].createdAt.secsTo(QDateTime::currentDateTimeUtc())) < 60);

    // current_leaf: the older branch is shown, until a message is added.
    QCOMPARE(store.latestLeaf(c), newId.value(21));
    const qint64 added = store.addMessage(c, newId.value(26), QStringLiteral("assistant"), QStringLiteral("Because."));
    QCOMPARE(store.latestLeaf(c), added);

    // The empty conversation: kept with its times; ordering by updated_at.
    const auto empty = *store.conversation(r.conversationIds[1]);
    QCOMPARE(empty.title, QString());
    QCOMPARE(empty.messageCount, 0);
    QCOMPARE(empty.createdAt, QDateTime(QDate(2024, 2, 1), QTime(0, 0), Qt::UTC));
    QCOMPARE(store.latestLeaf(r.conversationIds[1]), qint64(0));

    // Searchable at once.
    QCOMPARE(store.search(QStringLiteral("gripper")).size(), 1);
    QCOMPARE(store.search(QStringLiteral("gripper")).first().messageId, newId.value(21));
  }

  void roundTrip() {
    QJsonArray expected;
    QByteArray exported, realExport;
    {
      ConversationStore a;
      QVERIFY(a.open(dir_.filePath(QStringLiteral("a.sqlite"))));
      const qint64 c = a.createConversation();
      const qint64 sys = a.addMessage(c, 0, QStringLiteral("system"), QStringLiteral("Be brief."));
      const qint64 u1 = a.addMessage(c, sys, QStringLiteral("user"), QStringLiteral("机器人 👍 question\nwith lines"));
      a.addMessage(c, u1, QStringLiteral("assistant"), QStringLiteral("first"), QStringLiteral("think 1"),
                   {{QStringLiteral("stats"), QVariantMap{{QStringLiteral("generated_tokens"), 3},
                                                          {QStringLiteral("decode_tok_per_s"), 181.25}}},
                    {QStringLiteral("thoughtSeconds"), 0.5}});
      const qint64 a2 = a.addMessage(c, u1, QStringLiteral("assistant"), QStringLiteral("second"), {},
                                     {{QStringLiteral("stopped"), true}});
      const qint64 u2 = a.addMessage(c, a2, QStringLiteral("user"), QStringLiteral("edit A"));
      a.addMessage(c, a2, QStringLiteral("user"), QStringLiteral("edit B"));
      a.addMessage(c, u2, QStringLiteral("tool"), QStringLiteral("{}"));
      a.createConversation(QStringLiteral("Nothing yet"));
      const qint64 untitled = a.createConversation();
      a.addMessage(untitled, 0, QStringLiteral("user"), QStringLiteral("named, then renamed to nothing"));
      QVERIFY(a.renameConversation(untitled, QString()));  // an empty title with messages stays empty
      const qint64 longOne = a.createConversation(QStringLiteral("Long"));
      qint64 parent = 0;
      for (int i = 0; i < 60; ++i)
        parent = a.addMessage(longOne, parent, i % 2 ? QStringLiteral("assistant") : QStringLiteral("user"),
                              QStringLiteral("turn %1").arg(i));
      expected = normalized(a);
      exported = exportAll(a);
      // The app's exporter writes what this test's writer writes (the format of docs/CONVERSATION_JSON.md).
      QString error;
      realExport = cosmos::ui::renderExport(a, {}, cosmos::ui::ExportFormat::Json, &error);
      QVERIFY2(!realExport.isEmpty(), qPrintable(error));
    }
    ConversationStore b;
    QVERIFY(b.open(dbPath_));
    const ImportResult r = cosmos::ui::importConversationsFromData(b, exported);
    QVERIFY2(r.ok, qPrintable(r.error));
    QCOMPARE(r.conversationIds.size(), 4);
    QCOMPARE(normalized(b), expected);
    // Exported again, it is the same file (but ids and exported_at), and importing it again adds nothing.
    const ImportResult again = cosmos::ui::importConversationsFromData(b, exportAll(b));
    QVERIFY2(again.ok, qPrintable(again.error));
    QCOMPARE(again.conversationIds.size(), 0);
    QCOMPARE(again.duplicatesSkipped, 4);
    QCOMPARE(normalized(b), expected);
    // Export (the app's exporter) -> import -> export: the same conversations, every field and branch.
    ConversationStore c;
    QVERIFY(c.open(dir_.filePath(QStringLiteral("c.sqlite"))));
    const ImportResult viaApp = cosmos::ui::importConversationsFromData(c, realExport);
    QVERIFY2(viaApp.ok, qPrintable(viaApp.error));
    QCOMPARE(viaApp.conversationIds.size(), 4);
    QCOMPARE(normalized(c), expected);
    QString error;
    const QByteArray second = cosmos::ui::renderExport(c, {}, cosmos::ui::ExportFormat::Json, &error);
    QVERIFY2(!second.isEmpty(), qPrintable(error));
    ConversationStore d;
    QVERIFY(d.open(dir_.filePath(QStringLiteral("d.sqlite"))));
    QVERIFY(cosmos::ui::importConversationsFromData(d, second).ok);
    QCOMPARE(normalized(d), expected);
  }

  // An OpenAI-style reply with the reasoning inline is split like the app's own replies.
  void openAiInlineReasoningIsSplit() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const ImportResult r = cosmos::ui::importConversationsFromData(
        store, R"([{"role": "user", "content": "cup?"},
                   {"role": "assistant", "content": "<think>\nThe cup is right.\n</think>\n\n<answer>\nMove it left.\n</answer>"},
                   {"role": "assistant", "content": "a < b, no tags"}])");
    QVERIFY2(r.ok, qPrintable(r.error));
    const auto messages = store.messages(r.conversationIds.value(0));
    QCOMPARE(messages.size(), 3);
    QCOMPARE(messages[1].reasoning, QStringLiteral("The cup is right."));
    QCOMPARE(messages[1].content, QStringLiteral("Move it left."));
    QVERIFY(messages[1].meta.value(QStringLiteral("raw")).toString().startsWith(QStringLiteral("<think>")));
    QCOMPARE(messages[2].content, QStringLiteral("a < b, no tags"));
    QVERIFY(messages[2].reasoning.isEmpty());
    QVERIFY(!messages[2].meta.contains(QStringLiteral("raw")));
  }

  void openAiFormats_data() {
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<QStringList>("expected");  // title#role:content|... per conversation
    QTest::newRow("object with a title")
        << QByteArray(R"({"title": "Trip", "model": "gpt-x", "messages": [{"role": "system", "content": "Be brief."},
             {"role": "user", "content": "Paris?"}, {"role": "assistant", "content": "Yes."}]})")
        << QStringList{"Trip#system:Be brief.|user:Paris?|assistant:Yes."};
    QTest::newRow("object without a title: the first user message names it")
        << QByteArray("{\"messages\": [{\"role\": \"user\", \"content\": \"What is  WAL\\nmode?\"}]}")
        << QStringList{"What is WAL mode?#user:What is  WAL\nmode?"};
    QTest::newRow("bare messages array")
        << QByteArray(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! 👋"}])")
        << QStringList{"Hi#user:Hi|assistant:Hello! 👋"};
    QTest::newRow("array of conversations")
        << QByteArray(R"([{"title": "A", "messages": [{"role": "user", "content": "one"}]},
                          {"title": "B", "messages": [{"role": "user", "content": "two"},
                                                      {"role": "assistant", "content": "三"}]}])")
        << QStringList{"A#user:one", "B#user:two|assistant:三"};
    QTest::newRow("content as text parts")
        << QByteArray(R"([{"role": "user", "content": [{"type": "text", "text": "line one"},
                                                        {"type": "input_text", "text": "line two"}]}])")
        << QStringList{"line one line two#user:line one\nline two"};
    QTest::newRow("developer and function roles")
        << QByteArray(R"({"title": "R", "messages": [{"role": "developer", "content": "rules"},
             {"role": "function", "name": "f", "content": "42"}]})")
        << QStringList{"R#system:rules|tool:42"};
    QTest::newRow("tool call with null content")
        << QByteArray(R"({"title": "T", "messages": [{"role": "user", "content": "weather?"},
             {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
              "function": {"name": "weather", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]})")
        << QStringList{"T#user:weather?|assistant:|tool:sunny"};
    QTest::newRow("empty conversation") << QByteArray(R"({"title": "Empty", "messages": []})") << QStringList{"Empty#"};
    QTest::newRow("UTF-8 byte order mark") << QByteArray("\xEF\xBB\xBF[{\"role\": \"user\", \"content\": \"bom\"}]")
                                           << QStringList{"bom#user:bom"};
  }
  void openAiFormats() {
    QFETCH(QByteArray, json);
    QFETCH(QStringList, expected);
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const ImportResult r = cosmos::ui::importConversationsFromData(store, json);
    QVERIFY2(r.ok, qPrintable(r.error));
    QStringList got;
    for (qint64 id : r.conversationIds) got << chain(store, id);
    QCOMPARE(got, expected);
  }

  void openAiExtrasAreKept() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const ImportResult r = cosmos::ui::importConversationsFromData(store, R"([
      {"role": "user", "content": "weather?", "name": "ann"},
      {"role": "assistant", "content": "Sunny.", "reasoning_content": "Check the forecast.",
       "tool_calls": [{"id": "c1", "function": {"name": "weather"}}]}])");
    QVERIFY2(r.ok, qPrintable(r.error));
    const QList<StoredMessage> ms = store.messages(r.conversationIds.first());
    QCOMPARE(ms.size(), 2);
    QCOMPARE(ms[0].meta.value(QStringLiteral("openai")).toMap().value(QStringLiteral("name")).toString(),
             QStringLiteral("ann"));
    QCOMPARE(ms[1].reasoning, QStringLiteral("Check the forecast."));
    const QVariantList calls =
        ms[1].meta.value(QStringLiteral("openai")).toMap().value(QStringLiteral("tool_calls")).toList();
    QCOMPARE(calls.size(), 1);
    QCOMPARE(calls[0].toMap().value(QStringLiteral("id")).toString(), QStringLiteral("c1"));
    QVERIFY(!ms[1].meta.value(QStringLiteral("openai")).toMap().contains(QStringLiteral("reasoning_content")));
  }

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

  void duplicatesAreSkipped() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    // Stored through the app's path (addMessage): the same chat as the file below.
    const qint64 stored = store.createConversation(QStringLiteral("Another title"));
    const qint64 hi = store.addMessage(stored, 0, QStringLiteral("user"), QStringLiteral("Hi"));
    store.addMessage(stored, hi, QStringLiteral("assistant"), QStringLiteral("Hello!"),
                     QStringLiteral("other thoughts"));
    const QByteArray chat = R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}])";

    ImportResult r = cosmos::ui::importConversationsFromData(store, chat);
    QVERIFY2(r.ok, qPrintable(r.error));
    QCOMPARE(r.conversationIds.size(), 0);  // same roles, contents and tree (title and reasoning do not count)
    QCOMPARE(r.duplicatesSkipped, 1);

    // A different tree is not a duplicate: the same messages, but the answer is a second root.
    r = cosmos::ui::importConversationsFromData(store, R"({"format": "cosmos-chat-conversations", "version": 1,
      "conversations": [{"id": 1, "messages": [{"id": 1, "role": "user", "content": "Hi"},
                                               {"id": 2, "role": "assistant", "content": "Hello!"}]}]})");
    QVERIFY2(r.ok, qPrintable(r.error));
    QCOMPARE(r.conversationIds.size(), 1);
    QCOMPARE(r.duplicatesSkipped, 0);

    // Twice in one file: the second is skipped.
    r = cosmos::ui::importConversationsFromData(store, R"([
        {"title": "x", "messages": [{"role": "user", "content": "twin"}]},
        {"title": "y", "messages": [{"role": "user", "content": "twin"}]}])");
    QCOMPARE(r.conversationIds.size(), 1);
    QCOMPARE(r.duplicatesSkipped, 1);

    // Once the stored one changes, the file is new again (the cached fingerprint was cleared).
    store.addMessage(stored, hi, QStringLiteral("assistant"), QStringLiteral("Hello again"));
    r = cosmos::ui::importConversationsFromData(store, chat);
    QCOMPARE(r.conversationIds.size(), 1);
    QCOMPARE(r.duplicatesSkipped, 0);
    const qint64 imported = r.conversationIds.first();

    // A deleted conversation does not count: importing brings it back as a new one.
    QVERIFY(store.deleteConversation(imported));
    r = cosmos::ui::importConversationsFromData(store, chat);
    QCOMPARE(r.conversationIds.size(), 1);
    QCOMPARE(r.duplicatesSkipped, 0);

    // Empty conversations compare by title.
    const QByteArray empty = R"({"title": "Ideas", "messages": []})";
    QCOMPARE(cosmos::ui::importConversationsFromData(store, empty).conversationIds.size(), 1);
    QCOMPARE(cosmos::ui::importConversationsFromData(store, empty).duplicatesSkipped, 1);
    QCOMPARE(
        cosmos::ui::importConversationsFromData(store, R"({"title": "Other", "messages": []})").conversationIds.size(),
        1);
    const qint64 ideas = store.conversations().at(1).id;  // "Ideas" (newest first: Other, Ideas)
    QCOMPARE(store.conversation(ideas)->title, QStringLiteral("Ideas"));
    QVERIFY(store.renameConversation(ideas, QStringLiteral("Renamed")));
    QCOMPARE(cosmos::ui::importConversationsFromData(store, empty).conversationIds.size(), 1);

    // The fingerprints are cached in the rows (and stale ones recomputed).
    RawDb raw(dbPath_);
    QCOMPARE(raw.scalar(QStringLiteral("SELECT COUNT(*) FROM conversations WHERE deleted = 0 AND fingerprint IS NULL"))
                 .toInt(),
             0);
    QCOMPARE(raw.scalar(QStringLiteral("SELECT fingerprint FROM conversations WHERE id = %1").arg(stored)).toString(),
             ConversationStore::fingerprint([&] {
               cosmos::ui::NewConversation c;
               for (const StoredMessage& m : store.messages(stored))
                 c.messages.append({m.parentId == hi ? 0 : -1, m.role, m.content, {}, {}, {}});
               return c;
             }()));
  }

  void fingerprint_data() {
    QTest::addColumn<QString>("a");  // role:content@parent,... (parent: an index, - for a root)
    QTest::addColumn<QString>("b");
    QTest::addColumn<bool>("same");
    QTest::newRow("equal") << "user:hi@-,assistant:yo@0"
                           << "user:hi@-,assistant:yo@0" << true;
    QTest::newRow("another content") << "user:hi@-,assistant:yo@0"
                                     << "user:hi@-,assistant:yo!@0" << false;
    QTest::newRow("another role") << "user:hi@-,assistant:yo@0"
                                  << "user:hi@-,tool:yo@0" << false;
    QTest::newRow("another tree") << "user:hi@-,assistant:yo@0"
                                  << "user:hi@-,assistant:yo@-" << false;
    QTest::newRow("siblings swapped") << "user:q@-,assistant:a@0,assistant:b@0"
                                      << "user:q@-,assistant:b@0,assistant:a@0" << false;
    QTest::newRow("listed in another order, same tree") << "user:q@-,assistant:a@0,user:f@1,assistant:b@0"
                                                        << "user:q@-,assistant:a@0,assistant:b@0,user:f@1" << true;
    QTest::newRow("content boundaries") << "user:ab@-,user:c@-"
                                        << "user:a@-,user:bc@-" << false;
  }
  void fingerprint() {
    QFETCH(QString, a);
    QFETCH(QString, b);
    QFETCH(bool, same);
    const auto parse = [](const QString& spec) {
      cosmos::ui::NewConversation c;
      for (const QString& item : spec.split(u',')) {
        const QString role = item.section(u':', 0, 0);
        const QString content = item.section(u':', 1).section(u'@', 0, 0);
        const QString parent = item.section(u'@', 1);
        c.messages.append({parent == u"-" ? -1 : parent.toInt(), role, content, {}, {}, {}});
      }
      return c;
    };
    QCOMPARE(ConversationStore::fingerprint(parse(a)) == ConversationStore::fingerprint(parse(b)), same);
    QCOMPARE(ConversationStore::fingerprint(parse(a)).size(), 64);
  }

  void cliImport() {
    const QString cli = qEnvironmentVariable("COSMOS_CLI");
    if (cli.isEmpty() || !QFileInfo::exists(cli)) QSKIP("set COSMOS_CLI to the cosmos-cli binary to run this check");
    const QString log = dir_.filePath(QStringLiteral("cli.log"));
    const QString file = dir_.filePath(QStringLiteral("ours.json"));
    QFile f(file);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(kOurs);
    f.close();
    const auto run = [&](const QStringList& args, const QByteArray& input = {}) {
      auto p = std::make_unique<QProcess>();
      p->start(cli, QStringList{QStringLiteral("--log-file"), log, QStringLiteral("import"), QStringLiteral("--db"),
                                dbPath_} +
                        args);
      if (!input.isEmpty()) p->write(input);
      p->closeWriteChannel();
      p->waitForFinished(30000);
      return p;
    };
    auto p = run({file});
    QCOMPARE(p->exitCode(), 0);
    const QString out = QString::fromUtf8(p->readAllStandardOutput());
    QVERIFY2(out.contains(QStringLiteral("Robots 🤖 and 机器人 (6 messages)")) &&
                 out.contains(QStringLiteral("Imported 2 conversations")),
             qPrintable(out));

    p = run({file, QStringLiteral("--json")});
    QCOMPARE(p->exitCode(), 0);
    const QJsonObject json = QJsonDocument::fromJson(p->readAllStandardOutput()).object();
    QCOMPARE(json.value(QStringLiteral("imported")).toArray(), QJsonArray());
    QCOMPARE(json.value(QStringLiteral("duplicates_skipped")).toInt(), 2);

    p = run({QStringLiteral("-"), QStringLiteral("--json")}, R"([{"role": "user", "content": "from stdin"}])");
    QCOMPARE(p->exitCode(), 0);
    QCOMPARE(
        QJsonDocument::fromJson(p->readAllStandardOutput()).object().value(QStringLiteral("imported")).toArray().size(),
        1);

    const QStringList before = dumpDatabase(dbPath_);
    p = run({QStringLiteral("-")}, R"([{"role": "robot", "content": "x"}])");
    QCOMPARE(p->exitCode(), 1);
    const QString err = QString::fromUtf8(p->readAllStandardError());
    QVERIFY2(err.contains(QStringLiteral("standard input: $[0].role: unknown role \"robot\"")), qPrintable(err));
    QCOMPARE(dumpDatabase(dbPath_), before);

    p = run({dir_.filePath(QStringLiteral("missing.json"))});
    QCOMPARE(p->exitCode(), 1);
    QVERIFY(QString::fromUtf8(p->readAllStandardError()).contains(QStringLiteral("missing.json")));
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

  std::unique_ptr<QTemporaryDir> tmp_;
  QDir dir_;
  QString dbPath_;
};

QTEST_GUILESS_MAIN(TestConversationImport)
#include "test_conversation_import.moc"
