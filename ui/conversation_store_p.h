// ConversationStore's private helpers, shared by its .cpp parts (not part of the API).
#pragma once

#include <QDateTime>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSqlDatabase>
#include <QString>
#include <QVariant>
#include <QVariantMap>

namespace cosmos::ui::store_detail {

// Rolls back unless commit() succeeded.
class Transaction {
 public:
  explicit Transaction(QSqlDatabase& db) : db_(db), active_(db.transaction()) {}
  ~Transaction() {
    if (active_) db_.rollback();
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  bool active() const { return active_; }
  bool commit() {
    if (!db_.commit()) return false;
    active_ = false;
    return true;
  }

 private:
  QSqlDatabase& db_;
  bool active_;
};

inline QDateTime fromMs(qint64 ms) { return QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC); }

inline QString metaToJson(const QJsonObject& meta) {
  return QString::fromUtf8(QJsonDocument(meta).toJson(QJsonDocument::Compact));
}
inline QString metaToJson(const QVariantMap& meta) { return metaToJson(QJsonObject::fromVariantMap(meta)); }

inline QVariant nullableId(qint64 id) { return id > 0 ? QVariant(id) : QVariant(QMetaType::fromType<qint64>()); }

// A null QString binds as SQL NULL; the text columns are NOT NULL.
inline QString text(const QString& s) { return s.isNull() ? QStringLiteral("") : s; }

inline bool knownRole(const QString& role) {
  return role == u"system" || role == u"user" || role == u"assistant" || role == u"tool";
}

}  // namespace cosmos::ui::store_detail
