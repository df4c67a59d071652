// The objects Main.qml uses as context properties, under the names it expects, set in one place for
// the app (app/chat/main.cpp) and the UI streaming benchmark (tests/ui/bench/bench_ui_stream.cpp).
#pragma once

#include <QVariantMap>

class QQmlContext;

namespace cosmos::ui {

class ChatViewModel;
class ConversationListModel;
class ConversationTransfer;
class DownloadViewModel;
class EngineHost;
class SearchResultsModel;
class SettingsViewModel;
class StatsViewModel;

struct AppContextObjects {
  EngineHost* engine = nullptr;
  ChatViewModel* chat = nullptr;
  ConversationListModel* conversations = nullptr;
  SearchResultsModel* searchResults = nullptr;
  ConversationTransfer* transfer = nullptr;
  StatsViewModel* stats = nullptr;
  SettingsViewModel* settings = nullptr;
  DownloadViewModel* download = nullptr;
  QVariantMap appInfo;  // version, dataDir, logFile, databaseFile, recoveryNotice, storeError, ...
};

// Registers EngineHost's State enum (import CosmosChat.Backend) and sets the context properties.
void exposeToQml(QQmlContext* context, const AppContextObjects& objects);

}  // namespace cosmos::ui
