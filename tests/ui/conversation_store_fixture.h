// Shared by the ConversationStore and import tests (test_conversation_store*.cpp,
// test_conversation_import*.cpp): a fresh folder per test (and per data row) for the database.
#pragma once

#include <QDir>
#include <QString>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

// A second base of the test class, after QObject (moc wants QObject first):
//   class TestX : public QObject, protected ConversationStoreFolder { ... void init() { makeFolder(); } ... };
class ConversationStoreFolder {
 protected:
  void makeFolder() {  // a failed QVERIFY here fails init(), and Qt Test skips the test function
    tmp_ = std::make_unique<QTemporaryDir>();
    QVERIFY(tmp_->isValid());
    dir_ = QDir(tmp_->path());
    dbPath_ = dir_.filePath(QStringLiteral("conversations.sqlite"));
  }

  std::unique_ptr<QTemporaryDir> tmp_;
  QDir dir_;
  QString dbPath_;
};
