// ConversationListModel: the sidebar's list of conversations (QML: `conversations`), newest first,
// over a ConversationStore it does not own. It follows the store's conversationsChanged with
// fine-grained model signals (rows inserted/removed/moved, dataChanged), so a streaming reply that
// bumps its conversation once a second only emits dataChanged and a rename keeps the row.
// remove() is a soft delete that undoRemove() takes back (a stack: the last removed first).
#pragma once

#include <QAbstractListModel>
#include <QList>
#include <QPointer>

#include "conversation_store.h"

namespace cosmos::ui {

class ConversationListModel : public QAbstractListModel {
  Q_OBJECT
  Q_PROPERTY(bool canUndo READ canUndo NOTIFY undoChanged)
  Q_PROPERTY(QString undoTitle READ undoTitle NOTIFY undoChanged)  // title of what undoRemove() restores
  Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

 public:
  enum Role {
    ConversationIdRole = Qt::UserRole + 1,  // qint64
    TitleRole,                              // QString, empty until the first user message
    UpdatedRole,                            // QDateTime (UTC)
    MessageCountRole,                       // int
  };
  Q_ENUM(Role)

  explicit ConversationListModel(ConversationStore* store, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QHash<int, QByteArray> roleNames() const override;

  // A new, empty conversation (it appears at row 0); its id, -1 on failure.
  Q_INVOKABLE qint64 newConversation();
  Q_INVOKABLE bool rename(int row, const QString& title);
  Q_INVOKABLE bool remove(int row);  // soft delete, remembered for undoRemove()
  Q_INVOKABLE bool undoRemove();
  // Deletes the removed conversations for good and forgets the undo stack; count or -1.
  Q_INVOKABLE int purgeRemoved();
  Q_INVOKABLE int rowOf(qint64 conversationId) const;  // -1 when not listed
  Q_INVOKABLE qint64 idAt(int row) const;              // 0 when out of range
  Q_INVOKABLE QString titleOf(qint64 conversationId) const;  // "" when not listed or untitled

  bool canUndo() const { return !undo_.isEmpty(); }
  QString undoTitle() const { return undo_.isEmpty() ? QString() : undo_.back().title; }
  QString lastError() const { return lastError_; }

 public slots:
  // Brings the rows in line with the store (called on conversationsChanged).
  void refresh();

 signals:
  void undoChanged();
  void countChanged();
  void errorOccurred(const QString& message);  // a failed store write, the store's sentence

 private:
  struct Removed {
    qint64 id = 0;
    QString title;
  };
  void reportError();
  void syncRows(const QList<ConversationSummary>& fresh);

  QPointer<ConversationStore> store_;
  QList<ConversationSummary> rows_;  // newest first, as store_->conversations()
  QList<Removed> undo_;              // soft-deleted by remove(), the last one at the back
  QString lastError_;
};

}  // namespace cosmos::ui
