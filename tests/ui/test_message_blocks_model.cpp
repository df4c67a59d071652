// MessageBlocksModel: Markdown split at blank lines outside fenced code, and streaming that only
// changes the last row or appends rows (never a reset), ending with the one-shot split.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QtTest>

#include "message_blocks_model.h"

using cosmos::ui::MessageBlocksModel;

namespace {

QStringList texts(const QList<MessageBlocksModel::Block>& blocks) {
  QStringList out;
  for (const auto& b : blocks) out << b.text;
  return out;
}

QStringList kinds(const QList<MessageBlocksModel::Block>& blocks) {
  QStringList out;
  for (const auto& b : blocks) out << (b.code ? QStringLiteral("code") : QStringLiteral("markdown"));
  return out;
}

// A long reply with every kind of block: paragraphs, lists, fenced code with blank lines inside,
// a tilde fence, an indented fence in a list, inline triple backticks, CJK and emoji.
QString longReply() {
  QString s;
  for (int i = 0; i < 6; ++i) {
    s += QStringLiteral("## Step %1\n\nThe robot 🤖 moves the *cup* to the left; 机器人 then waits.\nSecond line.\n\n").arg(i);
    s += QStringLiteral("- first item\n- second item\n\n   1. nested\n\n");
    s += QStringLiteral("```python\ndef f(x):\n    return x\n\n\nprint(f(%1))\n```\n\n").arg(i);
    s += QStringLiteral("Use ```inline``` code here.\n~~~\nraw\n\n~~~\n");
    s += QStringLiteral("1. item\n\n   ```sh\n   ls\n\n   pwd\n   ```\n\n\n");
  }
  s += QStringLiteral("Unclosed:\n```cpp\nint main() {\n\n  return 0;");
  return s;
}

}  // namespace

class TestMessageBlocksModel : public QObject {
  Q_OBJECT

