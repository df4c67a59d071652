// RealChatEngine::generateMany ("Generate N answers") on the CPU backend with the tiny test model
// (random weights, the real tokenizer): the n answers (seed + i each) differ from each other, and
// answer i equals a single generate() with seed + i (BatchScheduler gives each request the tokens
// of running it alone); the streamed pieces add up to each answer and every answer is reported
// finished once; the session's cache survives the batch (its next turn reuses the prompt), or is
// dropped cleanly when the answers need its memory (the next turn prefills everything and is still
// right); stop cancels every answer, each keeping its text; generate() works afterwards. And once
// end to end: ChatViewModel::sendForAnswers through EngineHost's worker thread into the store.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <map>

#include "chat_engine.h"
#include "chat_view_model.h"
#include "conversation_store.h"
#include "cosmos/test_model.h"
#include "engine_host.h"

using cosmos::ui::AnswerCallbacks;
using cosmos::ui::ChatEngine;
using cosmos::ui::EngineLoadRequest;

namespace {

cosmos::GenerateOptions sampling(int maxTokens) {
  cosmos::GenerateOptions o;
  o.sampling.temperature = 1.0f;
  o.sampling.top_p = 0.95f;
  o.sampling.seed = 4242;
  o.max_new_tokens = maxTokens;
  o.stop_tokens = {-1};  // no stop token: every answer runs its full length
  return o;
}

std::vector<cosmos::ChatMessage> conversation(int words) {
  QStringList text;
  for (int i = 0; i < words; ++i) text << QStringLiteral("word%1").arg(i);
  return {cosmos::ChatMessage::text("system", cosmos::kDefaultSystemText),
          cosmos::ChatMessage::text("user", text.join(QLatin1Char(' ')).toStdString())};
}

// What the callbacks saw, per answer.
struct Seen {
  std::map<int, std::string> text;  // since the last restart
  std::map<int, int> finished, restarts;
  int steps = 0;
};

AnswerCallbacks watch(Seen& seen, long long stopAfter = -1) {
  AnswerCallbacks c;
  c.piece = [&seen](int a, std::string_view piece) { seen.text[a] += piece; };
  c.restarted = [&seen](int a) {
    seen.text[a].clear();
    ++seen.restarts[a];
  };
  c.finished = [&seen](int a, const cosmos::Result<cosmos::GenerationResult>&) { ++seen.finished[a]; };
  c.step = [&seen, stopAfter](long long generated) {
    ++seen.steps;
    return stopAfter < 0 || generated < stopAfter;
  };
  return c;
}

}  // namespace

