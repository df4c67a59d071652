// "Generate N answers": a button that opens a menu of 2..8 answers (chat.minAnswers ..
// chat.maxAnswers) and emits chosen(n); the answers then stream side by side as versions of the
// reply ("‹ 2/4 ›"). Keyboard: Tab reaches the button, Space or Enter opens the menu, the arrows
// pick a count, Enter generates, Esc closes. When several answers cannot be generated now (greedy
// sampling: every answer would be the same) the button stays reachable and says why: its tooltip,
// its accessible description and the menu's first line give chat.answersBlockedReason, and the
// counts are disabled.
import QtQuick
import QtQuick.Controls

IconButton {
    id: root
    // Overridable for tests (Qt Quick Test gives a fake `chat`).
    property var chatModel: chat
    property string actionText: qsTr("Generate several answers")
    readonly property string reason: chatModel.answersBlockedReason || ""
    readonly property bool available: reason === ""
    readonly property alias menu: answersMenu
    signal chosen(int n)

    objectName: "answersButton"
    iconName: "answers"
    iconSize: 14
    iconColor: Theme.muted
    opacity: available ? 1 : 0.55
    tip: available ? actionText : actionText + ": " + reason
    Accessible.description: reason
    Accessible.role: Accessible.ButtonMenu
    onClicked: answersMenu.popup(root, 0, root.height)
    Keys.onReturnPressed: answersMenu.popup(root, 0, root.height)
    Keys.onEnterPressed: answersMenu.popup(root, 0, root.height)

    Menu {
        id: answersMenu
        objectName: "answersMenu"
        width: Math.max(implicitWidth, 240)

        MenuItem {
            objectName: "answersReason"
            visible: !root.available
            height: visible ? implicitHeight : 0
            enabled: false
            text: root.reason
            Accessible.name: root.reason
            contentItem: Label {
                text: root.reason
                wrapMode: Text.Wrap
                color: Theme.muted
                width: 220
            }
        }
        Instantiator {
            model: Math.max(0, root.chatModel.maxAnswers - root.chatModel.minAnswers + 1)
            delegate: MenuItem {
                required property int index
                readonly property int count: root.chatModel.minAnswers + index
                objectName: "answers" + count
                text: qsTr("%1 answers").arg(count)
                enabled: root.available
                Accessible.name: qsTr("Generate %1 answers").arg(count)
                onTriggered: root.chosen(count)
            }
            onObjectAdded: (index, object) => answersMenu.insertItem(index + 1, object)
            onObjectRemoved: (index, object) => answersMenu.removeItem(object)
        }
    }
}
