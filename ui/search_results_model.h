// SearchResultsModel (QML: `searchResults`): the sidebar's full-text search over the stored
// messages (ConversationStore::search, SQLite FTS5), best match first. Setting `query` runs the
// search at once on the GUI thread; the results follow the store (conversationsChanged runs it
// again, and only a different result list resets the model). Snippets come from the store with
// the matches between U+0002 and U+0003; the `snippet` role is rich text: the text escaped (a
// "<b>" someone typed stays text), whitespace collapsed, the matches in <b> (colored with
// highlightColor when set).
#pragma once

#include <QAbstractListModel>
#include <QList>
#include <QPointer>
#include <QString>

#include "conversation_store.h"

namespace cosmos::ui {

class SearchResultsModel : public QAbstractListModel {
  Q_OBJECT
  Q_PROPERTY(QString query READ query WRITE setQuery NOTIFY queryChanged)
  Q_PROPERTY(bool active READ active NOTIFY queryChanged)  // a query is set (the sidebar shows results)
  Q_PROPERTY(int count READ rowCount NOTIFY countChanged)
  Q_PROPERTY(QString highlightColor READ highlightColor WRITE setHighlightColor NOTIFY highlightColorChanged)

 public:
  static constexpr int kLimit = 50;  // results per query
  static constexpr QChar kMatchStart = ConversationStore::kMatchStart;  // U+0002
  static constexpr QChar kMatchEnd = ConversationStore::kMatchEnd;      // U+0003

  enum Role {
    ConversationIdRole = Qt::UserRole + 1,  // qint64
    MessageIdRole,                          // qint64: the matching message
    TitleRole,                              // QString: the conversation's title (plain text)
    SnippetRole,                            // QString: rich text, the matches highlighted
    PlainSnippetRole,                       // QString: the snippet without markers (accessibility)
    RankRole,                               // int: the store's rank (0 = best)
  };
  Q_ENUM(Role)

  explicit SearchResultsModel(ConversationStore* store, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QHash<int, QByteArray> roleNames() const override;

  QString query() const { return query_; }
  void setQuery(const QString& query);  // trimmed; blank clears the results
  bool active() const { return !query_.isEmpty(); }
  QString highlightColor() const { return highlightColor_; }
  void setHighlightColor(const QString& color);

  Q_INVOKABLE void clear() { setQuery({}); }
  Q_INVOKABLE qint64 conversationIdAt(int row) const;  // 0 when out of range
  Q_INVOKABLE qint64 messageIdAt(int row) const;       // 0 when out of range

  // A store snippet as rich text: escaped, whitespace collapsed, U+0002..U+0003 → <b>..</b> (an
  // unclosed match is closed at the end, a stray end marker dropped). `color` (e.g. "#4a8500")
  // colors the matches too.
  static QString highlightSnippet(const QString& snippet, const QString& color = {});
  // The snippet as plain text (markers removed, whitespace collapsed).
  static QString plainSnippet(const QString& snippet);

 public slots:
  // Runs the query again (called on the store's conversationsChanged).
  void refresh();

 signals:
  void queryChanged();
  void countChanged();
  void highlightColorChanged();

 private:
  QPointer<ConversationStore> store_;
  QString query_;
  QString highlightColor_;
  QList<SearchHit> hits_;
};

}  // namespace cosmos::ui
