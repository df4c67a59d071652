// Routes Qt's messages (qDebug, qWarning, QML errors) into the engine's spdlog logger, so the app
// writes one log file.
#pragma once

#include <QtGlobal>

namespace cosmos::ui {

// Installs the handler; returns the previous one (tests restore it).
QtMessageHandler install_qt_log_bridge();

}  // namespace cosmos::ui
