// The window: conversations on the left, the chat (or the welcome page, or the settings) in the
// middle, the live panel on the right, banners for errors, and the model-loading overlay.
// Context properties (main.cpp): engine, chat, conversations, searchResults, transfer, stats,
// settings, download, appInfo.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import CosmosChat.Backend

ApplicationWindow {
    id: window
    width: Math.min(1240, Screen.desktopAvailableWidth)
    height: Math.min(820, Screen.desktopAvailableHeight)
    minimumWidth: 720
    minimumHeight: 480
    visible: true
    title: currentTitle !== "" ? currentTitle + " — Cosmos Chat" : "Cosmos Chat"
    color: Theme.window
    font.pointSize: settings.fontSize

    property bool sidebarOpen: width >= 860
    property bool panelOpen: width >= 1180
    property bool settingsOpen: false
    property bool downloadOpen: false  // the download page, over the welcome page or the settings
    onSettingsOpenChanged: downloadOpen = false
    property string currentTitle: ""
    readonly property bool loading: engine.state === EngineHost.Loading
    // Without a model the welcome page shows, unless a conversation was opened: past conversations
    // stay readable (the composer then says a model is needed).
    readonly property bool showWelcome: !engine.hasModel && !loading && chat.conversationId <= 0
    readonly property bool demoLoaded: engine.hasModel && settings.isDemoModel(engine.modelDir)

    // The theme: "system" follows the desktop's palette (read once at start: Qt 6.4 has no
    // color-scheme change signal).
    Binding { target: Theme; property: "dark"; value: settings.theme === "dark" || (settings.theme === "system" && appInfo.systemDark) }
    Binding { target: Theme; property: "fontSize"; value: settings.fontSize }

    palette.window: Theme.window
    palette.windowText: Theme.text
    palette.base: Theme.raised
    palette.alternateBase: Theme.surface
    palette.text: Theme.text
    palette.button: Theme.surface
    palette.buttonText: Theme.text
    palette.highlight: Theme.accent
    palette.highlightedText: Theme.accentText
    palette.placeholderText: Theme.muted
    palette.mid: Theme.border
    palette.midlight: Theme.hover
    palette.dark: Theme.border
    palette.light: Theme.raised
    palette.shadow: Theme.dark ? "#000000" : "#b0b4ba"
    palette.toolTipBase: Theme.raised
    palette.toolTipText: Theme.text
    palette.link: Theme.link
    palette.brightText: Theme.text
    palette.disabled.text: Theme.muted
    palette.disabled.buttonText: Theme.muted
    palette.disabled.windowText: Theme.muted

    // Loads settings.modelDir with the settings' precision, context and KV cache (after a change in the
    // settings or the welcome page).
    function loadFromSettings() {
        if (settings.modelDir !== "")
            engine.loadModel(settings.modelDir, "auto", settings.resolvedPrecision(), settings.contextLength,
                             settings.keepQuantizedWeights, settings.resolvedKvCache())
    }
    function newChat() {
        settingsOpen = false
        chat.newConversation()
        chatView.focusComposer()
    }

    Shortcut { sequences: [StandardKey.New]; onActivated: window.newChat() }
    Shortcut { sequence: "Ctrl+,"; onActivated: window.settingsOpen = !window.settingsOpen }
    Shortcut { sequence: "Ctrl+B"; onActivated: window.sidebarOpen = !window.sidebarOpen }
    Shortcut { sequence: "Ctrl+I"; onActivated: window.panelOpen = !window.panelOpen }
    Shortcut { sequence: "Ctrl+L"; onActivated: { window.settingsOpen = false; chatView.focusComposer() } }
    Shortcut { sequences: [StandardKey.Quit]; onActivated: Qt.quit() }
    Shortcut {
        sequence: "Ctrl+F"
        onActivated: { window.sidebarOpen = true; sidebar.focusSearch() }
    }
    Shortcut {
        sequence: "Ctrl+E"
        enabled: chat.conversationId > 0
        onActivated: transferDialogs.exportConversation(chat.conversationId)
    }
    Shortcut {
        sequence: "Ctrl+Shift+E"
        enabled: conversations.count > 0
        onActivated: transferDialogs.exportAll()
    }
    Shortcut { sequence: "Ctrl+O"; onActivated: transferDialogs.importFile() }

    TransferDialogs { id: transferDialogs }
    Connections {
        target: transfer
        // An import opens the first conversation it added.
        function onImported(firstConversationId, count) {
            window.settingsOpen = false
            chat.openConversation(firstConversationId)
        }
    }
    Shortcut {
        sequence: "Esc"
        enabled: window.settingsOpen && !window.loading
        onActivated: window.settingsOpen = false
    }
    Shortcut {
        sequence: "Esc"
        enabled: chat.busy && !window.settingsOpen && !window.loading
        onActivated: chat.stop()
    }

    RowLayout {
        anchors.fill: parent
        spacing: 0

        Sidebar {
            id: sidebar
            visible: window.sidebarOpen
            Layout.preferredWidth: Theme.sidebarWidth
            Layout.fillHeight: true
            onOpenRequested: (id) => { window.settingsOpen = false; chat.openConversation(id); chatView.focusComposer() }
            onNewRequested: window.newChat()
            onSearchResultChosen: (conversationId, messageId) => {
                window.settingsOpen = false
                chat.openMessage(conversationId, messageId)
            }
            onExportRequested: (id) => transferDialogs.exportConversation(id)
            onExportAllRequested: transferDialogs.exportAll()
            onImportRequested: transferDialogs.importFile()
            onCurrentTitleChanged: window.currentTitle = currentTitle
        }
        Rectangle { visible: window.sidebarOpen; Layout.preferredWidth: 1; Layout.fillHeight: true; color: Theme.border }

        ColumnLayout {
            Layout.fillWidth: true
            Layout.fillHeight: true
            spacing: 0

            // Top bar.
            Rectangle {
                Layout.fillWidth: true
                Layout.preferredHeight: 48
                color: Theme.window
                RowLayout {
                    anchors.fill: parent
                    anchors.leftMargin: 6
                    anchors.rightMargin: 6
                    spacing: 2
                    IconButton {
                        iconName: "sidebar"
                        tip: window.sidebarOpen ? qsTr("Hide conversations (Ctrl+B)") : qsTr("Show conversations (Ctrl+B)")
                        checkable: true
                        checked: window.sidebarOpen
                        onClicked: window.sidebarOpen = !window.sidebarOpen
                    }
                    IconButton {
                        visible: !window.sidebarOpen
                        iconName: "new-chat"
                        tip: qsTr("New conversation (Ctrl+N)")
                        onClicked: window.newChat()
                    }
                    Label {
                        text: window.downloadOpen ? qsTr("Download the model")
                              : window.settingsOpen ? qsTr("Settings")
                              : window.showWelcome ? qsTr("Welcome")
                              : (window.currentTitle !== "" ? window.currentTitle : qsTr("New conversation"))
                        textFormat: Text.PlainText
                        font.pointSize: Theme.fontSize + 1
                        font.weight: Font.DemiBold
                        color: Theme.text
                        elide: Text.ElideRight
                        Layout.fillWidth: true
                        Layout.leftMargin: 8
                    }
                    ModelChip {
                        Layout.alignment: Qt.AlignVCenter
                        onClicked: window.settingsOpen = true
                    }
                    IconButton {
                        iconName: "activity"
                        tip: window.panelOpen ? qsTr("Hide the live panel (Ctrl+I)") : qsTr("Show the live panel (Ctrl+I)")
                        checkable: true
                        checked: window.panelOpen
                        onClicked: window.panelOpen = !window.panelOpen
                    }
                    IconButton {
                        iconName: "settings"
                        tip: qsTr("Settings (Ctrl+,)")
                        checkable: true
                        checked: window.settingsOpen
                        onClicked: window.settingsOpen = !window.settingsOpen
                    }
                }
                Rectangle { anchors.bottom: parent.bottom; width: parent.width; height: 1; color: Theme.border }
            }

            // Banners.
            ColumnLayout {
                Layout.fillWidth: true
                Layout.fillHeight: false  // a nested layout fills by default
                Layout.margins: visibleChildren.length > 0 ? 8 : 0
                Layout.bottomMargin: 0
                spacing: 6
                Banner {
                    Layout.fillWidth: true
                    text: appInfo.recoveryNotice
                    kind: "warning"
                    onDismissed: text = ""
                }
                Banner {
                    Layout.fillWidth: true
                    text: appInfo.storeError
                    onDismissed: text = ""
                }
                Banner {
                    Layout.fillWidth: true
                    text: appInfo.startupError
                    onDismissed: text = ""
                }
                Banner {
                    Layout.fillWidth: true
                    text: engine.errorText
                    actionText: settings.modelDir !== "" && !engine.hasModel ? qsTr("Retry") : ""
                    onAction: window.loadFromSettings()
                    onDismissed: engine.clearError()
                }
                Banner {
                    Layout.fillWidth: true
                    text: chat.errorText
                    onDismissed: chat.clearError()
                }
                Banner {
                    Layout.fillWidth: true
                    text: transfer.statusText
                    kind: transfer.statusIsError ? "error" : "info"
                    onDismissed: transfer.clearStatus()
                    onTextChanged: if (text !== "" && !transfer.statusIsError) transferNoteTimer.restart()
                    Timer { id: transferNoteTimer; interval: 10000; onTriggered: if (!transfer.statusIsError) transfer.clearStatus() }
                }
                Banner {
                    id: demoBanner
                    property bool dismissedOnce: false
                    Layout.fillWidth: true
                    kind: "info"
                    text: window.demoLoaded && !dismissedOnce && !window.settingsOpen
                          ? qsTr("Demo model: random weights, so its replies are meaningless text. Download Cosmos-Reason1-7B for real answers.")
                          : ""
                    onDismissed: dismissedOnce = true
                }
            }

            StackLayout {
                Layout.fillWidth: true
                Layout.fillHeight: true
                currentIndex: window.downloadOpen ? 3 : window.settingsOpen ? 2 : window.showWelcome ? 0 : 1

                WelcomePage {
                    onLoadRequested: window.loadFromSettings()
                    onDownloadRequested: window.downloadOpen = true
                }
                ChatView {
                    id: chatView
                }
                SettingsPage {
                    onCloseRequested: window.settingsOpen = false
                    onReloadRequested: window.loadFromSettings()
                    onDownloadRequested: window.downloadOpen = true
                }
                DownloadPage {
                    onCloseRequested: window.downloadOpen = false
                    onLoadRequested: { window.settingsOpen = false; window.downloadOpen = false; window.loadFromSettings() }
                    Connections { target: chat; function onConversationIdChanged() { window.downloadOpen = false } }
                }
            }
        }

        Rectangle { visible: window.panelOpen; Layout.preferredWidth: 1; Layout.fillHeight: true; color: Theme.border }
        LivePanel {
            visible: window.panelOpen
            Layout.preferredWidth: Theme.panelWidth
            Layout.fillHeight: true
        }
    }

    LoadOverlay {
        anchors.fill: parent
        visible: window.loading
        onVisibleChanged: if (!visible && !window.settingsOpen) chatView.focusComposer()
    }

    Component.onCompleted: {
        requestActivate()
        chatView.focusComposer()
    }
}