class TestRealChatEngineAnswers : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString modelDir_;

  std::unique_ptr<ChatEngine> loaded(int contextTokens) {
    auto engine = cosmos::ui::makeRealChatEngine();
    EngineLoadRequest r;
    r.modelDir = modelDir_;
    r.device = QStringLiteral("cpu");
    r.contextTokens = contextTokens;
    auto info = engine->load(r, {});
    if (!info) {
      qWarning("load failed: %s", info.error().message.c_str());
      return nullptr;
    }
    return engine;
  }

 private slots:
  void initTestCase() {
    const std::filesystem::path tokenizer = COSMOS_TEST_TOKENIZER;
    if (!std::filesystem::exists(tokenizer)) QSKIP("no test tokenizer (run packaging/setup.sh)");
    modelDir_ = dir_.filePath(QStringLiteral("tiny"));
    cosmos::TestModelOptions o;
    o.preset = "tiny";
    o.seed = 1;
    o.shards = 1;
    o.tokenizer_json = tokenizer;
    o.out_dir = modelDir_.toStdString();
    const auto made = cosmos::make_test_model(o);
    QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());
  }

  void answersEqualSingleRuns_data() {
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("context");     // KV-cache tokens (blocks of 16)
    QTest::addColumn<int>("words");       // the user message's length
    QTest::addColumn<bool>("cacheKept");  // the session's cache survives the batch
    QTest::newRow("3 answers, the session's cache kept") << 3 << 1024 << 8 << true;
    QTest::newRow("4 answers, the cache needed for them") << 4 << 256 << 40 << false;
  }
  void answersEqualSingleRuns() {
    QFETCH(int, n);
    QFETCH(int, context);
    QFETCH(int, words);
    QFETCH(bool, cacheKept);
    auto engine = loaded(context);
    QVERIFY(engine);
    const auto messages = conversation(words);
    const cosmos::GenerateOptions options = sampling(12);

    // A turn first: the session's cache holds the prompt and its reply.
    auto before = engine->generate(messages, cosmos::ui::optionsForAnswer(options, 100), {});
    QVERIFY2(before.ok(), before.ok() ? "" : before.error().message.c_str());
    const int promptTokens = before->stats.prompt_tokens;
    QVERIFY(engine->contextUsed() >= promptTokens);

    Seen seen;
    const auto answers = engine->generateMany(messages, options, n, watch(seen));
    QCOMPARE(static_cast<int>(answers.size()), n);
    QVERIFY(seen.steps >= 12);
    for (int i = 0; i < n; ++i) {
      QVERIFY2(answers[i].ok(), answers[i].ok() ? "" : answers[i].error().message.c_str());
      QCOMPARE(answers[i]->stats.generated_tokens, 12);
      QCOMPARE(answers[i]->stats.prompt_tokens, promptTokens);
      QCOMPARE(seen.finished[i], 1);
      QCOMPARE(seen.text[i], answers[i]->text);  // the pieces since its last restart add up to it
      for (int j = 0; j < i; ++j) QVERIFY2(answers[i]->token_ids != answers[j]->token_ids, "two answers are the same");
    }
    if (cacheKept) {
      QCOMPARE(engine->contextUsed(), static_cast<int>(before->stats.prompt_tokens + before->token_ids.size()) - 1);
    } else {
      QCOMPARE(engine->contextUsed(), 0);  // dropped for the answers
    }

    // Each answer alone, through the session, with its seed: the same tokens.
    for (int i = 0; i < n; ++i) {
      auto alone = engine->generate(messages, cosmos::ui::optionsForAnswer(options, i), {});
      QVERIFY2(alone.ok(), alone.ok() ? "" : alone.error().message.c_str());
      QCOMPARE(alone->token_ids, answers[i]->token_ids);
      QCOMPARE(alone->text, answers[i]->text);
      if (i == 0) QCOMPARE(alone->stats.reused_tokens, cacheKept ? promptTokens - 1 : 0);
    }
    // And the turn from before, once more: the session is fine.
    auto again = engine->generate(messages, cosmos::ui::optionsForAnswer(options, 100), {});
    QVERIFY(again.ok());
    QCOMPARE(again->token_ids, before->token_ids);
  }

  // The step callback says stop after a few tokens: every answer ends cancelled with its text so far.
  void stopCancelsEveryAnswer() {
    auto engine = loaded(1024);
    QVERIFY(engine);
    const auto messages = conversation(6);
    const cosmos::GenerateOptions options = sampling(64);
    Seen seen;
    const auto answers = engine->generateMany(messages, options, 3, watch(seen, 9));
    QCOMPARE(answers.size(), std::size_t(3));
    int generated = 0;
    for (int i = 0; i < 3; ++i) {
      QVERIFY(answers[i].ok());
      QCOMPARE(answers[i]->stats.stop, cosmos::StopReason::cancelled);
      QVERIFY(answers[i]->stats.generated_tokens > 0 && answers[i]->stats.generated_tokens < 64);
      QCOMPARE(seen.text[i], answers[i]->text);
      QCOMPARE(seen.finished[i], 1);
      generated += answers[i]->stats.generated_tokens;
    }
    QVERIFY(generated >= 9 && generated < 3 * 64);
    auto after = engine->generate(messages, options, {});
    QVERIFY(after.ok());
    QCOMPARE(after->stats.generated_tokens, 64);
  }

  // The app's path: three answers to a new message, streamed through the worker thread into three
  // stored sibling replies (different, each with its seed), then a normal reply to a follow-up.
  void viewModelEndToEnd() {
    cosmos::ui::ConversationStore store;
    QVERIFY2(store.open(dir_.filePath(QStringLiteral("chat.sqlite"))), qPrintable(store.lastError()));
    cosmos::ui::EngineHost host(cosmos::ui::makeRealChatEngine());
    cosmos::ui::ChatViewModel vm(&host, &store);
    vm.setSettingsProvider([] {
      cosmos::ui::ChatSettings s;
      s.options = sampling(10);
      s.options.sampling.seed = 9;
      return s;
    });
    QSignalSpy states(&host, &cosmos::ui::EngineHost::stateChanged);
    host.loadModel(modelDir_, QStringLiteral("cpu"), QStringLiteral("bf16"), 1024);
    while (host.state() != cosmos::ui::EngineHost::Ready && host.state() != cosmos::ui::EngineHost::Failed &&
           states.wait(60000)) {
    }
    QVERIFY2(host.state() == cosmos::ui::EngineHost::Ready, qPrintable(host.errorText()));
    QVERIFY(vm.canGenerateAnswers());

    QSignalSpy busy(&vm, &cosmos::ui::ChatViewModel::busyChanged);
    QVERIFY(vm.sendForAnswers(QStringLiteral("Describe the scene."), 3));
    while (vm.busy() && busy.wait(120000)) {
    }
    QVERIFY(!vm.busy());
    QVERIFY2(vm.errorText().isEmpty(), qPrintable(vm.errorText()));
    const qint64 ask = vm.data(vm.index(0), cosmos::ui::ChatViewModel::MessageIdRole).toLongLong();
    const QList<cosmos::ui::StoredMessage> replies = store.children(ask, vm.conversationId());
    QCOMPARE(replies.size(), 3);
    QStringList raws;
    for (int i = 0; i < 3; ++i) {
      const QVariantMap meta = replies[i].meta;
      QCOMPARE(meta.value(QStringLiteral("sampling")).toMap().value(QStringLiteral("seed")).toLongLong(), 9 + i);
      QCOMPARE(meta.value(QStringLiteral("stats")).toMap().value(QStringLiteral("generated_tokens")).toInt(), 10);
      QVERIFY(!meta.contains(QStringLiteral("streaming")));
      const QString raw = meta.value(QStringLiteral("raw")).toString();
      QVERIFY(!raw.isEmpty());
      QVERIFY2(!raws.contains(raw), "two answers are the same");
      raws << raw;
    }
    QCOMPARE(vm.data(vm.index(1), cosmos::ui::ChatViewModel::MessageIdRole).toLongLong(), replies[0].id);

    QVERIFY(vm.send(QStringLiteral("And then?")));
    while (vm.busy() && busy.wait(120000)) {
    }
    QVERIFY2(vm.errorText().isEmpty(), qPrintable(vm.errorText()));
    QCOMPARE(vm.rowCount(), 4);
    const auto last = store.message(vm.data(vm.index(3), cosmos::ui::ChatViewModel::MessageIdRole).toLongLong());
    QVERIFY(last.has_value());
    QCOMPARE(last->meta.value(QStringLiteral("stats")).toMap().value(QStringLiteral("generated_tokens")).toInt(), 10);
  }

  void withoutAModelEveryAnswerFails() {
    auto engine = cosmos::ui::makeRealChatEngine();
    Seen seen;
    const auto answers = engine->generateMany(conversation(2), sampling(4), 2, watch(seen));
    QCOMPARE(answers.size(), std::size_t(2));
    for (int i = 0; i < 2; ++i) {
      QVERIFY(!answers[i].ok());
      QCOMPARE(seen.finished[i], 1);
    }
  }
};

QTEST_GUILESS_MAIN(TestRealChatEngineAnswers)
#include "test_real_chat_engine_answers.moc"
