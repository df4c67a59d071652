// ChatViewModel, part 3: the replies being generated (one reply, or several answers at once):
// starting them, their text as it streams, their end, and saving them. The rest is in
// chat_view_model.cpp and chat_view_model_branches.cpp.
#include <QFileInfo>

#include <spdlog/spdlog.h>

#include "chat_engine.h"
#include "chat_view_model.h"
#include "engine_host.h"
#include "message_blocks_model.h"

namespace cosmos::ui {
namespace {

const QString kAssistant = QStringLiteral("assistant");

QString fromStd(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

}  // namespace

// Stores `answers` empty assistant messages under the user message (siblings, oldest first), shows
// the first, and asks the engine for them: generate() for one, generateMany() for several.
bool ChatViewModel::startReply(qint64 userMessageId, int answers) {
  const ChatSettings settings = settings_ ? settings_() : ChatSettings{};
  const QString model = engine_ ? QFileInfo(engine_->modelDir()).fileName() : QString();
  const QString precision = engine_ ? engine_->precision() : QString();
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < answers; ++i) {
    const cosmos::GenerateOptions options = answers > 1 ? optionsForAnswer(settings.options, i) : settings.options;
    auto s = std::make_unique<Stream>();
    s->answer = i;
    s->generation = generationMeta(model, precision, options);
    QVariantMap meta = s->generation;
    meta.insert(QStringLiteral("streaming"), true);
    s->messageId = store_->addMessage(conversationId_, userMessageId, kAssistant, {}, {}, meta);
    if (s->messageId < 0) {
      const QString error = store_->lastError();
      for (auto& made : streams) {  // the answers stored already say why they stay empty
        QVariantMap failed = made->generation;
        failed.insert(QStringLiteral("error"), error);
        store_->updateMessage(made->messageId, {}, {}, failed);
      }
      setErrorText(error);
      return false;
    }
    streams.push_back(std::move(s));
  }
  StoredMessage m;
  m.id = streams.front()->messageId;
  m.conversationId = conversationId_;
  m.parentId = userMessageId;
  m.role = kAssistant;
  m.meta = streams.front()->generation;
  Row row = makeRow(m);
  row.streaming = true;
  setSiblingsFromStore(row);  // the new replies are the last of their siblings
  appendRow(std::move(row));

