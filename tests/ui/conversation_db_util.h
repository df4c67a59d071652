// Test helpers for the conversation database: a plain second connection and a full dump.
#pragma once

#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QSqlRecord>
#include <QString>
#include <QStringList>
#include <QVariant>
#include <QtDebug>

// A second, plain connection to the same file (what another process would see).
class RawDb {
 public:
  explicit RawDb(const QString& path) : name_(QStringLiteral("raw-%1").arg(++counter_)) {
    db_ = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), name_);
    db_.setDatabaseName(path);
    db_.open();
  }
  ~RawDb() {
    db_.close();
    db_ = QSqlDatabase();
    QSqlDatabase::removeDatabase(name_);
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  bool exec(const QString& sql) {
    QSqlQuery q(db_);
    if (!q.exec(sql)) qWarning() << sql << q.lastError().text();
    return q.isActive();
  }
  QVariant scalar(const QString& sql) {
    QSqlQuery q(db_);
    return q.exec(sql) && q.next() ? q.value(0) : QVariant();
  }
  QSqlDatabase& db() { return db_; }

 private:
  static inline int counter_ = 0;
  QString name_;
  QSqlDatabase db_;
};

// Every row of every table (shadow tables of the search index included; virtual tables skipped).
inline QStringList dumpDatabase(const QString& path, const QStringList& only = {}) {
  RawDb raw(path);
  QStringList out;
  QSqlQuery tables(raw.db());
  tables.exec(
      QStringLiteral("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%' "
                     "ORDER BY name"));
  QStringList names;
  while (tables.next()) names << tables.value(0).toString();
  for (const QString& table : names) {
    if (!only.isEmpty() && !only.contains(table)) continue;
    QSqlQuery q(raw.db());
    if (!q.exec(QStringLiteral("SELECT * FROM \"%1\" ORDER BY rowid").arg(table)) &&
        !q.exec(QStringLiteral("SELECT * FROM \"%1\"").arg(table)))
      out << table + QStringLiteral(": ") + q.lastError().text();
    while (q.next()) {
      QStringList row;
      for (int i = 0; i < q.record().count(); ++i) {
        const QVariant v = q.value(i);
        row << (v.isNull()                            ? QStringLiteral("NULL")
                : v.typeId() == QMetaType::QByteArray ? QString::fromLatin1(v.toByteArray().toHex())
                                                      : v.toString());
      }
      out << table + QStringLiteral(": ") + row.join(u'|');
    }
  }
  return out;
}
