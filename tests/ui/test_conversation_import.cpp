// Importing conversations: our JSON format (docs/CONVERSATION_JSON.md) field by field and in a
// round trip, duplicates, and cosmos-cli import. The OpenAI-style formats are tested in
// test_conversation_import_openai.cpp; every kind of bad file refused with the database unchanged
// (a full dump before and after) and all-or-nothing inserts in test_conversation_import_errors.cpp.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

#include <algorithm>
#include <memory>

#include "conversation_db_util.h"
#include "conversation_export.h"
#include "conversation_import.h"
#include "conversation_import_fixture.h"
#include "conversation_store.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::ImportResult;
using cosmos::ui::StoredMessage;

namespace {

// moc reads this file and does not know raw strings: those here keep their quotes balanced and
// hold no backslash (else it finds no class and the test does not link).

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

}  // namespace

class TestConversationImport : public QObject, protected ConversationStoreFolder {
  Q_OBJECT

 private slots:
  void init() { makeFolder(); }

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
};

QTEST_GUILESS_MAIN(TestConversationImport)
#include "test_conversation_import.moc"
