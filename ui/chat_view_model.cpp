#include "chat_view_model.h"

#include <limits>

#include "chat_engine.h"
#include "engine_host.h"
#include "message_blocks_model.h"

namespace cosmos::ui {
namespace {

const QString kUser = QStringLiteral("user");
const QString kAssistant = QStringLiteral("assistant");

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
    for (auto& s : streams_)
      if (!s->ended && s->dirty) saveStream(*s, true);
  });
  if (engine_) {
    connect(engine_, &EngineHost::stateChanged, this, &ChatViewModel::notifyCanSend);
    connect(engine_, &EngineHost::piecesReady, this, &ChatViewModel::onPieces);
    connect(engine_, &EngineHost::generationFinished, this, &ChatViewModel::onFinished);
    connect(engine_, &EngineHost::generationFailed, this, &ChatViewModel::onFailed);
    connect(engine_, &EngineHost::answerPiecesReady, this, &ChatViewModel::onAnswerPieces);
    connect(engine_, &EngineHost::answerRestarted, this, &ChatViewModel::onAnswerRestarted);
    connect(engine_, &EngineHost::answerFinished, this, &ChatViewModel::onAnswerFinished);
    connect(engine_, &EngineHost::answerFailed, this, &ChatViewModel::onAnswerFailed);
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
  for (auto& s : streams_)
    if (!s->ended && s->dirty) saveStream(*s, false);
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
    case ErrorRole: return r.error;
    default: return {};
  }
}

QHash<int, QByteArray> ChatViewModel::roleNames() const {
  return {{MessageIdRole, "messageId"}, {RoleRole, "role"},         {ContentRole, "content"},
          {ReasoningRole, "reasoning"}, {ThinkingRole, "thinking"}, {StreamingRole, "streaming"},
          {ThoughtSecondsRole, "thoughtSeconds"}, {StatsRole, "stats"}, {BlocksRole, "blocks"},
          {SiblingIndexRole, "siblingIndex"}, {SiblingCountRole, "siblingCount"}, {ErrorRole, "error"}};
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

QString ChatViewModel::answersBlockedReason() const {
  if (const QString reason = blockedReason(); !reason.isEmpty()) return reason;
  const ChatSettings settings = settings_ ? settings_() : ChatSettings{};
  if (answersWouldBeIdentical(settings.options.sampling))
    return settings.options.sampling.greedy()
               ? QStringLiteral("With temperature 0 (greedy sampling) every answer would be the same: raise the "
                                "temperature in the settings to get different answers.")
               : QStringLiteral("With top-k 1 every answer would be the same: raise top-k in the settings to get "
                                "different answers.");
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
  r.error = message.meta.value(QStringLiteral("error")).toString();
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

// Stores the user's message under the current leaf (creating the conversation first when none is
// open) and shows it.
bool ChatViewModel::addUserMessage(const QString& text) {
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
  return true;
}

bool ChatViewModel::send(const QString& text) {
  if (text.trimmed().isEmpty() || !canSend()) return false;
  setErrorText({});
  return addUserMessage(text) && startReply(rows_.back().id);
}

bool ChatViewModel::sendForAnswers(const QString& text, int n) {
  if (text.trimmed().isEmpty()) return false;
  if (n < kMinAnswers || n > kMaxAnswers || !canGenerateAnswers()) {
    if (const QString reason = answersBlockedReason(); !reason.isEmpty() && canSend()) setErrorText(reason);
    return false;
  }
  setErrorText({});
  return addUserMessage(text) && startReply(rows_.back().id, n);
}

int ChatViewModel::lastUserRow() const {
  int user = static_cast<int>(rows_.size()) - 1;
  while (user >= 0 && rows_[static_cast<std::size_t>(user)].role != kUser) --user;
  return user;
}

bool ChatViewModel::regenerate() {
  if (!canSend()) return false;
  const int user = lastUserRow();
  if (user < 0) return false;
  setErrorText({});
  removeRowsFrom(user + 1);
  return startReply(rows_[static_cast<std::size_t>(user)].id);
}

bool ChatViewModel::generateAnswers(int n) {
  if (n < kMinAnswers || n > kMaxAnswers) return false;
  if (!canGenerateAnswers()) {
    // Said, not silently ignored (a keyboard shortcut reaches here too); "Generating…" needs no banner.
    if (canSend()) setErrorText(answersBlockedReason());
    return false;
  }
  const int user = lastUserRow();
  if (user < 0) return false;
  setErrorText({});
  removeRowsFrom(user + 1);
  return startReply(rows_[static_cast<std::size_t>(user)].id, n);
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

}  // namespace cosmos::ui
