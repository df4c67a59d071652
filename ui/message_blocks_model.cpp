#include "message_blocks_model.h"

#include <algorithm>

namespace cosmos::ui {
namespace {

bool isBlank(QStringView line) {
  for (QChar c : line)
    if (!c.isSpace()) return false;
  return true;
}

// A fence line: optional indentation, then >= 3 of '`' or '~'. Returns the run length (0: not a
// fence) and sets `fenceChar` and `rest` (what follows the run).
int fenceRun(QStringView line, QChar* fenceChar, QStringView* rest) {
  qsizetype i = 0;
  while (i < line.size() && (line[i] == u' ' || line[i] == u'\t')) ++i;
  if (i >= line.size() || (line[i] != u'`' && line[i] != u'~')) return 0;
  const QChar c = line[i];
  qsizetype n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  if (n < 3) return 0;
  *fenceChar = c;
  *rest = line.mid(i + n);
  return static_cast<int>(n);
}

bool opensFence(QStringView line, QChar* fenceChar, int* run) {
  QStringView rest;
  const int n = fenceRun(line, fenceChar, &rest);
  if (n == 0) return false;
  if (*fenceChar == u'`' && rest.contains(u'`')) return false;  // inline code, not a fence
  *run = n;
  return true;
}

bool closesFence(QStringView line, QChar fenceChar, int run) {
  QChar c;
  QStringView rest;
  const int n = fenceRun(line, &c, &rest);
  return n >= run && c == fenceChar && isBlank(rest);
}

}  // namespace

MessageBlocksModel::MessageBlocksModel(QObject* parent) : QAbstractListModel(parent) {}

int MessageBlocksModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(blocks_.size());
}

QVariant MessageBlocksModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Block& b = blocks_[index.row()];
  switch (role) {
    case Qt::DisplayRole:
    case TextRole: return b.text;
    case KindRole: return b.code ? QStringLiteral("code") : QStringLiteral("markdown");
    case LanguageRole: return codeLanguage(b);
    case CodeRole: return codeContent(b);
    default: return {};
  }
}

QHash<int, QByteArray> MessageBlocksModel::roleNames() const {
  return {{TextRole, "text"}, {KindRole, "kind"}, {LanguageRole, "language"}, {CodeRole, "code"}};
}

QList<MessageBlocksModel::Block> MessageBlocksModel::split(QStringView text, qsizetype base) {
  QList<Block> out;
  qsizetype blockStart = -1, blockEnd = 0;  // the open block: [blockStart, blockEnd) of `text`
  bool inFence = false, blockIsCode = false;
  QChar fenceChar;
  int fenceLength = 0;
  auto finish = [&] {
    if (blockStart < 0) return;
    out.append(Block{text.mid(blockStart, blockEnd - blockStart).toString(), blockIsCode, base + blockStart});
    blockStart = -1;
  };
  qsizetype pos = 0;
  while (pos < text.size()) {
    qsizetype nl = text.indexOf(u'\n', pos);
    const qsizetype lineEnd = nl < 0 ? text.size() : nl;
    const QStringView line = text.mid(pos, lineEnd - pos);
    if (inFence) {
      blockEnd = lineEnd;
      if (closesFence(line, fenceChar, fenceLength)) {
        inFence = false;
        finish();
      }
    } else if (isBlank(line)) {
      finish();
    } else if (opensFence(line, &fenceChar, &fenceLength)) {
      finish();
      inFence = true;
      blockIsCode = true;
      blockStart = pos;
      blockEnd = lineEnd;
    } else {
      if (blockStart < 0) {
        blockStart = pos;
        blockIsCode = false;
      }
      blockEnd = lineEnd;
    }
    pos = nl < 0 ? text.size() : nl + 1;
  }
  finish();
  return out;
}

QString MessageBlocksModel::codeLanguage(const Block& block) {
  if (!block.code) return {};
  const qsizetype nl = block.text.indexOf(u'\n');
  const QStringView first = QStringView(block.text).left(nl < 0 ? block.text.size() : nl);
  QChar c;
  QStringView rest;
  if (fenceRun(first, &c, &rest) == 0) return {};
  const QString info = rest.trimmed().toString();
  return info.section(u' ', 0, 0, QString::SectionSkipEmpty);
}

QString MessageBlocksModel::codeContent(const Block& block) {
  if (!block.code) return {};
  const qsizetype firstNl = block.text.indexOf(u'\n');
  if (firstNl < 0) return {};  // only the opening fence so far
  QStringView body = QStringView(block.text).mid(firstNl + 1);
  // Drop the closing fence (the last line) when there is one.
  const qsizetype lastNl = body.lastIndexOf(u'\n');
  const QStringView lastLine = lastNl < 0 ? body : body.mid(lastNl + 1);
  QChar openChar;
  QStringView rest;
  const int openRun = fenceRun(QStringView(block.text).left(firstNl), &openChar, &rest);
  if (closesFence(lastLine, openChar, openRun)) body = lastNl < 0 ? QStringView() : body.left(lastNl);
  return body.toString();
}

void MessageBlocksModel::replaceFrom(int from, const QList<Block>& next) {
  const int oldCount = static_cast<int>(blocks_.size());
  const int common = std::min(oldCount - from, static_cast<int>(next.size()));
  int firstChanged = -1, lastChanged = -1;
  for (int i = 0; i < common; ++i) {
    Block& b = blocks_[from + i];
    b.start = next[i].start;
    if (b == next[i]) continue;
    b = next[i];
    if (firstChanged < 0) firstChanged = from + i;
    lastChanged = from + i;
  }
  if (firstChanged >= 0) emit dataChanged(index(firstChanged), index(lastChanged));
  const int newCount = from + static_cast<int>(next.size());
  if (newCount > oldCount) {
    beginInsertRows({}, oldCount, newCount - 1);
    for (int i = common; i < next.size(); ++i) blocks_.append(next[i]);
    endInsertRows();
    emit countChanged();
  } else if (newCount < oldCount) {
    beginRemoveRows({}, newCount, oldCount - 1);
    blocks_.resize(newCount);
    endRemoveRows();
    emit countChanged();
  }
}

void MessageBlocksModel::setText(const QString& text) {
  text_ = text;
  replaceFrom(0, split(text_));
}

void MessageBlocksModel::append(const QString& text) {
  if (text.isEmpty()) return;
  text_ += text;
  // Every block starts outside a fence: re-splitting from the last block's start is exact.
  const int last = blocks_.isEmpty() ? 0 : static_cast<int>(blocks_.size()) - 1;
  const qsizetype start = blocks_.isEmpty() ? 0 : blocks_[last].start;
  replaceFrom(last, split(QStringView(text_).mid(start), start));
}

}  // namespace cosmos::ui
