// ConversationStore, part 3: full-text search (the FTS5 index of schema 2) and the bulk insert
// behind imports, with the fingerprints that find duplicates.
#include <QCryptographicHash>
#include <QHash>
#include <QSqlError>

#include <algorithm>
#include <utility>

#include "conversation_store.h"
#include "conversation_store_p.h"

namespace cosmos::ui {
using namespace store_detail;
namespace {

constexpr int kMaxTerms = 16;                // query words used (the rest are ignored)
constexpr int kMaxHighlights = 200;          // matches marked in one snippet
constexpr int kWordsBefore = 4;              // the snippet's words before the first match
constexpr int kSnippetWords = 12;            // ... and in all
constexpr qsizetype kSnippetMaxChars = 240;  // a cap for texts with very long "words"

// Text without whitespace between words: each character counts as half a word.
bool isCjk(char32_t c) {
  switch (QChar::script(c)) {
    case QChar::Script_Han:
    case QChar::Script_Hiragana:
    case QChar::Script_Katakana:
      return true;
    default:
      return (c >= 0x3000 && c <= 0x303F) || (c >= 0xFF00 && c <= 0xFFEF);  // CJK punctuation, full width
  }
}

char32_t codePointAt(const QString& s, qsizetype i, qsizetype* length) {
  const QChar c = s.at(i);
  if (c.isHighSurrogate() && i + 1 < s.size() && s.at(i + 1).isLowSurrogate()) {
    *length = 2;
    return QChar::surrogateToUcs4(c, s.at(i + 1));
  }
  *length = 1;
  return c.unicode();
}

// Whitespace runs → one space, trimmed (the markers are not whitespace, so they stay).
QString collapseWhitespace(const QString& s) {
  QString out;
  out.reserve(s.size());
  bool space = false;
  for (const QChar c : s) {
    if (c.isSpace()) {
      space = !out.isEmpty();
      continue;
    }
    if (space) out += u' ';
    space = false;
    out += c;
  }
  return out;
}

struct Span {
  qsizetype begin;
  qsizetype end;
};

// The matches of every term in text (case-insensitive), sorted, overlaps merged.
QList<Span> findMatches(const QString& text, const QStringList& terms) {
  QList<Span> spans;
  for (const QString& term : terms) {
    for (qsizetype from = 0; spans.size() < kMaxHighlights * 4;) {
      const qsizetype at = text.indexOf(term, from, Qt::CaseInsensitive);
      if (at < 0) break;
      spans.append({at, at + term.size()});
      from = at + term.size();
    }
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  QList<Span> merged;
  for (const Span& s : spans) {
    if (!merged.isEmpty() && s.begin <= merged.back().end)
      merged.back().end = std::max(merged.back().end, s.end);
    else
      merged.append(s);
  }
  return merged;
}

// ~kSnippetWords words around the first match, each match wrapped in the markers.
QString makeSnippet(QString text, const QStringList& terms) {
  text.remove(ConversationStore::kMatchStart);
  text.remove(ConversationStore::kMatchEnd);
  const QList<Span> spans = findMatches(text, terms);

  // Words: runs of non-space characters, or one CJK character (weights: 2 and 1 half-words).
  struct Unit {
    qsizetype begin, end;
    int weight;
  };
  QList<Unit> units;
  const qsizetype n = text.size();
  for (qsizetype i = 0; i < n;) {
    qsizetype len = 1;
    const char32_t c = codePointAt(text, i, &len);
    if (QChar::isSpace(c)) {
      i += len;
    } else if (isCjk(c)) {
      units.append({i, i + len, 1});
      i += len;
    } else {
      const qsizetype begin = i;
      while (i < n) {
        const char32_t d = codePointAt(text, i, &len);
        if (QChar::isSpace(d) || isCjk(d)) break;
        i += len;
      }
      units.append({begin, i, 2});
    }
  }
  if (units.isEmpty()) return {};

  const qsizetype anchor = spans.isEmpty() ? 0 : spans.first().begin;
  const qsizetype anchorEnd = spans.isEmpty() ? 0 : spans.first().end;
  qsizetype k = 0;
  while (k + 1 < units.size() && units[k].end <= anchor) ++k;
  qsizetype first = k;
  int used = 0;
  while (first > 0 && used + units[first - 1].weight <= kWordsBefore * 2) used += units[--first].weight;
  qsizetype last = k;
  used += units[k].weight;
  while (last + 1 < units.size() && used + units[last + 1].weight <= kSnippetWords * 2) used += units[++last].weight;
  while (last + 1 < units.size() && units[last].end < anchorEnd) ++last;  // the whole first match

  qsizetype begin = units[first].begin;
  qsizetype end = units[last].end;
  bool cutBefore = first > 0;
  bool cutAfter = last + 1 < units.size();
  if (end - begin > kSnippetMaxChars) {  // very long words: cut by characters around the match
    const qsizetype from = std::max(begin, anchor - kSnippetMaxChars / 4);
    const qsizetype to = std::min(end, std::max(from + kSnippetMaxChars, anchorEnd));
    if (from > begin) cutBefore = true;
    if (to < end) cutAfter = true;
    begin = from;
    end = to;
    if (begin > 0 && text.at(begin).isLowSurrogate()) ++begin;  // never split a character
    if (end < n && text.at(end).isLowSurrogate()) ++end;
  }

  QString out;
  if (cutBefore) out += QChar(0x2026);
  qsizetype pos = begin;
  int marked = 0;
  for (const Span& s : spans) {
    const qsizetype b = std::max(s.begin, pos);
    const qsizetype e = std::min(s.end, end);
    if (b >= e) continue;
    if (++marked > kMaxHighlights) break;
    out += QStringView(text).mid(pos, b - pos);
    out += ConversationStore::kMatchStart;
    out += QStringView(text).mid(b, e - b);
    out += ConversationStore::kMatchEnd;
    pos = e;
  }
  out += QStringView(text).mid(pos, end - pos);
  if (cutAfter) out += QChar(0x2026);
  return collapseWhitespace(out);
}

bool containsAny(const QString& text, const QStringList& terms) {
  return std::any_of(terms.begin(), terms.end(),
                     [&](const QString& t) { return text.contains(t, Qt::CaseInsensitive); });
}

// A LIKE pattern matching `term` anywhere (escape character '\').
QString likePattern(QString term) {
  term.replace(u'\\', QStringLiteral("\\\\")).replace(u'%', QStringLiteral("\\%")).replace(u'_', QStringLiteral("\\_"));
  return u'%' + term + u'%';
}

}  // namespace

// --- search ---

QList<SearchHit> ConversationStore::search(const QString& query, int limit) const {
  QList<SearchHit> out;
  const QString what = tr("search the conversations");
  if (!isOpen()) {
    fail(what, tr("the database is not open"));
    return out;
  }
  QStringList terms;
  for (QString word : query.simplified().split(u' ', Qt::SkipEmptyParts)) {
    word.remove(kMatchStart);
    word.remove(kMatchEnd);
    if (word.isEmpty()) continue;
    if (std::none_of(terms.begin(), terms.end(),
                     [&](const QString& t) { return t.compare(word, Qt::CaseInsensitive) == 0; }))
      terms << word;
    if (terms.size() == kMaxTerms) break;
  }
  if (terms.isEmpty()) return out;

  // The trigram index answers words of 3+ characters (code points); shorter ones go to LIKE.
  QStringList phrases, likes;
  for (const QString& t : terms) {
    if (t.toUcs4().size() >= 3) {
      phrases << u'"' + QString(t).replace(u'"', QStringLiteral("\"\"")) + u'"';
    } else {
      likes << likePattern(t);
    }
  }
  QString sql;
  if (!phrases.isEmpty()) {
    sql = QStringLiteral(
        "SELECT m.id, m.conversation_id, c.title, m.content, m.reasoning FROM messages_fts"
        " JOIN messages m ON m.id = messages_fts.rowid JOIN conversations c ON c.id = m.conversation_id"
        " WHERE messages_fts MATCH ? AND c.deleted = 0");
  } else {
    sql = QStringLiteral(
        "SELECT m.id, m.conversation_id, c.title, m.content, m.reasoning FROM messages m"
        " JOIN conversations c ON c.id = m.conversation_id WHERE c.deleted = 0");
  }
  for (qsizetype i = 0; i < likes.size(); ++i)
    sql += QStringLiteral(" AND (m.content LIKE ? ESCAPE '\\' OR m.reasoning LIKE ? ESCAPE '\\')");
  sql += phrases.isEmpty() ? QStringLiteral(" ORDER BY m.id DESC LIMIT ?")
                           : QStringLiteral(" ORDER BY bm25(messages_fts, 2.0, 1.0), m.id DESC LIMIT ?");

  QSqlQuery q(db_);
  q.setForwardOnly(true);
  if (!q.prepare(sql)) {
    fail(what, q.lastError().text().trimmed());
    return out;
  }
  if (!phrases.isEmpty()) q.addBindValue(phrases.join(u' '));
  for (const QString& pattern : likes) {
    q.addBindValue(pattern);
    q.addBindValue(pattern);
  }
  q.addBindValue(std::clamp(limit, 1, 1000));
  if (!exec(q, what)) return out;
  lastError_.clear();
  while (q.next()) {
    SearchHit hit;
    hit.messageId = q.value(0).toLongLong();
    hit.conversationId = q.value(1).toLongLong();
    hit.title = q.value(2).toString();
    const QString content = q.value(3).toString();
    hit.snippet = makeSnippet(
        containsAny(content, terms) || !containsAny(q.value(4).toString(), terms) ? content : q.value(4).toString(),
        terms);
    hit.rank = static_cast<int>(out.size());
    out.append(std::move(hit));
  }
  return out;
}

// --- import ---

QString ConversationStore::fingerprint(const NewConversation& conversation) {
  QCryptographicHash hash(QCryptographicHash::Sha256);
  const auto& messages = conversation.messages;
  if (messages.isEmpty()) {
    hash.addData(QByteArrayView("cosmos-conversation-1 empty\n"));
    hash.addData(conversation.title.simplified().toUtf8());
    return QString::fromLatin1(hash.result().toHex());
  }
  hash.addData(QByteArrayView("cosmos-conversation-1\n"));
  // Pre-order walk (children in list order) with each node's depth: that sequence is the tree.
  QList<QList<int>> children(messages.size());
  QList<int> roots;
  for (int i = 0; i < messages.size(); ++i) {
    const int parent = messages[i].parent;
    (parent >= 0 && parent < i ? children[parent] : roots).append(i);
  }
  QList<std::pair<int, int>> stack;  // (index, depth)
  for (auto it = roots.crbegin(); it != roots.crend(); ++it) stack.append({*it, 0});
  while (!stack.isEmpty()) {
    const auto [i, depth] = stack.takeLast();
    const QByteArray content = messages[i].content.toUtf8();
    hash.addData(QStringLiteral("%1 %2 %3:").arg(depth).arg(messages[i].role).arg(content.size()).toUtf8());
    hash.addData(content);
    hash.addData(QByteArrayView("\n"));
    for (auto it = children[i].crbegin(); it != children[i].crend(); ++it) stack.append({*it, depth + 1});
  }
  return QString::fromLatin1(hash.result().toHex());
}

bool ConversationStore::storedFingerprints(QSet<QString>* out) {
  const QString what = tr("compare with the stored conversations");
  QList<std::pair<qint64, QString>> stale;
  {
    QSqlQuery& q = prepared("SELECT id, title FROM conversations WHERE deleted = 0 AND fingerprint IS NULL");
    if (!exec(q, what)) return false;
    while (q.next()) stale.append({q.value(0).toLongLong(), q.value(1).toString()});
    q.finish();
  }
  for (const auto& [id, title] : stale) {
    NewConversation c;
    c.title = title;
    QHash<qint64, int> index;
    for (const StoredMessage& m : messages(id)) {
      index.insert(m.id, static_cast<int>(c.messages.size()));
      c.messages.append(NewMessage{index.value(m.parentId, -1), m.role, m.content, {}, {}, {}});
    }
    QSqlQuery& update = prepared("UPDATE conversations SET fingerprint = ? WHERE id = ?");
    update.addBindValue(fingerprint(c));
    update.addBindValue(id);
    if (!exec(update, what)) return false;
    update.finish();
  }
  QSqlQuery& q = prepared("SELECT fingerprint FROM conversations WHERE deleted = 0");
  if (!exec(q, what)) return false;
  while (q.next()) out->insert(q.value(0).toString());
  q.finish();
  return true;
}

std::optional<QList<qint64>> ConversationStore::insertConversations(const QList<NewConversation>& conversations,
                                                                    int* duplicatesSkipped) {
  const QString what = tr("import the conversations");
  if (duplicatesSkipped) *duplicatesSkipped = 0;
  if (!requireWritable(what)) return std::nullopt;
  for (qsizetype c = 0; c < conversations.size(); ++c) {
    const NewConversation& conv = conversations[c];
    for (qsizetype i = 0; i < conv.messages.size(); ++i) {
      const NewMessage& m = conv.messages[i];
      if (!knownRole(m.role)) {
        fail(what, tr("conversation %1, message %2: unknown role \"%3\"").arg(c).arg(i).arg(m.role));
        return std::nullopt;
      }
      if (m.parent < -1 || m.parent >= i) {
        fail(what, tr("conversation %1, message %2: the parent is not an earlier message").arg(c).arg(i));
        return std::nullopt;
      }
    }
    if (conv.currentLeaf < -1 || conv.currentLeaf >= conv.messages.size()) {
      fail(what, tr("conversation %1: the current leaf is not one of its messages").arg(c));
      return std::nullopt;
    }
  }

  Transaction tx(db_);
  if (!tx.active()) {
    fail(what, db_.lastError().text());
    return std::nullopt;
  }
  QSet<QString> seen;
  if (!storedFingerprints(&seen)) return std::nullopt;

  QList<qint64> ids;
  int skipped = 0;
  qint64 newest = lastTimestamp_;
  for (const NewConversation& conv : conversations) {
    const QString print = fingerprint(conv);
    if (seen.contains(print)) {
      ++skipped;
      continue;
    }
    seen.insert(print);

    QList<qint64> times;
    for (const NewMessage& m : conv.messages)
      times << (m.createdAt.isValid() ? m.createdAt.toMSecsSinceEpoch() : nextTimestamp());
    const qint64 created = conv.createdAt.isValid() ? conv.createdAt.toMSecsSinceEpoch()
                           : times.isEmpty()        ? nextTimestamp()
                                                    : *std::min_element(times.begin(), times.end());
    const qint64 updated =
        conv.updatedAt.isValid()
            ? conv.updatedAt.toMSecsSinceEpoch()
            : std::max(created, times.isEmpty() ? created : *std::max_element(times.begin(), times.end()));
    newest = std::max({newest, created, updated});
    for (qint64 t : times) newest = std::max(newest, t);
    const QString title = conv.title.simplified();  // kept as given, empty too (like a rename)

    QSqlQuery& insert =
        prepared("INSERT INTO conversations (title, created_at, updated_at, deleted) VALUES (?, ?, ?, 0)");
    insert.addBindValue(text(title));
    insert.addBindValue(created);
    insert.addBindValue(updated);
    if (!exec(insert, what)) return std::nullopt;
    const qint64 id = insert.lastInsertId().toLongLong();
    insert.finish();

    QList<qint64> messageIds;
    for (qsizetype i = 0; i < conv.messages.size(); ++i) {
      const NewMessage& m = conv.messages[i];
      QSqlQuery& add = prepared(
          "INSERT INTO messages (conversation_id, parent_id, role, content, reasoning, meta_json, created_at)"
          " VALUES (?, ?, ?, ?, ?, ?, ?)");
      add.addBindValue(id);
      add.addBindValue(nullableId(m.parent >= 0 ? messageIds[m.parent] : 0));
      add.addBindValue(m.role);
      add.addBindValue(text(m.content));
      add.addBindValue(text(m.reasoning));
      add.addBindValue(metaToJson(m.meta));
      add.addBindValue(times[i]);
      if (!exec(add, what)) return std::nullopt;
      messageIds << add.lastInsertId().toLongLong();
      add.finish();
    }

    // After the messages: their insert trigger clears both columns.
    QSqlQuery& mark = prepared("UPDATE conversations SET fingerprint = ?, current_leaf = ? WHERE id = ?");
    mark.addBindValue(print);
    mark.addBindValue(nullableId(conv.currentLeaf >= 0 ? messageIds[conv.currentLeaf] : 0));
    mark.addBindValue(id);
    if (!exec(mark, what)) return std::nullopt;
    mark.finish();
    ids << id;
  }
  if (!tx.commit()) {
    fail(what, db_.lastError().text());
    return std::nullopt;
  }
  lastTimestamp_ = std::max(lastTimestamp_, newest);
  if (duplicatesSkipped) *duplicatesSkipped = skipped;
  if (!ids.isEmpty()) emit conversationsChanged();
  return ids;
}

}  // namespace cosmos::ui
