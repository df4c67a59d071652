// ChatViewModel (QML: `chat`): the open conversation's current branch (root .. latest leaf of the
// ConversationStore's message tree) as a list model, and the actions on it.
//
// A reply: send() stores the user message (parent = the current leaf) and an empty assistant
// message, then asks EngineHost to generate from the messages (the settings' system prompt first,
// then the branch; an assistant message is given as the model wrote it, tags included, so the
// session's KV cache is reused across turns). Streamed text goes through cosmos::ReasoningParser
// into the last row (content = the answer, reasoning, thinking = inside <think> now) with
// dataChanged for that row only, and into the row's MessageBlocksModel. The reply is saved at
// least every second while it streams and at the end (meta: stats, thoughtSeconds, raw text,
// stopped / error, and what generated it: model, precision, sampling). regenerate() adds a sibling
// reply to the same user message; editAndResend() adds a sibling user message under the same
// parent. An engine error keeps the partial reply and sets errorText.
//
// Branches: each row knows its place among its siblings (siblingIndex 1-based, siblingCount);
// switchSibling(row, ±1) shows the branch through the neighbouring sibling (its latest leaf
// descendant): that row changes in place (dataChanged), the rows after it are removed and the new
// branch's inserted, the rows before it are untouched. The tree walks are in
// chat_view_model_branches.cpp.
//
// Several answers: generateAnswers(n) (n = 2..8) asks for n new replies to the last user message
// at once (sendForAnswers(text, n): a new message and n replies). The n assistant messages are
// siblings under the user message, stored at once; the engine runs them as one batch
// (EngineHost::generateMany, answer i with the seed + i) and each streams into its own message
// (its own parser and blocks; dataChanged only for its row when it is shown). The first new one is
// shown; switchSibling works while they stream and shows the chosen one's text so far. Each is
// saved at least every second and when it ends: a stopped one keeps its text (meta stopped), a
// failed one its text and error (the others go on), one restarted by the engine (memory) starts
// over. With greedy sampling every answer would be the same: the action is refused and
// answersBlockedReason says why. The streaming code is in chat_view_model_stream.cpp.
#pragma once

#include <QAbstractListModel>
#include <QElapsedTimer>
#include <QPointer>
#include <QString>
#include <QTimer>
#include <QVariantMap>

#include <functional>
#include <memory>
#include <vector>

#include "conversation_store.h"
#include "cosmos/reasoning_parser.h"
#include "cosmos/session.h"

namespace cosmos::ui {

class EngineHost;
class MessageBlocksModel;

// What a reply is generated with (the app fills it from SettingsViewModel; tests from a lambda).
struct ChatSettings {
  cosmos::GenerateOptions options;
  QString systemPrompt;  // empty: no system message
};
// What a saved reply's meta records about its generation: {model, precision, sampling:
// {temperature, top_k, top_p, min_p, repetition_penalty, seed, max_new_tokens}}. `model` is the
// loaded model folder's name. Floats are rounded to 6 significant digits (0.7f is stored as 0.7).
QVariantMap generationMeta(const QString& model, const QString& precision, const cosmos::GenerateOptions& options);
using ChatSettingsProvider = std::function<ChatSettings()>;

class ChatViewModel : public QAbstractListModel {
  Q_OBJECT
  Q_PROPERTY(qint64 conversationId READ conversationId NOTIFY conversationIdChanged)
  Q_PROPERTY(bool busy READ busy NOTIFY busyChanged)
  Q_PROPERTY(bool canSend READ canSend NOTIFY canSendChanged)
  Q_PROPERTY(QString blockedReason READ blockedReason NOTIFY canSendChanged)
  Q_PROPERTY(QString errorText READ errorText NOTIFY errorTextChanged)
  // "Generate N answers": possible now (a model is ready, nothing streams, sampling is not greedy).
  Q_PROPERTY(bool canGenerateAnswers READ canGenerateAnswers NOTIFY canSendChanged)
  // Why generateAnswers()/sendForAnswers() are refused now; empty when they are not.
  Q_PROPERTY(QString answersBlockedReason READ answersBlockedReason NOTIFY canSendChanged)
  // switchSibling is possible now: nothing streams, or the streaming replies are several answers.
  Q_PROPERTY(bool canSwitchVersions READ canSwitchVersions NOTIFY busyChanged)
  Q_PROPERTY(int minAnswers READ minAnswers CONSTANT)
  Q_PROPERTY(int maxAnswers READ maxAnswers CONSTANT)

