#include "search_results_model.h"

namespace cosmos::ui {

SearchResultsModel::SearchResultsModel(ConversationStore* store, QObject* parent)
    : QAbstractListModel(parent), store_(store) {
  if (store_) connect(store_, &ConversationStore::conversationsChanged, this, &SearchResultsModel::refresh);
}

int SearchResultsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(hits_.size());
}

QVariant SearchResultsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const SearchHit& hit = hits_.at(index.row());
  switch (role) {
    case ConversationIdRole: return hit.conversationId;
    case MessageIdRole: return hit.messageId;
    case Qt::DisplayRole:
    case TitleRole: return hit.title;
    case SnippetRole: return highlightSnippet(hit.snippet, highlightColor_);
    case PlainSnippetRole: return plainSnippet(hit.snippet);
    case RankRole: return hit.rank;
    default: return {};
  }
}

QHash<int, QByteArray> SearchResultsModel::roleNames() const {
  return {{ConversationIdRole, "conversationId"}, {MessageIdRole, "messageId"}, {TitleRole, "title"},
          {SnippetRole, "snippet"},               {PlainSnippetRole, "plainSnippet"}, {RankRole, "rank"}};
}

void SearchResultsModel::setQuery(const QString& query) {
  const QString q = query.trimmed();
  if (q == query_) return;
  query_ = q;
  emit queryChanged();
  refresh();
}

void SearchResultsModel::setHighlightColor(const QString& color) {
  if (color == highlightColor_) return;
  highlightColor_ = color;
  emit highlightColorChanged();
  if (!hits_.isEmpty()) emit dataChanged(index(0), index(rowCount() - 1), {SnippetRole});
}

qint64 SearchResultsModel::conversationIdAt(int row) const {
  return row >= 0 && row < hits_.size() ? hits_.at(row).conversationId : 0;
}

qint64 SearchResultsModel::messageIdAt(int row) const {
  return row >= 0 && row < hits_.size() ? hits_.at(row).messageId : 0;
}

void SearchResultsModel::refresh() {
  QList<SearchHit> fresh;
  if (store_ && store_->isOpen() && !query_.isEmpty()) fresh = store_->search(query_, kLimit);
  if (fresh == hits_) return;  // a reply streaming elsewhere changes the store every second
  const auto before = hits_.size();
  beginResetModel();
  hits_ = std::move(fresh);
  endResetModel();
  if (hits_.size() != before) emit countChanged();
}

QString SearchResultsModel::highlightSnippet(const QString& snippet, const QString& color) {
  const QString open = color.isEmpty() ? QStringLiteral("<b>")
                                       : QStringLiteral("<b><font color=\"%1\">").arg(color.toHtmlEscaped());
  const QString close = color.isEmpty() ? QStringLiteral("</b>") : QStringLiteral("</font></b>");
  QString out;
  bool inMatch = false;
  // Escape the text between the markers; the markers themselves become the tags.
  const QString text = snippet.simplified();
  qsizetype from = 0;
  for (qsizetype i = 0; i <= text.size(); ++i) {
    const bool end = i == text.size();
    const QChar c = end ? QChar() : text.at(i);
    if (!end && c != kMatchStart && c != kMatchEnd) continue;
    out += text.mid(from, i - from).toHtmlEscaped();
    from = i + 1;
    if (end) break;
    if (c == kMatchStart && !inMatch) {
      out += open;
      inMatch = true;
    } else if (c == kMatchEnd && inMatch) {
      out += close;
      inMatch = false;
    }
  }
  if (inMatch) out += close;
  return out;
}

QString SearchResultsModel::plainSnippet(const QString& snippet) {
  QString s = snippet;
  s.remove(kMatchStart);
  s.remove(kMatchEnd);
  return s.simplified();
}

}  // namespace cosmos::ui
