// ChatViewModel, part 2: which branch of the conversation's message tree is shown (opening a
// conversation or a message, switching between sibling versions, also between answers that are
// still streaming). The rest is in chat_view_model.cpp and chat_view_model_stream.cpp.
#include <QHash>

#include <algorithm>

#include "chat_view_model.h"
#include "message_blocks_model.h"

namespace cosmos::ui {
namespace {

// A conversation's messages as a tree in memory (one query instead of one per row).
class MessageTree {
 public:
  explicit MessageTree(const QList<StoredMessage>& all) {
    for (const StoredMessage& m : all) {
      byId_.insert(m.id, m);
      children_[m.parentId].append(m.id);
    }
    for (QList<qint64>& ids : children_) std::sort(ids.begin(), ids.end());  // oldest first, as the store
  }

  bool contains(qint64 id) const { return byId_.contains(id); }
  const StoredMessage& message(qint64 id) const { return byId_.find(id).value(); }
  QList<qint64> childrenOf(qint64 parentId) const { return children_.value(parentId); }

  // The newest message without children under `id` (id itself when it has none); with id 0, of
  // the whole conversation (as ConversationStore::latestLeaf).
  qint64 latestLeafUnder(qint64 id) const {
    qint64 best = 0;
    QList<qint64> stack = id > 0 ? QList<qint64>{id} : children_.value(0);
    while (!stack.isEmpty()) {
      const qint64 at = stack.takeLast();
      const QList<qint64> kids = children_.value(at);
      if (kids.isEmpty())
        best = std::max(best, at);
      else
        stack.append(kids);
    }
    return best;
  }

  // Root .. leaf (empty for an unknown leaf).
  QList<qint64> pathTo(qint64 leaf) const {
    QList<qint64> out;
    for (qint64 at = leaf; at > 0 && byId_.contains(at) && out.size() <= byId_.size(); at = byId_.value(at).parentId)
      out.prepend(at);
    return out;
  }

  // 1-based place of `id` among its siblings, and their count.
  std::pair<int, int> siblingPlace(qint64 id) const {
    const QList<qint64> siblings = children_.value(byId_.value(id).parentId);
    return {static_cast<int>(siblings.indexOf(id)) + 1, static_cast<int>(std::max<qsizetype>(1, siblings.size()))};
  }

 private:
  QHash<qint64, StoredMessage> byId_;
  QHash<qint64, QList<qint64>> children_;  // parent id (0: the roots) → children, oldest first
};

}  // namespace

// A row read from the store whose reply is still arriving: the text so far (the store has it as of
// the last save).
void ChatViewModel::restoreStreamingRow(Row& row) const {
  for (const auto& s : streams_) {
    if (s->ended || s->messageId != row.id) continue;
    row.content = s->content;
    row.reasoning = s->reasoning;
    row.thinking = s->parser.in_reasoning();
    row.thoughtSeconds = s->thoughtSeconds;
    row.streaming = true;
    row.stats.clear();  // not "interrupted": it is streaming now
    row.error.clear();
    row.blocks->setText(row.content);
  }
}

void ChatViewModel::setSiblingsFromStore(Row& row) const {
  row.siblingIndex = row.siblingCount = 1;
  if (!store_ || conversationId_ <= 0) return;
  const QList<StoredMessage> siblings = store_->children(row.parentId, conversationId_);
  for (int i = 0; i < siblings.size(); ++i)
    if (siblings.at(i).id == row.id) row.siblingIndex = i + 1;
  row.siblingCount = std::max(1, static_cast<int>(siblings.size()));
}

void ChatViewModel::loadBranch(qint64 conversationId, qint64 throughMessage) {
  beginResetModel();
  for (Row& r : rows_) r.blocks->deleteLater();
  rows_.clear();
  if (store_ && conversationId > 0) {
    const MessageTree tree(store_->messages(conversationId));
    // Through the message asked for, else the branch the store says to show (the newest leaf,
    // or the one an import marked).
    qint64 leaf = tree.contains(throughMessage) ? tree.latestLeafUnder(throughMessage)
                                                : store_->latestLeaf(conversationId);
    if (!tree.contains(leaf)) leaf = tree.latestLeafUnder(0);
    for (qint64 id : tree.pathTo(leaf)) {
      Row r = makeRow(tree.message(id));
      std::tie(r.siblingIndex, r.siblingCount) = tree.siblingPlace(id);
      restoreStreamingRow(r);
      rows_.push_back(std::move(r));
    }
  }
  endResetModel();
}

bool ChatViewModel::openConversation(qint64 id) { return openMessage(id, 0); }

bool ChatViewModel::openMessage(qint64 conversationId, qint64 messageId) {
  if (!store_) return false;
  if (conversationId > 0 && (!store_->conversation(conversationId) || store_->isDeleted(conversationId))) {
    setErrorText(QStringLiteral("That conversation no longer exists."));
    return false;
  }
  if (busy() && conversationId != conversationId_) stop();  // the reply keeps being saved to its message
  setConversationId(conversationId);
  loadBranch(conversationId, messageId);
  if (messageId > 0) {
    for (int i = 0; i < rowCount(); ++i)
      if (rows_[static_cast<std::size_t>(i)].id == messageId) emit revealRequested(i);
  }
  return true;
}

bool ChatViewModel::switchSibling(int row, int delta) {
  if (!canSwitchVersions() || !store_ || row < 0 || row >= rowCount() || delta == 0) return false;
  const MessageTree tree(store_->messages(conversationId_));
  const Row& current = rows_[static_cast<std::size_t>(row)];
  const QList<qint64> siblings = tree.childrenOf(current.parentId);
  const auto at = siblings.indexOf(current.id);
  const auto target = at + delta;
  if (at < 0 || target < 0 || target >= siblings.size()) return false;
  const QList<qint64> path = tree.pathTo(tree.latestLeafUnder(siblings.at(target)));
  if (path.size() <= row) return false;  // the rows above are not this branch's (should not happen)
  std::vector<Row> fresh;
  for (qsizetype i = row; i < path.size(); ++i) {
    Row r = makeRow(tree.message(path.at(i)));
    std::tie(r.siblingIndex, r.siblingCount) = tree.siblingPlace(r.id);
    restoreStreamingRow(r);  // one of several answers still arriving
    fresh.push_back(std::move(r));
  }
  replaceRowsFrom(row, std::move(fresh));
  return true;
}

// Row `row` becomes fresh[0] in place (its delegate, and the focus on its switcher, stay); the
// rows after it are removed and fresh[1..] inserted. The rows before `row` get no signal.
void ChatViewModel::replaceRowsFrom(int row, std::vector<Row> fresh) {
  if (fresh.empty()) return;
  Row& slot = rows_[static_cast<std::size_t>(row)];
  slot.blocks->deleteLater();  // QML may still hold it until the binding updates
  slot = std::move(fresh.front());
  const QModelIndex i = index(row);
  emit dataChanged(i, i);
  removeRowsFrom(row + 1);
  if (fresh.size() > 1) {
    const int first = row + 1;
    beginInsertRows({}, first, first + static_cast<int>(fresh.size()) - 2);
    for (std::size_t k = 1; k < fresh.size(); ++k) rows_.push_back(std::move(fresh[k]));
    endInsertRows();
  }
}

}  // namespace cosmos::ui
