// The message box: Enter sends, Shift+Enter starts a new line, Esc stops a running reply. Send
// turns into Stop while a reply streams; Regenerate asks for a new version of the last reply.
// When sending is not possible, the reason (chat.blockedReason) is shown under the box.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ColumnLayout {
    id: root
    property bool canRegenerate: false
    // Overridable for tests (Qt Quick Test gives a fake `chat`).
    property var chatModel: chat
    readonly property string blockedReason: chatModel.busy ? "" : chatModel.blockedReason
    signal sent()

    function focusInput() { input.forceActiveFocus() }
    function setText(text) {
        input.text = text
        input.cursorPosition = input.length
        input.forceActiveFocus()
    }
    function send() {
        if (input.text.trim() === "" || !chatModel.canSend) return false
        if (!chatModel.send(input.text)) return false
        input.clear()
        sent()
        return true
    }
    // n answers at once: to the typed message (sent first), else to the last message.
    function generateAnswers(n) {
        if (input.text.trim() === "") return canRegenerate && chatModel.generateAnswers(n)
        if (!chatModel.sendForAnswers(input.text, n)) return false
        input.clear()
        sent()
        return true
    }

    spacing: 4

    Rectangle {
        Layout.fillWidth: true
        implicitHeight: Math.min(scroll.contentHeight, 220) + buttons.implicitHeight + 20
        radius: 14
        color: Theme.raised
        border.color: input.activeFocus ? Theme.accent : Theme.border
        border.width: input.activeFocus ? 1.5 : 1

        // A click anywhere in the box puts the cursor in the text.
        TapHandler { onTapped: input.forceActiveFocus() }

        ColumnLayout {
            anchors.fill: parent
            anchors.margins: 10
            anchors.topMargin: 8
            spacing: 4

            ScrollView {
                id: scroll
                Layout.fillWidth: true
                Layout.fillHeight: true
                Layout.preferredHeight: Math.min(contentHeight, 220)
                clip: true

                TextArea {
                    id: input
                    objectName: "composerInput"
                    wrapMode: TextEdit.Wrap
                    selectByMouse: true
                    placeholderText: root.blockedReason !== "" ? root.blockedReason
                                     : qsTr("Message Cosmos-Reason1 (Enter to send, Shift+Enter for a new line)")
                    placeholderTextColor: Theme.muted
                    color: Theme.text
                    font.pointSize: Theme.fontSize
                    background: null
                    leftPadding: 4
                    rightPadding: 4
                    topPadding: 4
                    bottomPadding: 4
                    Accessible.name: qsTr("Message")
                    Accessible.description: qsTr("Enter sends, Shift+Enter starts a new line, Escape stops the reply")

                    Keys.onReturnPressed: (event) => root.handleEnter(event)
                    Keys.onEnterPressed: (event) => root.handleEnter(event)
                    Keys.onEscapePressed: (event) => {
                        if (root.chatModel.busy) { root.chatModel.stop(); event.accepted = true }
                        else event.accepted = false
                    }
                }
            }

            RowLayout {
                id: buttons
                Layout.fillWidth: true
                spacing: 6
                Label {
                    text: root.chatModel.busy ? qsTr("Esc stops the reply") : ""
                    color: Theme.muted
                    font.pointSize: Theme.smallFontSize
                    Layout.fillWidth: true
                    elide: Text.ElideRight
                }
                IconButton {
                    objectName: "regenerateButton"
                    visible: root.canRegenerate && !root.chatModel.busy
                    iconName: "regenerate"
                    iconSize: 16
                    text: qsTr("Regenerate")
                    tip: qsTr("Generate a new version of the last reply")
                    enabled: root.chatModel.canSend
                    onClicked: root.chatModel.regenerate()
                }
                AnswersButton {
                    readonly property bool typed: input.text.trim() !== ""
                    chatModel: root.chatModel
                    visible: !root.chatModel.busy && (typed || root.canRegenerate)
                    iconSize: 16
                    enabled: root.chatModel.canSend
                    actionText: typed ? qsTr("Send and generate several answers") : qsTr("Generate several answers to the last message")
                    onChosen: (n) => root.generateAnswers(n)
                }
                RoundButton {
                    id: sendButton
                    objectName: "sendButton"
                    readonly property bool stopMode: root.chatModel.busy
                    implicitWidth: 36
                    implicitHeight: 36
                    icon.source: stopMode ? "qrc:/icons/stop.svg" : "qrc:/icons/send.svg"
                    icon.width: stopMode ? 14 : 18
                    icon.height: stopMode ? 14 : 18
                    icon.color: enabled ? Theme.accentText : Theme.muted
                    enabled: stopMode || (root.chatModel.canSend && input.text.trim() !== "")
                    focusPolicy: Qt.StrongFocus
                    Accessible.name: stopMode ? qsTr("Stop the reply") : qsTr("Send")
                    ToolTip.visible: hovered
                    ToolTip.delay: 600
                    ToolTip.text: stopMode ? qsTr("Stop (Esc)") : qsTr("Send (Enter)")
                    background: Rectangle {
                        radius: width / 2
                        color: sendButton.enabled ? (sendButton.down ? Qt.darker(Theme.accent, 1.15) : Theme.accent) : Theme.surface
                        border.color: sendButton.visualFocus ? Theme.text : "transparent"
                        border.width: 2
                    }
                    onClicked: stopMode ? root.chatModel.stop() : root.send()
                }
            }
        }
    }

    Label {
        visible: root.blockedReason !== ""
        text: root.blockedReason
        color: Theme.muted
        font.pointSize: Theme.smallFontSize
        wrapMode: Text.Wrap
        horizontalAlignment: Text.AlignHCenter
        Layout.fillWidth: true
        Accessible.role: Accessible.StaticText
        Accessible.name: text
    }

    function handleEnter(event) {
        if (event.modifiers & Qt.ShiftModifier) {
            event.accepted = false  // TextArea inserts the new line
            return
        }
        event.accepted = true
        send()
    }
}