 public:
  static constexpr int kSaveIntervalMs = 1000;  // a streaming reply is saved at least this often
  static constexpr int kMinAnswers = 2;         // generateAnswers(n): n in kMinAnswers..kMaxAnswers
  static constexpr int kMaxAnswers = 8;

  enum Role {
    MessageIdRole = Qt::UserRole + 1,  // qint64
    RoleRole,                          // QString: user | assistant | system
    ContentRole,                       // QString: the user's text or the answer (tags removed)
    ReasoningRole,                     // QString: the assistant's thinking
    ThinkingRole,                      // bool: inside <think> right now
    StreamingRole,                     // bool: the reply is arriving
    ThoughtSecondsRole,                // double: first reasoning text to </think>
    StatsRole,                         // QVariantMap: generationFinished's stats (empty for users)
    BlocksRole,                        // MessageBlocksModel*: the content as Markdown blocks
    SiblingIndexRole,                  // int: 1-based place among the messages with the same parent
    SiblingCountRole,                  // int: how many messages share the parent (1: no versions)
    ErrorRole,                         // QString: why this reply failed (empty when it did not)
  };
  Q_ENUM(Role)

  ChatViewModel(EngineHost* engine, ConversationStore* store, QObject* parent = nullptr);
  ~ChatViewModel() override;

  void setSettingsProvider(ChatSettingsProvider provider) { settings_ = std::move(provider); }

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QHash<int, QByteArray> roleNames() const override;

  qint64 conversationId() const { return conversationId_; }
  bool busy() const { return requestId_ >= 0; }
  bool canSend() const { return blockedReason().isEmpty(); }
  // Why send() is refused now ("Load a model first", "Loading the model…", "Generating…"); empty
  // when it is not.
  QString blockedReason() const;
  QString errorText() const { return errorText_; }
  bool canGenerateAnswers() const { return answersBlockedReason().isEmpty(); }
  QString answersBlockedReason() const;
  bool canSwitchVersions() const { return !busy() || manyAnswers_; }
  int minAnswers() const { return kMinAnswers; }
  int maxAnswers() const { return kMaxAnswers; }
  // The sampling settings changed (greedy or not): canGenerateAnswers may have (the app connects it).
  void notifySettingsChanged() { emit canSendChanged(); }

  // Sends a user message in the open conversation (a new one is created when none is open).
  Q_INVOKABLE bool send(const QString& text);
  Q_INVOKABLE void stop();
  // A new reply to the last user message, as a sibling of the current one.
  Q_INVOKABLE bool regenerate();
  // n (kMinAnswers..kMaxAnswers) new replies to the last user message at once, as siblings of the
  // current one; refused (false, errorText says why) when answersBlockedReason() is not empty.
  Q_INVOKABLE bool generateAnswers(int n);
  // Sends a user message as send() does and asks for n replies to it at once.
  Q_INVOKABLE bool sendForAnswers(const QString& text, int n);
  // A new version of the user message at `row` (a sibling under the same parent), then a reply.
  Q_INVOKABLE bool editAndResend(int row, const QString& text);
  // Shows the conversation's latest branch (a running reply is stopped and still saved).
  Q_INVOKABLE bool openConversation(qint64 id);
  // Shows the conversation's branch through messageId (its latest leaf descendant), then emits
  // revealRequested(row of messageId). Falls back to the latest branch when the message is not in
  // the conversation.
  Q_INVOKABLE bool openMessage(qint64 conversationId, qint64 messageId);
  // Shows the branch through the sibling `delta` places from the message at `row` (-1: the older
  // version, +1: the newer one). Refused (false) past the first/last one and while a single reply
  // streams (not while several answers do: canSwitchVersions).
  Q_INVOKABLE bool switchSibling(int row, int delta);
  // An empty view; the conversation is created in the store by the first send().
  Q_INVOKABLE void newConversation();
  Q_INVOKABLE void clearError();

