#include "app_context.h"

#include <QQmlContext>
#include <QtQml/qqml.h>

#include "chat_view_model.h"
#include "conversation_list_model.h"
#include "conversation_transfer.h"
#include "download_view_model.h"
#include "engine_host.h"
#include "search_results_model.h"
#include "settings_view_model.h"
#include "stats_view_model.h"

namespace cosmos::ui {

void exposeToQml(QQmlContext* context, const AppContextObjects& o) {
  // EngineHost's State enum for QML (EngineHost.Ready, ...).
  qmlRegisterUncreatableType<EngineHost>("CosmosChat.Backend", 1, 0, "EngineHost",
                                         QStringLiteral("use the engine context property"));
  context->setContextProperty(QStringLiteral("engine"), o.engine);
  context->setContextProperty(QStringLiteral("chat"), o.chat);
  context->setContextProperty(QStringLiteral("conversations"), o.conversations);
  context->setContextProperty(QStringLiteral("searchResults"), o.searchResults);
  context->setContextProperty(QStringLiteral("transfer"), o.transfer);
  context->setContextProperty(QStringLiteral("stats"), o.stats);
  context->setContextProperty(QStringLiteral("settings"), o.settings);
  context->setContextProperty(QStringLiteral("download"), o.download);
  context->setContextProperty(QStringLiteral("appInfo"), o.appInfo);
}

}  // namespace cosmos::ui
