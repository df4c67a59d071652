#include "qt_log_bridge.h"

#include <QString>
#include <spdlog/spdlog.h>

namespace cosmos::ui {
namespace {

void handler(QtMsgType type, const QMessageLogContext& context, const QString& message) {
  const QByteArray text = message.toUtf8();
  const char* category = context.category ? context.category : "qt";
  switch (type) {
    case QtDebugMsg: spdlog::debug("[{}] {}", category, text.constData()); break;
    case QtInfoMsg: spdlog::info("[{}] {}", category, text.constData()); break;
    case QtWarningMsg: spdlog::warn("[{}] {}", category, text.constData()); break;
    case QtCriticalMsg:
    case QtFatalMsg: spdlog::error("[{}] {}", category, text.constData()); break;
  }
}

}  // namespace

QtMessageHandler install_qt_log_bridge() { return qInstallMessageHandler(handler); }

}  // namespace cosmos::ui