 private slots:
  void split_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QStringList>("blocks");
    QTest::addColumn<QStringList>("kinds");
    const QString md = QStringLiteral("markdown"), code = QStringLiteral("code");
    QTest::newRow("empty") << QString() << QStringList() << QStringList();
    QTest::newRow("blank only") << QStringLiteral("\n \n\t\n") << QStringList() << QStringList();
    QTest::newRow("one paragraph") << QStringLiteral("Hello\nworld") << QStringList{QStringLiteral("Hello\nworld")}
                                   << QStringList{md};
    QTest::newRow("paragraphs") << QStringLiteral("\n\nA\n\n\nB\n \nC\n")
                                << QStringList{QStringLiteral("A"), QStringLiteral("B"), QStringLiteral("C")}
                                << QStringList{md, md, md};
    QTest::newRow("code keeps blank lines")
        << QStringLiteral("Text\n\n```js\na\n\nb\n```\n\nAfter")
        << QStringList{QStringLiteral("Text"), QStringLiteral("```js\na\n\nb\n```"), QStringLiteral("After")}
        << QStringList{md, code, md};
    QTest::newRow("fence interrupts a paragraph")
        << QStringLiteral("Look:\n```\nx\n```\nthen")
        << QStringList{QStringLiteral("Look:"), QStringLiteral("```\nx\n```"), QStringLiteral("then")}
        << QStringList{md, code, md};
    QTest::newRow("unclosed fence runs to the end")
        << QStringLiteral("```\na\n\n\nb") << QStringList{QStringLiteral("```\na\n\n\nb")} << QStringList{code};
    QTest::newRow("closing fence needs as many") << QStringLiteral("````\na\n```\n\nb\n````")
                                                 << QStringList{QStringLiteral("````\na\n```\n\nb\n````")}
                                                 << QStringList{code};
    QTest::newRow("tilde fence") << QStringLiteral("~~~\n```\n\n~~~\nz")
                                 << QStringList{QStringLiteral("~~~\n```\n\n~~~"), QStringLiteral("z")}
                                 << QStringList{code, md};
    QTest::newRow("inline triple backticks") << QStringLiteral("a ```b``` c\n\nd")
                                             << QStringList{QStringLiteral("a ```b``` c"), QStringLiteral("d")}
                                             << QStringList{md, md};
    QTest::newRow("backtick fence info without backticks") << QStringLiteral("``` a`b\nx")
                                                           << QStringList{QStringLiteral("``` a`b\nx")}
                                                           << QStringList{md};
    QTest::newRow("indented fence") << QStringLiteral("1. x\n\n    ```\n    a\n\n    ```\n")
                                    << QStringList{QStringLiteral("1. x"), QStringLiteral("    ```\n    a\n\n    ```")}
                                    << QStringList{md, code};
    QTest::newRow("crlf") << QStringLiteral("a\r\n\r\nb\r\n") << QStringList{QStringLiteral("a\r"), QStringLiteral("b\r")}
                          << QStringList{md, md};
    QTest::newRow("two backticks are text") << QStringLiteral("``\n\nx") << QStringList{QStringLiteral("``"), QStringLiteral("x")}
                                            << QStringList{md, md};
  }
  void split() {
    QFETCH(QString, text);
    QFETCH(QStringList, blocks);
    QFETCH(QStringList, kinds);
    const auto got = MessageBlocksModel::split(text);
    QCOMPARE(texts(got), blocks);
    QCOMPARE(::kinds(got), kinds);
    for (const auto& b : got) QCOMPARE(text.mid(b.start, b.text.size()), b.text);
  }

  void codeRoles_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("language");
    QTest::addColumn<QString>("code");
    QTest::newRow("closed") << QStringLiteral("```python extra\nx = 1\n\ny = 2\n```") << QStringLiteral("python")
                            << QStringLiteral("x = 1\n\ny = 2");
    QTest::newRow("open") << QStringLiteral("```cpp\nint a;") << QStringLiteral("cpp") << QStringLiteral("int a;");
    QTest::newRow("fence only") << QStringLiteral("```") << QString() << QString();
    QTest::newRow("empty body") << QStringLiteral("~~~\n~~~") << QString() << QString();
  }
  void codeRoles() {
    QFETCH(QString, text);
    QFETCH(QString, language);
    QFETCH(QString, code);
    MessageBlocksModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setText(text);
    QCOMPARE(m.rowCount(), 1);
    const QModelIndex i = m.index(0);
    QCOMPARE(m.data(i, MessageBlocksModel::KindRole).toString(), QStringLiteral("code"));
    QCOMPARE(m.data(i, MessageBlocksModel::LanguageRole).toString(), language);
    QCOMPARE(m.data(i, MessageBlocksModel::CodeRole).toString(), code);
    QCOMPARE(m.data(i, MessageBlocksModel::TextRole).toString(), text);
  }

  void roleNames() {
    MessageBlocksModel m;
    const auto names = m.roleNames();
    QCOMPARE(names.value(MessageBlocksModel::TextRole), QByteArray("text"));
    QCOMPARE(names.value(MessageBlocksModel::KindRole), QByteArray("kind"));
  }

  // The reply arrives in chunks of several sizes: rows are only appended, dataChanged only ever
  // touches the last row, never a reset or a removal, and the result equals the one-shot split.
  void streamingTouchesOnlyTheTail_data() {
    QTest::addColumn<int>("chunk");
    QTest::newRow("1 char") << 1;
    QTest::newRow("3 chars") << 3;
    QTest::newRow("7 chars") << 7;
    QTest::newRow("64 chars") << 64;
  }
  void streamingTouchesOnlyTheTail() {
    QFETCH(int, chunk);
    MessageBlocksModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy resets(&m, &QAbstractItemModel::modelReset);
    QSignalSpy removed(&m, &QAbstractItemModel::rowsRemoved);
    int badChanges = 0, badInserts = 0, changes = 0;
    connect(&m, &QAbstractItemModel::dataChanged, this, [&](const QModelIndex& a, const QModelIndex& b) {
      ++changes;
      if (a.row() != b.row() || a.row() != m.rowCount() - 1) ++badChanges;
    });
    connect(&m, &QAbstractItemModel::rowsAboutToBeInserted, this, [&](const QModelIndex&, int first, int) {
      if (first != m.rowCount()) ++badInserts;
    });
    const QString reply = longReply();
    for (qsizetype i = 0; i < reply.size(); i += chunk) m.append(reply.mid(i, chunk));
    QCOMPARE(resets.count(), 0);
    QCOMPARE(removed.count(), 0);
    QCOMPARE(badChanges, 0);
    QCOMPARE(badInserts, 0);
    QVERIFY(changes > 0);
    QCOMPARE(m.text(), reply);
    const auto oneShot = MessageBlocksModel::split(reply);
    QCOMPARE(texts(m.blocks()), texts(oneShot));
    QCOMPARE(kinds(m.blocks()), kinds(oneShot));
    QVERIFY(m.rowCount() > 30);
    QCOMPARE(m.data(m.index(m.rowCount() - 1), MessageBlocksModel::KindRole).toString(), QStringLiteral("code"));
  }

  void setTextDiffsWithoutReset() {
    MessageBlocksModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setText(QStringLiteral("a\n\nb\n\nc"));
    QCOMPARE(m.rowCount(), 3);
    QSignalSpy resets(&m, &QAbstractItemModel::modelReset);
    QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
    QSignalSpy removed(&m, &QAbstractItemModel::rowsRemoved);
    QSignalSpy count(&m, &MessageBlocksModel::countChanged);
    m.setText(QStringLiteral("a\n\nx"));
    QCOMPARE(texts(m.blocks()), (QStringList{QStringLiteral("a"), QStringLiteral("x")}));
    QCOMPARE(changed.count(), 1);
    QCOMPARE(changed.first().at(0).toModelIndex().row(), 1);
    QCOMPARE(removed.count(), 1);
    QCOMPARE(count.count(), 1);
    m.clear();
    QCOMPARE(m.rowCount(), 0);
    QCOMPARE(resets.count(), 0);
  }
};

QTEST_GUILESS_MAIN(TestMessageBlocksModel)
#include "test_message_blocks_model.moc"
