#include "chat_view_model.h"

#include <QFileInfo>

#include <spdlog/spdlog.h>

#include <limits>

#include "engine_host.h"
#include "message_blocks_model.h"

namespace cosmos::ui {
namespace {

const QString kUser = QStringLiteral("user");
const QString kAssistant = QStringLiteral("assistant");

QString fromStd(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

// A float setting as the person typed it (0.7f is 0.699999988 as a double).
double rounded(float v) { return QString::number(static_cast<double>(v), 'g', 6).toDouble(); }

}  // namespace

QVariantMap generationMeta(const QString& model, const QString& precision, const cosmos::GenerateOptions& options) {
  const cosmos::SamplingParams& p = options.sampling;
  QVariantMap sampling{{QStringLiteral("temperature"), rounded(p.temperature)},
                       {QStringLiteral("top_k"), p.top_k},
                       {QStringLiteral("top_p"), rounded(p.top_p)},
                       {QStringLiteral("min_p"), rounded(p.min_p)},
                       {QStringLiteral("repetition_penalty"), rounded(p.repetition_penalty)},
                       {QStringLiteral("max_new_tokens"), options.max_new_tokens}};
  // JSON keeps a 64-bit integer exactly; one past qint64 (not made by the settings) as text.
  if (p.seed <= static_cast<std::uint64_t>(std::numeric_limits<qint64>::max()))
    sampling.insert(QStringLiteral("seed"), static_cast<qint64>(p.seed));
  else
    sampling.insert(QStringLiteral("seed"), QString::number(p.seed));
  QVariantMap meta{{QStringLiteral("sampling"), sampling}};
  if (!model.isEmpty()) meta.insert(QStringLiteral("model"), model);
  if (!precision.isEmpty()) meta.insert(QStringLiteral("precision"), precision);
  return meta;
}

ChatViewModel::ChatViewModel(EngineHost* engine, ConversationStore* store, QObject* parent)
    : QAbstractListModel(parent), engine_(engine), store_(store) {
  saveTimer_.setInterval(kSaveIntervalMs);
  connect(&saveTimer_, &QTimer::timeout, this, [this] {
    if (stream_ && stream_->dirty) saveStream(true);
  });
  if (engine_) {
    connect(engine_, &EngineHost::stateChanged, this, &ChatViewModel::notifyCanSend);
    connect(engine_, &EngineHost::piecesReady, this, &ChatViewModel::onPieces);
    connect(engine_, &EngineHost::generationFinished, this, &ChatViewModel::onFinished);
    connect(engine_, &EngineHost::generationFailed, this, &ChatViewModel::onFailed);
  }
  if (store_) {
    connect(store_, &ConversationStore::conversationsChanged, this, [this] {
      // The open conversation was deleted (from the sidebar): show an empty one.
      if (conversationId_ > 0 && !busy() && store_->isDeleted(conversationId_)) newConversation();
    });
  }
}

ChatViewModel::~ChatViewModel() {
  // A reply still streaming keeps what arrived.
  if (stream_ && stream_->dirty) saveStream(false);
}

int ChatViewModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

QVariant ChatViewModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  switch (role) {
    case MessageIdRole: return r.id;
    case RoleRole: return r.role;
    case Qt::DisplayRole:
    case ContentRole: return r.content;
    case ReasoningRole: return r.reasoning;
    case ThinkingRole: return r.thinking;
    case StreamingRole: return r.streaming;
    case ThoughtSecondsRole: return r.thoughtSeconds;
    case StatsRole: return r.stats;
    case BlocksRole: return QVariant::fromValue(static_cast<QObject*>(r.blocks));
    case SiblingIndexRole: return r.siblingIndex;
    case SiblingCountRole: return r.siblingCount;
    default: return {};
  }
}

QHash<int, QByteArray> ChatViewModel::roleNames() const {
  return {{MessageIdRole, "messageId"}, {RoleRole, "role"},         {ContentRole, "content"},
          {ReasoningRole, "reasoning"}, {ThinkingRole, "thinking"}, {StreamingRole, "streaming"},
          {ThoughtSecondsRole, "thoughtSeconds"}, {StatsRole, "stats"}, {BlocksRole, "blocks"},
          {SiblingIndexRole, "siblingIndex"}, {SiblingCountRole, "siblingCount"}};
}

QString ChatViewModel::blockedReason() const {
  if (busy()) return QStringLiteral("Generating…");
  if (!engine_) return QStringLiteral("Load a model first");
  switch (engine_->state()) {
    case EngineHost::Ready: break;
    case EngineHost::Generating: return QStringLiteral("Generating…");
    case EngineHost::Loading: return QStringLiteral("Loading the model…");
    case EngineHost::NoModel:
    case EngineHost::Failed: return QStringLiteral("Load a model first");
  }
  if (!store_ || !store_->isOpen()) return QStringLiteral("The conversation database is not open");
  return {};
}

void ChatViewModel::notifyCanSend() { emit canSendChanged(); }

void ChatViewModel::setErrorText(const QString& text) {
  if (errorText_ == text) return;
  errorText_ = text;
  emit errorTextChanged();
}

void ChatViewModel::clearError() { setErrorText({}); }

void ChatViewModel::setConversationId(qint64 id) {
  if (conversationId_ == id) return;
  conversationId_ = id;
  emit conversationIdChanged();
}

ChatViewModel::Row ChatViewModel::makeRow(const StoredMessage& message) {
  Row r;
  r.id = message.id;
  r.parentId = message.parentId;
  r.role = message.role;
  r.content = message.content;
  r.reasoning = message.reasoning;
  r.meta = message.meta;
  r.stats = message.meta.value(QStringLiteral("stats")).toMap();
  // Still marked streaming when read back: the app stopped (crash, kill) while this reply was being
  // written; it holds the text up to the last save. Shown as "interrupted".
  if (message.meta.value(QStringLiteral("streaming")).toBool() && !r.stats.contains(QStringLiteral("stop_reason")))
    r.stats.insert(QStringLiteral("stop_reason"), QStringLiteral("interrupted"));
  r.thoughtSeconds = message.meta.value(QStringLiteral("thoughtSeconds")).toDouble();
  r.blocks = new MessageBlocksModel(this);
  r.blocks->setText(r.content);
  return r;
}

void ChatViewModel::appendRow(Row row) {
  const int n = static_cast<int>(rows_.size());
  beginInsertRows({}, n, n);
  rows_.push_back(std::move(row));
  endInsertRows();
}

void ChatViewModel::removeRowsFrom(int row) {
  const int n = static_cast<int>(rows_.size());
  if (row >= n) return;
  beginRemoveRows({}, row, n - 1);
  for (int i = row; i < n; ++i) rows_[static_cast<std::size_t>(i)].blocks->deleteLater();  // QML may hold it
  rows_.resize(static_cast<std::size_t>(row));
  endRemoveRows();
}

void ChatViewModel::newConversation() { openConversation(0); }

void ChatViewModel::stop() {
  if (engine_ && busy()) engine_->stop();
}

bool ChatViewModel::send(const QString& text) {
  if (text.trimmed().isEmpty() || !canSend()) return false;
  setErrorText({});
  if (conversationId_ <= 0) {
    const qint64 id = store_->createConversation();
    if (id < 0) {
      setErrorText(store_->lastError());
      return false;
    }
    setConversationId(id);
  }
  const qint64 parent = rows_.empty() ? 0 : rows_.back().id;
  const qint64 userId = store_->addMessage(conversationId_, parent, kUser, text);
  if (userId < 0) {
    setErrorText(store_->lastError());
    return false;
  }
  StoredMessage m;
  m.id = userId;
  m.conversationId = conversationId_;
  m.parentId = parent;
  m.role = kUser;
  m.content = text;
  Row row = makeRow(m);
  setSiblingsFromStore(row);
  appendRow(std::move(row));
  return startReply(userId);
}

bool ChatViewModel::regenerate() {
  if (!canSend()) return false;
  int user = static_cast<int>(rows_.size()) - 1;
  while (user >= 0 && rows_[static_cast<std::size_t>(user)].role != kUser) --user;
  if (user < 0) return false;
  setErrorText({});
  removeRowsFrom(user + 1);
  return startReply(rows_[static_cast<std::size_t>(user)].id);
}

bool ChatViewModel::editAndResend(int row, const QString& text) {
  if (row < 0 || row >= rowCount() || text.trimmed().isEmpty() || !canSend()) return false;
  const Row& old = rows_[static_cast<std::size_t>(row)];
  if (old.role != kUser) return false;
  setErrorText({});
  const qint64 parent = old.parentId;
  const qint64 userId = store_->addMessage(conversationId_, parent, kUser, text);
  if (userId < 0) {
    setErrorText(store_->lastError());
    return false;
  }
  removeRowsFrom(row);
  StoredMessage m;
  m.id = userId;
  m.conversationId = conversationId_;
  m.parentId = parent;
  m.role = kUser;
  m.content = text;
  Row edited = makeRow(m);
  setSiblingsFromStore(edited);  // the new version is the last of its siblings
  appendRow(std::move(edited));
  return startReply(userId);
}

std::vector<cosmos::ChatMessage> ChatViewModel::promptMessages(const QString& systemPrompt) const {
  std::vector<cosmos::ChatMessage> out;
  const bool branchHasSystem = !rows_.empty() && rows_.front().role == QStringLiteral("system");
  if (!systemPrompt.trimmed().isEmpty() && !branchHasSystem)
    out.push_back(cosmos::ChatMessage::text("system", systemPrompt.toStdString()));
  for (const Row& r : rows_) {
    if (r.streaming) continue;  // the reply being asked for
    // The assistant's reply as the model wrote it (think/answer tags included): the session's
    // cache then already holds these tokens and only the new message is prefilled.
    const QString raw = r.meta.value(QStringLiteral("raw")).toString();
    const QString& text = r.role == kAssistant && !raw.isEmpty() ? raw : r.content;
    out.push_back(cosmos::ChatMessage::text(r.role.toStdString(), text.toStdString()));
  }
  return out;
}

bool ChatViewModel::startReply(qint64 userMessageId) {
  const ChatSettings settings = settings_ ? settings_() : ChatSettings{};
  const QVariantMap generation =
      engine_ ? generationMeta(QFileInfo(engine_->modelDir()).fileName(), engine_->precision(), settings.options)
              : generationMeta({}, {}, settings.options);
  QVariantMap meta = generation;
  meta.insert(QStringLiteral("streaming"), true);
  const qint64 replyId = store_->addMessage(conversationId_, userMessageId, kAssistant, {}, {}, meta);
  if (replyId < 0) {
    setErrorText(store_->lastError());
    return false;
  }
  StoredMessage m;
  m.id = replyId;
  m.conversationId = conversationId_;
  m.parentId = userMessageId;
  m.role = kAssistant;
  m.meta = meta;
  Row row = makeRow(m);
  row.streaming = true;
  row.stats.clear();  // this reply is the one streaming now, not an interrupted one
  setSiblingsFromStore(row);  // a regenerated reply is the last of its siblings
  appendRow(std::move(row));

  const qint64 requestId = engine_ ? engine_->generate(promptMessages(settings.systemPrompt), settings.options) : -1;
  if (requestId < 0) {
    Row& r = rows_.back();
    r.streaming = false;
    const QModelIndex i = index(rowCount() - 1);
    emit dataChanged(i, i, {StreamingRole});
    const QString error = QStringLiteral("No model is ready to reply.");
    QVariantMap failed = generation;
    failed.insert(QStringLiteral("error"), error);
    r.meta = failed;
    store_->updateMessage(replyId, {}, {}, failed);
    setErrorText(error);
    return false;
  }
  stream_.emplace();
  stream_->requestId = requestId;
  stream_->messageId = replyId;
  stream_->generation = generation;
  stream_->clock.start();
  saveTimer_.start();
  emit busyChanged();
  emit canSendChanged();
  return true;
}

int ChatViewModel::streamRow() const {
  if (!stream_) return -1;
  for (int i = static_cast<int>(rows_.size()) - 1; i >= 0; --i)
    if (rows_[static_cast<std::size_t>(i)].id == stream_->messageId) return i;
  return -1;
}

void ChatViewModel::applyDelta(const cosmos::ReasoningDelta& delta) {
  Stream& s = *stream_;
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

  const int r = streamRow();
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

void ChatViewModel::onPieces(qint64 requestId, const QString& text) {
  if (!stream_ || stream_->requestId != requestId) return;
  if (stream_->firstTextMs < 0 && !text.isEmpty()) stream_->firstTextMs = stream_->clock.elapsed();
  stream_->raw += text;
  applyDelta(stream_->parser.push(text.toStdString()));
}

void ChatViewModel::onFinished(qint64 requestId, const QVariantMap& stats) {
  if (!stream_ || stream_->requestId != requestId) return;
  endStream(stats, {});
}

void ChatViewModel::onFailed(qint64 requestId, const QString& message) {
  if (!stream_ || stream_->requestId != requestId) return;
  endStream({}, message);
  setErrorText(message);
}

void ChatViewModel::endStream(const QVariantMap& stats, const QString& error) {
  applyDelta(stream_->parser.finish());
  saveStream(false, stats, error);
  const int r = streamRow();
  if (r >= 0) {
    Row& row = rows_[static_cast<std::size_t>(r)];
    row.streaming = false;
    row.thinking = false;
    row.stats = stats;
    row.meta = streamMeta(false, stats, error);
    const QModelIndex i = index(r);
    emit dataChanged(i, i, {ThinkingRole, StreamingRole, StatsRole});
  }
  saveTimer_.stop();
  stream_.reset();
  emit busyChanged();
  emit canSendChanged();
}

QVariantMap ChatViewModel::streamMeta(bool streaming, const QVariantMap& stats, const QString& error) const {
  QVariantMap meta = stream_->generation;
  meta.insert(QStringLiteral("raw"), stream_->raw);
  if (stream_->thinkStartMs >= 0) meta.insert(QStringLiteral("thoughtSeconds"), stream_->thoughtSeconds);
  if (streaming) meta.insert(QStringLiteral("streaming"), true);
  if (!stats.isEmpty()) {
    meta.insert(QStringLiteral("stats"), stats);
    if (stats.value(QStringLiteral("stop_reason")).toString() == QStringLiteral("cancelled"))
      meta.insert(QStringLiteral("stopped"), true);
  }
  if (!error.isEmpty()) meta.insert(QStringLiteral("error"), error);
  return meta;
}

void ChatViewModel::saveStream(bool streaming, const QVariantMap& stats, const QString& error) {
  if (!store_ || !stream_) return;
  if (!store_->updateMessage(stream_->messageId, stream_->content, stream_->reasoning,
                             streamMeta(streaming, stats, error))) {
    spdlog::warn("app: saving the reply failed: {}", store_->lastError().toStdString());
    setErrorText(store_->lastError());
    return;
  }
  stream_->dirty = false;
  emit messageSaved(stream_->messageId);
}

}  // namespace cosmos::ui
