// The sidebar's search field: a magnifier, the text, and a clear button. Esc clears it (before the
// window's Esc shortcut, which would stop a streaming reply, sees the key).
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl

TextField {
    id: root
    placeholderText: qsTr("Search messages (Ctrl+F)")
    selectByMouse: true
    leftPadding: 30
    rightPadding: clearButton.visible ? 30 : 8
    Accessible.role: Accessible.EditableText
    Accessible.name: qsTr("Search messages")
    Accessible.searchEdit: true

    Keys.onShortcutOverride: (event) => { if (event.key === Qt.Key_Escape && root.text !== "") event.accepted = true }
    Keys.onEscapePressed: (event) => {
        if (root.text === "") { event.accepted = false; return }
        root.clear()
    }

    IconImage {
        anchors.left: parent.left
        anchors.leftMargin: 8
        anchors.verticalCenter: parent.verticalCenter
        source: "qrc:/icons/search.svg"
        sourceSize: Qt.size(16, 16)
        color: Theme.muted
    }
    IconButton {
        id: clearButton
        anchors.right: parent.right
        anchors.verticalCenter: parent.verticalCenter
        visible: root.text !== ""
        iconName: "close"
        iconSize: 12
        implicitWidth: 28
        implicitHeight: 28
        focusPolicy: Qt.NoFocus
        tip: qsTr("Clear the search (Esc)")
        onClicked: { root.clear(); root.forceActiveFocus() }
    }
}
