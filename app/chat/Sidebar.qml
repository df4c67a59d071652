// The conversations, newest first: open, rename (F2 or the menu), delete (Delete or the menu) with
// an undo strip at the bottom, export (the menu). Above them the search field (Ctrl+F focuses it,
// Esc clears it): while it holds text the list shows `searchResults` (title and snippet, the
// matches in bold); choosing one opens that conversation on the branch of the matching message.
// The header's menu exports the open conversation or all of them and imports a file.
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
import QtQuick.Layouts

Rectangle {
    id: root
    color: Theme.sidebar
    property string currentTitle: ""
    signal openRequested(var id)
    signal newRequested()
    signal searchResultChosen(var conversationId, var messageId)
    signal exportRequested(var id)      // one conversation
    signal exportAllRequested()
    signal importRequested()

    function focusSearch() {
        searchField.forceActiveFocus()
        searchField.selectAll()
    }

    Binding { target: searchResults; property: "highlightColor"; value: "" + Theme.accent }

    function relativeTime(date) {
        if (!date) return ""
        const d = new Date(date)
        const seconds = (Date.now() - d.getTime()) / 1000
        if (seconds < 60) return qsTr("just now")
        if (seconds < 3600) return qsTr("%1 min ago").arg(Math.floor(seconds / 60))
        const today = new Date()
        if (d.toDateString() === today.toDateString()) return d.toLocaleTimeString(Qt.locale(), Locale.ShortFormat)
        const yesterday = new Date(today.getTime() - 86400000)
        if (d.toDateString() === yesterday.toDateString()) return qsTr("yesterday")
        return d.toLocaleDateString(Qt.locale(), Locale.ShortFormat)
    }

    function removeRow(row) {
        const id = conversations.idAt(row)
        if (!conversations.remove(row)) return
        if (id === chat.conversationId) chat.newConversation()
        undoTimer.restart()
    }

    Connections {
        target: chat
        function onConversationIdChanged() {
            const row = conversations.rowOf(chat.conversationId)
            // From the model: the row's delegate may not exist (scrolled away, or the search shown).
            root.currentTitle = conversations.titleOf(chat.conversationId)
            if (row >= 0) list.currentIndex = row
        }
    }

    ColumnLayout {
        anchors.fill: parent
        spacing: 0

        RowLayout {
            Layout.fillWidth: true
            Layout.preferredHeight: 48
            Layout.leftMargin: 14
            Layout.rightMargin: 6
            spacing: 8
            Image {
                source: "qrc:/cosmos-chat.svg"
                sourceSize: Qt.size(24, 24)
                Layout.preferredWidth: 24
                Layout.preferredHeight: 24
                Accessible.ignored: true
            }
            Label {
                text: "Cosmos Chat"
                font.pointSize: Theme.fontSize + 1
                font.weight: Font.DemiBold
                color: Theme.text
                Layout.fillWidth: true
            }
            IconButton {
                id: transferButton
                iconName: "more"
                tip: qsTr("Export and import")
                onClicked: transferMenu.popup(this, 0, height)
                Menu {
                    id: transferMenu
                    width: 320
                    ShortcutMenuItem {
                        text: qsTr("Export this conversation…")
                        shortcutText: "Ctrl+E"
                        icon.source: "qrc:/icons/upload.svg"
                        enabled: chat.conversationId > 0
                        onTriggered: root.exportRequested(chat.conversationId)
                    }
                    ShortcutMenuItem {
                        text: qsTr("Export all conversations…")
                        shortcutText: "Ctrl+Shift+E"
                        icon.source: "qrc:/icons/upload.svg"
                        enabled: conversations.count > 0
                        onTriggered: root.exportAllRequested()
                    }
                    ShortcutMenuItem {
                        text: qsTr("Import conversations…")
                        shortcutText: "Ctrl+O"
                        icon.source: "qrc:/icons/download.svg"
                        onTriggered: root.importRequested()
                    }
                }
            }
            IconButton {
                iconName: "new-chat"
                tip: qsTr("New conversation (Ctrl+N)")
                onClicked: root.newRequested()
            }
        }
        Rectangle { Layout.fillWidth: true; Layout.preferredHeight: 1; color: Theme.border }

        SearchField {
            id: searchField
            Layout.fillWidth: true
            Layout.margins: 8
            Layout.bottomMargin: 2
            onTextChanged: searchResults.query = text
            onAccepted: if (results.count > 0) results.choose(Math.max(0, results.currentIndex))
            Keys.onDownPressed: if (results.visible && results.count > 0) { results.currentIndex = 0; results.forceActiveFocus() }
        }

        ListView {
            id: results
            visible: searchResults.active
            Layout.fillWidth: true
            Layout.fillHeight: true
            Layout.topMargin: 4
            clip: true
            model: searchResults
            spacing: 1
            keyNavigationEnabled: true
            activeFocusOnTab: true
            boundsBehavior: Flickable.StopAtBounds
            ScrollBar.vertical: ScrollBar { policy: ScrollBar.AsNeeded }
            Accessible.role: Accessible.List
            Accessible.name: qsTr("Search results")
            onCountChanged: currentIndex = -1

            function choose(row) {
                if (row < 0 || row >= count) return
                currentIndex = row
                root.searchResultChosen(searchResults.conversationIdAt(row), searchResults.messageIdAt(row))
            }
            Keys.onShortcutOverride: (event) => { if (event.key === Qt.Key_Escape) event.accepted = true }
            Keys.onEscapePressed: { searchField.text = ""; searchField.forceActiveFocus() }
            Keys.onReturnPressed: choose(currentIndex)
            Keys.onEnterPressed: choose(currentIndex)
            Keys.onSpacePressed: choose(currentIndex)
            Keys.onUpPressed: (event) => {
                if (currentIndex <= 0) searchField.forceActiveFocus()
                else event.accepted = false
            }

            delegate: SearchResultDelegate {
                width: ListView.view.width - 12
                x: 6
                isCurrent: conversationId === chat.conversationId
                onChosen: results.choose(index)
            }

            Label {
                anchors.centerIn: parent
                width: parent.width - 40
                visible: results.count === 0
                text: qsTr("No messages match “%1”.").arg(searchResults.query)
                horizontalAlignment: Text.AlignHCenter
                wrapMode: Text.Wrap
                textFormat: Text.PlainText
                color: Theme.muted
            }
        }

        ListView {
            id: list
            visible: !searchResults.active
            Layout.fillWidth: true
            Layout.fillHeight: true
            Layout.topMargin: 6
            clip: true
            model: conversations
            spacing: 1
            keyNavigationEnabled: true
            activeFocusOnTab: true
            boundsBehavior: Flickable.StopAtBounds
            ScrollBar.vertical: ScrollBar { policy: ScrollBar.AsNeeded }
            Accessible.role: Accessible.List
            Accessible.name: qsTr("Conversations")

            delegate: ItemDelegate {
                id: item
                required property int index
                required property var conversationId
                required property string title
                required property var updated
                required property int messageCount
                readonly property bool isCurrent: conversationId === chat.conversationId
                readonly property string shownTitle: title !== "" ? title : qsTr("New conversation")
                property bool editing: false

                width: ListView.view.width - 12
                x: 6
                height: 52
                highlighted: isCurrent
                hoverEnabled: true
                focusPolicy: Qt.StrongFocus
                Accessible.name: shownTitle
                Accessible.description: root.relativeTime(updated)

                onIsCurrentChanged: if (isCurrent) root.currentTitle = title
                onTitleChanged: if (isCurrent) root.currentTitle = title
                Component.onCompleted: if (isCurrent) root.currentTitle = title
                onClicked: { list.currentIndex = index; root.openRequested(conversationId) }
                Keys.onReturnPressed: root.openRequested(conversationId)
                Keys.onPressed: (event) => {
                    if (event.key === Qt.Key_F2) { editing = true; event.accepted = true }
                    else if (event.key === Qt.Key_Delete) { root.removeRow(index); event.accepted = true }
                }

                background: Rectangle {
                    radius: Theme.radius
                    color: item.isCurrent ? Theme.selected : item.hovered ? Theme.hover : "transparent"
                    border.color: item.visualFocus ? Theme.accent : "transparent"
                }
                contentItem: RowLayout {
                    spacing: 4
                    ColumnLayout {
                        visible: !item.editing
                        spacing: 1
                        Layout.fillWidth: true
                        Label {
                            text: item.shownTitle
                            textFormat: Text.PlainText  // a title is the user's text: "<b>" stays text
                            color: Theme.text
                            font.weight: item.isCurrent ? Font.DemiBold : Font.Normal
                            elide: Text.ElideRight
                            Layout.fillWidth: true
                        }
                        Label {
                            text: root.relativeTime(item.updated)
                                  + (item.messageCount > 0 ? " · " + (item.messageCount === 1 ? qsTr("1 message") : qsTr("%1 messages").arg(item.messageCount)) : "")
                            color: Theme.muted
                            font.pointSize: Theme.smallFontSize
                            elide: Text.ElideRight
                            Layout.fillWidth: true
                        }
                    }
                    TextField {
                        id: renameField
                        visible: item.editing
                        Layout.fillWidth: true
                        text: item.title
                        selectByMouse: true
                        Accessible.name: qsTr("New title")
                        onVisibleChanged: if (visible) { text = item.title; selectAll(); forceActiveFocus() }
                        onAccepted: { conversations.rename(item.index, text); item.editing = false; item.forceActiveFocus() }
                        Keys.onEscapePressed: { item.editing = false; item.forceActiveFocus() }
                        onActiveFocusChanged: if (!activeFocus && item.editing) item.editing = false
                    }
                    IconButton {
                        visible: !item.editing && (item.hovered || item.isCurrent || menu.visible)
                        iconName: "more"
                        iconSize: 16
                        tip: qsTr("Rename, export or delete")
                        onClicked: menu.popup(this, 0, height)
                    }
                }
                Menu {
                    id: menu
                    MenuItem {
                        text: qsTr("Rename")
                        icon.source: "qrc:/icons/edit.svg"
                        icon.color: Theme.text
                        onTriggered: item.editing = true
                    }
                    MenuItem {
                        text: qsTr("Export…")
                        icon.source: "qrc:/icons/upload.svg"
                        icon.color: Theme.text
                        onTriggered: root.exportRequested(item.conversationId)
                    }
                    MenuItem {
                        text: qsTr("Delete")
                        icon.source: "qrc:/icons/trash.svg"
                        icon.color: Theme.danger
                        onTriggered: root.removeRow(item.index)
                    }
                }
                TapHandler {
                    acceptedButtons: Qt.RightButton
                    onTapped: menu.popup()
                }
            }

            Label {
                anchors.centerIn: parent
                width: parent.width - 40
                visible: list.count === 0
                text: qsTr("No conversations yet.\nYour chats are saved here.")
                horizontalAlignment: Text.AlignHCenter
                wrapMode: Text.Wrap
                color: Theme.muted
            }
        }

        // Undo strip after a delete.
        Rectangle {
            Layout.fillWidth: true
            Layout.margins: 8
            visible: conversations.canUndo && undoTimer.running
            implicitHeight: undoRow.implicitHeight + 12
            radius: Theme.radius
            color: Theme.raised
            border.color: Theme.border
            Accessible.role: Accessible.AlertMessage
            Accessible.name: undoLabel.text
            RowLayout {
                id: undoRow
                anchors.fill: parent
                anchors.leftMargin: 10
                anchors.rightMargin: 4
                IconImage {
                    source: "qrc:/icons/trash.svg"
                    sourceSize: Qt.size(16, 16)
                    color: Theme.muted
                }
                Label {
                    id: undoLabel
                    text: qsTr("Deleted “%1”").arg(conversations.undoTitle !== "" ? conversations.undoTitle : qsTr("New conversation"))
                    textFormat: Text.PlainText
                    color: Theme.text
                    elide: Text.ElideRight
                    Layout.fillWidth: true
                }
                Button {
                    text: qsTr("Undo")
                    flat: true
                    Accessible.name: qsTr("Undo delete")
                    onClicked: { conversations.undoRemove(); if (!conversations.canUndo) undoTimer.stop() }
                }
            }
        }
        Timer { id: undoTimer; interval: 10000 }
        Shortcut {
            sequences: [StandardKey.Undo]
            enabled: conversations.canUndo && undoTimer.running
            onActivated: conversations.undoRemove()
        }
    }
}
