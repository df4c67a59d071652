// Shared by the ChatViewModel tests (test_chat_view_model*.cpp): ChatViewModel over a real
// ConversationStore (SQLite in a QTemporaryDir) and EngineHost with the scripted FakeChatEngine,
// made fresh for each test, and the helpers the tests use on them.
#pragma once

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

#include "chat_view_model.h"
#include "conversation_store.h"
#include "engine_host.h"
#include "fake_chat_engine.h"
#include "message_blocks_model.h"

using cosmos::ui::ChatSettings;
using cosmos::ui::ChatViewModel;
using cosmos::ui::ConversationStore;
using cosmos::ui::EngineHost;
using cosmos::ui::MessageBlocksModel;
using namespace cosmos::ui::testing;

inline QStringList blockTexts(const MessageBlocksModel* m) {
  QStringList out;
  for (const auto& b : m->blocks()) out << b.text;
  return out;
}

inline FakeStream stream(const QStringList& pieces, int delayMs = 0) {
  FakeStream s;
  s.pieces = pieces;
  s.delayMs = delayMs;
  return s;
}

// A second base of the test class, after QObject (moc wants QObject first); its init() calls
// initFixture() and its cleanup() cleanupFixture().
class ChatViewModelFixture {
 protected:
  void initFixture() {
    dir_ = std::make_unique<QTemporaryDir>();
    store_ = std::make_unique<ConversationStore>();
    QVERIFY2(store_->open(dir_->filePath(QStringLiteral("chat.sqlite"))), qPrintable(store_->lastError()));
    script_ = std::make_shared<FakeScript>();
    host_ = std::make_unique<EngineHost>(makeFakeEngine(script_));
    vm_ = std::make_unique<ChatViewModel>(host_.get(), store_.get());
    vm_->setSettingsProvider([] {
      ChatSettings s;
      s.systemPrompt = QStringLiteral("SYS");
      s.options.max_new_tokens = 64;
      return s;
    });
    tester_ = std::make_unique<QAbstractItemModelTester>(vm_.get(),
                                                         QAbstractItemModelTester::FailureReportingMode::QtTest);
  }
  void cleanupFixture() {
    tester_.reset();
    vm_.reset();
    host_.reset();
    store_.reset();
    dir_.reset();
  }

  std::unique_ptr<QTemporaryDir> dir_;
  std::unique_ptr<ConversationStore> store_;
  std::shared_ptr<FakeScript> script_;
  std::unique_ptr<EngineHost> host_;
  std::unique_ptr<ChatViewModel> vm_;
  std::unique_ptr<QAbstractItemModelTester> tester_;

  QVariant cell(int row, int role) const { return vm_->data(vm_->index(row), role); }
  MessageBlocksModel* blocks(int row) const {
    return qobject_cast<MessageBlocksModel*>(cell(row, ChatViewModel::BlocksRole).value<QObject*>());
  }
  bool loadModel() {
    QSignalSpy states(host_.get(), &EngineHost::stateChanged);
    host_->loadModel(QStringLiteral("/models/fake"));
    while (host_->state() != EngineHost::Ready && states.wait(5000)) {
    }
    return host_->state() == EngineHost::Ready;
  }
  // Sends and waits for the reply to end.
  bool sendAndWait(const QString& text) {
    QSignalSpy busy(vm_.get(), &ChatViewModel::busyChanged);
    if (!vm_->send(text)) return false;
    while (vm_->busy() && busy.wait(10000)) {
    }
    return !vm_->busy();
  }
  bool waitIdle() {
    QSignalSpy busy(vm_.get(), &ChatViewModel::busyChanged);
    while (vm_->busy() && busy.wait(10000)) {
    }
    return !vm_->busy();
  }
  QStringList contents() const {
    QStringList out;
    for (int i = 0; i < vm_->rowCount(); ++i) out << cell(i, ChatViewModel::ContentRole).toString();
    return out;
  }
  QString place(int row) const {  // "2/3"
    return QStringLiteral("%1/%2").arg(cell(row, ChatViewModel::SiblingIndexRole).toInt())
        .arg(cell(row, ChatViewModel::SiblingCountRole).toInt());
  }
  bool regenerateAndWait(const QString& reply) {
    script_->pushStream(stream({reply}));
    return vm_->regenerate() && waitIdle();
  }
  bool sendReplied(const QString& text, const QString& reply) {
    script_->pushStream(stream({reply}));
    return sendAndWait(text);
  }
};