  std::vector<cosmos::ChatMessage> prompt = promptMessages(settings.systemPrompt);
  qint64 requestId = -1;
  if (engine_)
    requestId = answers > 1 ? engine_->generateMany(std::move(prompt), settings.options, answers)
                            : engine_->generate(std::move(prompt), settings.options);
  if (requestId < 0) {
    const QString error = QStringLiteral("No model is ready to reply.");
    Row& r = rows_.back();
    r.streaming = false;
    r.error = error;
    for (auto& s : streams) {
      QVariantMap failed = s->generation;
      failed.insert(QStringLiteral("error"), error);
      if (s->messageId == r.id) r.meta = failed;
      store_->updateMessage(s->messageId, {}, {}, failed);
    }
    const QModelIndex i = index(rowCount() - 1);
    emit dataChanged(i, i, {StreamingRole, ErrorRole});
    setErrorText(error);
    return false;
  }
  for (auto& s : streams) s->clock.start();
  streams_ = std::move(streams);
  requestId_ = requestId;
  manyAnswers_ = answers > 1;
  saveTimer_.start();
  emit busyChanged();
  emit canSendChanged();
  return true;
}

ChatViewModel::Stream* ChatViewModel::streamOf(qint64 requestId, int answer) {
  if (requestId != requestId_ || answer < 0 || answer >= static_cast<int>(streams_.size())) return nullptr;
  Stream* s = streams_[static_cast<std::size_t>(answer)].get();
  return s->ended ? nullptr : s;
}

int ChatViewModel::streamRow(const Stream& s) const {
  for (int i = static_cast<int>(rows_.size()) - 1; i >= 0; --i)
    if (rows_[static_cast<std::size_t>(i)].id == s.messageId) return i;
  return -1;
}

void ChatViewModel::applyDelta(Stream& s, const cosmos::ReasoningDelta& delta) {
  const qint64 nowMs = s.clock.elapsed();
  // A bare </think> (answer_reset) turns the text so far into reasoning: it began with the reply.
  if (!delta.reasoning.empty() && s.thinkStartMs < 0)
    s.thinkStartMs = delta.answer_reset && s.firstTextMs >= 0 ? s.firstTextMs : nowMs;
  if (delta.answer_reset) s.content.clear();
  const QString answer = fromStd(delta.answer);
  s.reasoning += fromStd(delta.reasoning);
  s.content += answer;
  if (s.thinkStartMs >= 0 && !s.thinkClosed) {
    s.thoughtSeconds = static_cast<double>(nowMs - s.thinkStartMs) / 1000.0;
    s.thinkClosed = s.parser.reasoning_closed();
  }
  s.dirty = true;

  const int r = streamRow(s);
  if (r < 0) return;
  Row& row = rows_[static_cast<std::size_t>(r)];
  row.content = s.content;
  row.reasoning = s.reasoning;
  row.thinking = s.parser.in_reasoning();
  row.thoughtSeconds = s.thoughtSeconds;
  if (delta.answer_reset)
    row.blocks->setText(row.content);
  else
    row.blocks->append(answer);
  const QModelIndex i = index(r);
  emit dataChanged(i, i, {ContentRole, ReasoningRole, ThinkingRole, ThoughtSecondsRole});
}

void ChatViewModel::appendText(Stream& s, const QString& text) {
  if (s.firstTextMs < 0 && !text.isEmpty()) s.firstTextMs = s.clock.elapsed();
  s.raw += text;
  applyDelta(s, s.parser.push(text.toStdString()));
}

// The engine starts the answer over (it needed the answer's memory for the others): what it wrote
// so far is void.
void ChatViewModel::restartStream(Stream& s) {
  s.parser.reset();
  s.raw.clear();
  s.content.clear();
  s.reasoning.clear();
  s.firstTextMs = s.thinkStartMs = -1;
  s.thinkClosed = false;
  s.thoughtSeconds = 0;
  s.dirty = true;
  const int r = streamRow(s);
  if (r < 0) return;
  Row& row = rows_[static_cast<std::size_t>(r)];
  row.content.clear();
  row.reasoning.clear();
  row.thinking = false;
  row.thoughtSeconds = 0;
  row.blocks->setText({});
  const QModelIndex i = index(r);
  emit dataChanged(i, i, {ContentRole, ReasoningRole, ThinkingRole, ThoughtSecondsRole});
}

void ChatViewModel::onPieces(qint64 requestId, const QString& text) {
  if (manyAnswers_) return;
  if (Stream* s = streamOf(requestId, 0)) appendText(*s, text);
}

void ChatViewModel::onAnswerPieces(qint64 requestId, int answer, const QString& text) {
  if (!manyAnswers_) return;
  if (Stream* s = streamOf(requestId, answer)) appendText(*s, text);
}

void ChatViewModel::onAnswerRestarted(qint64 requestId, int answer) {
  if (!manyAnswers_) return;
  if (Stream* s = streamOf(requestId, answer)) restartStream(*s);
}

void ChatViewModel::onAnswerFinished(qint64 requestId, int answer, const QVariantMap& stats) {
  if (!manyAnswers_) return;
  if (Stream* s = streamOf(requestId, answer)) endStream(*s, stats, {});
}

void ChatViewModel::onAnswerFailed(qint64 requestId, int answer, const QString& message) {
  if (!manyAnswers_) return;
  Stream* s = streamOf(requestId, answer);
  if (!s) return;
  endStream(*s, {}, message);
  setErrorText(QStringLiteral("Answer %1 of %2 failed: %3").arg(answer + 1).arg(streams_.size()).arg(message));
}

void ChatViewModel::onFinished(qint64 requestId, const QVariantMap& stats) {
  if (requestId != requestId_) return;
  if (!manyAnswers_) {
    if (Stream* s = streamOf(requestId, 0)) endStream(*s, stats, {});
  } else {
    // Every answer was ended by its own signal; one that was not is kept as stopped.
    QVariantMap stopped;
    stopped.insert(QStringLiteral("stop_reason"), QStringLiteral("cancelled"));
    for (auto& s : streams_)
      if (!s->ended) endStream(*s, stopped, {});
  }
  endRequest();
}

void ChatViewModel::onFailed(qint64 requestId, const QString& message) {
  if (requestId != requestId_) return;
  for (auto& s : streams_)
    if (!s->ended) endStream(*s, {}, message);
  endRequest();
  setErrorText(message);
}

void ChatViewModel::endStream(Stream& s, const QVariantMap& stats, const QString& error) {
  applyDelta(s, s.parser.finish());
  saveStream(s, false, stats, error);
  s.ended = true;
  const int r = streamRow(s);
  if (r < 0) return;
  Row& row = rows_[static_cast<std::size_t>(r)];
  row.streaming = false;
  row.thinking = false;
  row.stats = stats;
  row.error = error;
  row.meta = streamMeta(s, false, stats, error);
  const QModelIndex i = index(r);
  emit dataChanged(i, i, {ThinkingRole, StreamingRole, StatsRole, ErrorRole});
}

void ChatViewModel::endRequest() {
  saveTimer_.stop();
  streams_.clear();
  requestId_ = -1;
  manyAnswers_ = false;
  emit busyChanged();
  emit canSendChanged();
}

QVariantMap ChatViewModel::streamMeta(const Stream& s, bool streaming, const QVariantMap& stats,
                                      const QString& error) const {
  QVariantMap meta = s.generation;
  meta.insert(QStringLiteral("raw"), s.raw);
  if (s.thinkStartMs >= 0) meta.insert(QStringLiteral("thoughtSeconds"), s.thoughtSeconds);
  if (streaming) meta.insert(QStringLiteral("streaming"), true);
  if (!stats.isEmpty()) {
    meta.insert(QStringLiteral("stats"), stats);
    if (stats.value(QStringLiteral("stop_reason")).toString() == QStringLiteral("cancelled"))
      meta.insert(QStringLiteral("stopped"), true);
  }
  if (!error.isEmpty()) meta.insert(QStringLiteral("error"), error);
  return meta;
}

void ChatViewModel::saveStream(Stream& s, bool streaming, const QVariantMap& stats, const QString& error) {
  if (!store_) return;
  if (!store_->updateMessage(s.messageId, s.content, s.reasoning, streamMeta(s, streaming, stats, error))) {
    spdlog::warn("app: saving the reply failed: {}", store_->lastError().toStdString());
    setErrorText(store_->lastError());
    return;
  }
  s.dirty = false;
  emit messageSaved(s.messageId);
}

}  // namespace cosmos::ui
