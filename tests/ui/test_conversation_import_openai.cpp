// Importing conversations in the OpenAI-style formats ({"title", "messages"}, a bare messages array,
// an array of such objects): roles, text parts, inline reasoning split, the extra fields kept.
#include <QtTest>

#include "conversation_import.h"
#include "conversation_import_fixture.h"
#include "conversation_store.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::ImportResult;
using cosmos::ui::StoredMessage;

namespace {

// moc reads this file and does not know raw strings: those here keep their quotes balanced and
// hold no backslash (else it finds no class and the test does not link).

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

class TestConversationImportOpenAi : public QObject, protected ConversationStoreFolder {
  Q_OBJECT

 private slots:
  void init() { makeFolder(); }

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
};

QTEST_GUILESS_MAIN(TestConversationImportOpenAi)
#include "test_conversation_import_openai.moc"