 signals:
  void conversationIdChanged();
  void busyChanged();
  void canSendChanged();
  void errorTextChanged();
  // The reply was written to the store (while streaming and at the end).
  void messageSaved(qint64 messageId);
  // openMessage() asks the view to bring this row into sight.
  void revealRequested(int row);

 private:
  struct Row {
    qint64 id = 0;
    qint64 parentId = 0;
    QString role, content, reasoning;
    bool thinking = false, streaming = false;
    double thoughtSeconds = 0;
    QVariantMap stats;
    QVariantMap meta;
    QString error;
    int siblingIndex = 1, siblingCount = 1;
    MessageBlocksModel* blocks = nullptr;  // owned (child of this)
  };
  // A reply being generated (one of several answers: `answer`); its row may not be shown (another
  // branch or conversation is).
  struct Stream {
    qint64 messageId = 0;
    int answer = 0;
    bool ended = false;          // finished, stopped or failed (saved for the last time)
    cosmos::ReasoningParser parser;
    QString raw;                 // the reply as the model wrote it
    QString content, reasoning;  // the parser's channels so far
    QElapsedTimer clock;         // since the request
    qint64 firstTextMs = -1;     // first text of the reply
    qint64 thinkStartMs = -1;    // first reasoning text
    bool thinkClosed = false;
    double thoughtSeconds = 0;
    bool dirty = false;          // changed since the last save
    QVariantMap generation;      // generationMeta() of the request, saved with the reply
  };

  void setErrorText(const QString& text);
  void setConversationId(qint64 id);
  Row makeRow(const StoredMessage& message);
  void appendRow(Row row);
  void removeRowsFrom(int row);
  void loadBranch(qint64 conversationId, qint64 throughMessage = 0);
  void setSiblingsFromStore(Row& row) const;
  void replaceRowsFrom(int row, std::vector<Row> fresh);
  void restoreStreamingRow(Row& row) const;
  bool startReply(qint64 userMessageId, int answers = 1);
  bool addUserMessage(const QString& text);
  int lastUserRow() const;
  std::vector<cosmos::ChatMessage> promptMessages(const QString& systemPrompt) const;
  Stream* streamOf(qint64 requestId, int answer);  // a running answer of the request, else null
  int streamRow(const Stream& s) const;            // its row, -1 when not shown
  void appendText(Stream& s, const QString& text);
  void applyDelta(Stream& s, const cosmos::ReasoningDelta& delta);
  void restartStream(Stream& s);
  void onPieces(qint64 requestId, const QString& text);
  void onFinished(qint64 requestId, const QVariantMap& stats);
  void onFailed(qint64 requestId, const QString& message);
  void onAnswerPieces(qint64 requestId, int answer, const QString& text);
  void onAnswerRestarted(qint64 requestId, int answer);
  void onAnswerFinished(qint64 requestId, int answer, const QVariantMap& stats);
  void onAnswerFailed(qint64 requestId, int answer, const QString& message);
  void endStream(Stream& s, const QVariantMap& stats, const QString& error);
  void endRequest();
  void notifyCanSend();
  QVariantMap streamMeta(const Stream& s, bool streaming, const QVariantMap& stats, const QString& error) const;
  void saveStream(Stream& s, bool streaming, const QVariantMap& stats = {}, const QString& error = {});

  QPointer<EngineHost> engine_;
  QPointer<ConversationStore> store_;
  ChatSettingsProvider settings_;
  std::vector<Row> rows_;
  qint64 conversationId_ = 0;
  QString errorText_;
  qint64 requestId_ = -1;  // the generation in flight (-1: none)
  bool manyAnswers_ = false;  // it is several answers (generateMany)
  std::vector<std::unique_ptr<Stream>> streams_;  // its replies, by answer
  QTimer saveTimer_;
};

}  // namespace cosmos::ui
