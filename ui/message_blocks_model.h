// MessageBlocksModel: one message's text split into Markdown blocks, so QML lays out each block
// separately and, while a reply streams, re-lays out only the tail.
//
// Splitting (split()): the text is cut at blank lines outside fenced code blocks. A fence is a
// line of at least three backticks (no backtick after them) or tildes, after any indentation; it
// runs to a closing line of at least as many of the same character, or to the end of the text.
// A fenced block is one "code" block, blank lines included, fences included in `text`. A fence
// line also ends the Markdown block before it. Every block starts outside a fence, so the blocks
// before the last never change when text is appended: append() re-splits only from the last
// block's start, updates that row (dataChanged) and appends new rows (beginInsertRows). setText()
// diffs against the current blocks (dataChanged / inserts / removes). The model never resets.
#pragma once

#include <QAbstractListModel>
#include <QList>
#include <QString>
#include <QStringView>

namespace cosmos::ui {

class MessageBlocksModel : public QAbstractListModel {
  Q_OBJECT
  Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

 public:
  enum Role {
    TextRole = Qt::UserRole + 1,  // QString: the block's Markdown (a code block with its fences)
    KindRole,                     // QString: "markdown" | "code"
    LanguageRole,                 // QString: a code block's info string's first word ("" if none)
    CodeRole,                     // QString: a code block's content without the fences
  };
  Q_ENUM(Role)

  struct Block {
    QString text;
    bool code = false;
    qsizetype start = 0;  // offset of the block's first character in the whole text
    bool operator==(const Block& other) const { return text == other.text && code == other.code; }
  };

  explicit MessageBlocksModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QHash<int, QByteArray> roleNames() const override;

  const QString& text() const { return text_; }
  const QList<Block>& blocks() const { return blocks_; }
  // Replaces the text (diffing the blocks; used when a message is loaded or its answer restarts).
  void setText(const QString& text);
  // Appends streamed text: only the last block changes, new blocks are appended.
  void append(const QString& text);
  void clear() { setText({}); }

  // The blocks of `text`; `base` is added to each block's start.
  static QList<Block> split(QStringView text, qsizetype base = 0);
  // A code block's language and content (empty for Markdown blocks).
  static QString codeLanguage(const Block& block);
  static QString codeContent(const Block& block);

 signals:
  void countChanged();

 private:
  // Makes blocks_[from..] equal to `next`, with dataChanged first (rows still in place), then
  // inserts or removes at the end.
  void replaceFrom(int from, const QList<Block>& next);

  QString text_;
  QList<Block> blocks_;
};

}  // namespace cosmos::ui
