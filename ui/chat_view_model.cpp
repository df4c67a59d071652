#include "chat_view_model.h"

#include <spdlog/spdlog.h>

#include "engine_host.h"
#include "message_blocks_model.h"

namespace cosmos::ui {
namespace {

const QString kUser = QStringLiteral("user");
const QString kAssistant = QStringLiteral("assistant");

QString fromStd(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

}  // namespace

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
    default: return {};
  }
}

QHash<int, QByteArray> ChatViewModel::roleNames() const {
  return {{MessageIdRole, "messageId"}, {RoleRole, "role"},         {ContentRole, "content"},
          {ReasoningRole, "reasoning"}, {ThinkingRole, "thinking"}, {StreamingRole, "streaming"},
          {ThoughtSecondsRole, "thoughtSeconds"}, {StatsRole, "stats"}, {BlocksRole, "blocks"}};
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

void ChatViewModel::loadBranch(qint64 conversationId) {
  beginResetModel();
  for (Row& r : rows_) r.blocks->deleteLater();
  rows_.clear();
  if (store_ && conversationId > 0) {
    const qint64 leaf = store_->latestLeaf(conversationId);
    if (leaf > 0) {
      for (const StoredMessage& m : store_->path(leaf)) {
        Row r = makeRow(m);
        if (stream_ && stream_->messageId == r.id) {  // its reply is still arriving
          r.content = stream_->content;
          r.reasoning = stream_->reasoning;
          r.streaming = true;
          r.blocks->setText(r.content);
        }
        rows_.push_back(std::move(r));
      }
    }
  }
  endResetModel();
}

bool ChatViewModel::openConversation(qint64 id) {
  if (!store_) return false;
  if (id > 0 && (!store_->conversation(id) || store_->isDeleted(id))) {
    setErrorText(QStringLiteral("That conversation no longer exists."));
    return false;
  }
  if (busy() && id != conversationId_) stop();  // the reply keeps being saved to its message
  setConversationId(id);
  loadBranch(id);
  return true;
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
  appendRow(makeRow(m));
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
  appendRow(makeRow(m));
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
  QVariantMap meta{{QStringLiteral("streaming"), true}};
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
  Row row = makeRow(m);
  row.streaming = true;
  appendRow(std::move(row));

  const ChatSettings settings = settings_ ? settings_() : ChatSettings{};
  const qint64 requestId = engine_ ? engine_->generate(promptMessages(settings.systemPrompt), settings.options) : -1;
  if (requestId < 0) {
    Row& r = rows_.back();
    r.streaming = false;
    const QModelIndex i = index(rowCount() - 1);
    emit dataChanged(i, i, {StreamingRole});
    const QString error = QStringLiteral("No model is ready to reply.");
    store_->updateMessage(replyId, {}, {}, {{QStringLiteral("error"), error}});
    setErrorText(error);
    return false;
  }
  stream_.emplace();
  stream_->requestId = requestId;
  stream_->messageId = replyId;
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
  QVariantMap meta;
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
