#include "conversation_list_model.h"

#include <QSet>

namespace cosmos::ui {

ConversationListModel::ConversationListModel(ConversationStore* store, QObject* parent)
    : QAbstractListModel(parent), store_(store) {
  if (store_) {
    connect(store_, &ConversationStore::conversationsChanged, this, &ConversationListModel::refresh);
    rows_ = store_->conversations();
  }
}

int ConversationListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

QVariant ConversationListModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const ConversationSummary& c = rows_.at(index.row());
  switch (role) {
    case ConversationIdRole: return c.id;
    case Qt::DisplayRole:
    case TitleRole: return c.title;
    case UpdatedRole: return c.updatedAt;
    case MessageCountRole: return c.messageCount;
    default: return {};
  }
}

QHash<int, QByteArray> ConversationListModel::roleNames() const {
  return {{ConversationIdRole, "conversationId"},
          {TitleRole, "title"},
          {UpdatedRole, "updated"},
          {MessageCountRole, "messageCount"}};
}

qint64 ConversationListModel::newConversation() {
  if (!store_) return -1;
  const qint64 id = store_->createConversation();
  if (id < 0) reportError();
  return id;
}

bool ConversationListModel::rename(int row, const QString& title) {
  if (!store_ || row < 0 || row >= rows_.size()) return false;
  if (!store_->renameConversation(rows_.at(row).id, title)) {
    reportError();
    return false;
  }
  return true;
}

bool ConversationListModel::remove(int row) {
  if (!store_ || row < 0 || row >= rows_.size()) return false;
  const Removed removed{rows_.at(row).id, rows_.at(row).title};
  if (!store_->deleteConversation(removed.id)) {  // the row goes in refresh()
    reportError();
    return false;
  }
  undo_.append(removed);
  emit undoChanged();
  return true;
}

bool ConversationListModel::undoRemove() {
  if (!store_ || undo_.isEmpty()) return false;
  const Removed removed = undo_.takeLast();
  const bool ok = store_->restoreConversation(removed.id);  // the row comes back in refresh()
  if (!ok) reportError();
  emit undoChanged();
  return ok;
}

int ConversationListModel::purgeRemoved() {
  if (!store_) return -1;
  const int purged = store_->purgeDeleted();
  if (purged < 0) {
    reportError();
    return -1;
  }
  if (!undo_.isEmpty()) {
    undo_.clear();
    emit undoChanged();
  }
  return purged;
}

int ConversationListModel::rowOf(qint64 conversationId) const {
  for (int i = 0; i < rows_.size(); ++i)
    if (rows_.at(i).id == conversationId) return i;
  return -1;
}

qint64 ConversationListModel::idAt(int row) const {
  return row >= 0 && row < rows_.size() ? rows_.at(row).id : 0;
}

QString ConversationListModel::titleOf(qint64 conversationId) const {
  const int row = rowOf(conversationId);
  return row >= 0 ? rows_.at(row).title : QString();
}

void ConversationListModel::refresh() {
  syncRows(store_ ? store_->conversations() : QList<ConversationSummary>{});
  // Undo only what is still soft-deleted (another view may have restored or purged it).
  const auto before = undo_.size();
  undo_.removeIf([this](const Removed& r) { return !store_ || !store_->isDeleted(r.id); });
  if (undo_.size() != before) emit undoChanged();
}

// Turns rows_ into fresh with the smallest signals: removals, moves of kept rows, insertions, then
// dataChanged for rows whose values changed.
void ConversationListModel::syncRows(const QList<ConversationSummary>& fresh) {
  const auto countBefore = rows_.size();
  QSet<qint64> freshIds;
  for (const ConversationSummary& c : fresh) freshIds.insert(c.id);
  for (int i = static_cast<int>(rows_.size()) - 1; i >= 0; --i) {
    if (freshIds.contains(rows_.at(i).id)) continue;
    beginRemoveRows({}, i, i);
    rows_.removeAt(i);
    endRemoveRows();
  }

  QSet<qint64> keptIds;
  for (const ConversationSummary& c : rows_) keptIds.insert(c.id);
  QList<qint64> order;  // the kept rows in their new order
  for (const ConversationSummary& c : fresh)
    if (keptIds.contains(c.id)) order.append(c.id);
  for (int j = 0; j < order.size(); ++j) {
    if (rows_.at(j).id == order.at(j)) continue;
    int k = j + 1;
    while (rows_.at(k).id != order.at(j)) ++k;
    beginMoveRows({}, k, k, {}, j);
    rows_.move(k, j);
    endMoveRows();
  }

  for (int j = 0; j < fresh.size(); ++j) {
    if (j < rows_.size() && rows_.at(j).id == fresh.at(j).id) continue;
    beginInsertRows({}, j, j);
    rows_.insert(j, fresh.at(j));
    endInsertRows();
  }

  for (int i = 0; i < rows_.size(); ++i) {
    ConversationSummary& row = rows_[i];
    const ConversationSummary& now = fresh.at(i);
    if (row == now) continue;
    QList<int> roles;
    if (row.title != now.title) roles << TitleRole << Qt::DisplayRole;
    if (row.updatedAt != now.updatedAt) roles << UpdatedRole;
    if (row.messageCount != now.messageCount) roles << MessageCountRole;
    row = now;
    if (!roles.isEmpty()) emit dataChanged(index(i), index(i), roles);
  }
  if (rows_.size() != countBefore) emit countChanged();
}

void ConversationListModel::reportError() {
  lastError_ = store_ ? store_->lastError() : tr("no conversation store");
  emit errorOccurred(lastError_);
}

}  // namespace cosmos::ui
