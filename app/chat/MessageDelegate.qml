// One message. The user's text sits in a bubble on the right (editable: a new version is sent as
// a sibling); the assistant's reply fills the column: its reasoning in a collapsible block, the
// answer as Markdown blocks, then the reply's statistics and actions. A message with other
// versions (siblingCount > 1) shows a "‹ 2/3 ›" switcher (SiblingSwitcher), also while several
// answers stream (chat.canSwitchVersions). The last reply offers Regenerate and "Generate N
// answers" (AnswersButton). A reply that failed says why under its text.
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
import QtQuick.Layouts

Item {
    id: root
    required property int index
    required property var messageId
    required property string role
    required property string content
    required property string reasoning
    required property bool thinking
    required property bool streaming
    required property real thoughtSeconds
    required property var stats
    required property var blocks
    required property int siblingIndex
    required property int siblingCount
    required property string error
    property bool isLast: false
    property bool editing: false

    readonly property bool isUser: role === "user"
    readonly property real columnWidth: Math.min(width - 48, Theme.contentMaxWidth)
    readonly property bool showActions: hover.hovered || isLast || editing

    implicitHeight: body.implicitHeight + 8
    height: implicitHeight
    Accessible.role: Accessible.ListItem
    // Short: screen readers read the blocks themselves; a 70 kB name would be rebuilt per batch.
    Accessible.name: (isUser ? qsTr("You: ") : qsTr("Cosmos: ")) + (content.length > 200 ? content.slice(0, 200) + "…" : content)

    HoverHandler { id: hover }

    function statsText() {
        const s = stats || {}
        const parts = []
        if (s.generated_tokens !== undefined) parts.push(s.generated_tokens === 1 ? qsTr("1 token") : qsTr("%1 tokens").arg(s.generated_tokens))
        if (s.decode_tok_per_s > 0) parts.push(qsTr("%1 tok/s").arg(Number(s.decode_tok_per_s).toFixed(1)))
        if (s.ttft_s > 0) parts.push(qsTr("first token %1 s").arg(Number(s.ttft_s).toFixed(2)))
        if (s.stop_reason === "cancelled") parts.push(qsTr("stopped"))
        else if (s.stop_reason === "max_tokens") parts.push(qsTr("hit the token limit"))
        else if (s.stop_reason === "context_full") parts.push(qsTr("context full"))
        else if (s.stop_reason === "interrupted") parts.push(qsTr("interrupted: the app closed while this reply was written"))
        return parts.join(" · ")
    }

    Item {
        id: body
        width: root.columnWidth
        anchors.horizontalCenter: parent.horizontalCenter
        implicitHeight: root.isUser ? userColumn.implicitHeight : assistantRow.implicitHeight

        // --- the user's message ---
        ColumnLayout {
            id: userColumn
            visible: root.isUser
            anchors.right: parent.right
            width: parent.width
            spacing: 2

            Rectangle {
                id: bubble
                visible: !root.editing
                Layout.alignment: Qt.AlignRight
                readonly property real maxWidth: parent.width * 0.8
                Layout.preferredWidth: Math.min(maxWidth, measure.implicitWidth + 28)
                implicitHeight: userText.implicitHeight + 18
                radius: 14
                color: Theme.userBubble

                Text {
                    id: measure
                    visible: false
                    // Only user bubbles use these: an assistant reply must not be laid out again
                    // in hidden text items on every streamed batch (cost grew with its length).
                    text: root.isUser ? root.content : ""
                    font: userText.font
                    textFormat: Text.PlainText
                }
                TextEdit {
                    id: userText
                    anchors.fill: parent
                    anchors.margins: 9
                    anchors.leftMargin: 14
                    anchors.rightMargin: 14
                    text: root.isUser ? root.content : ""
                    textFormat: TextEdit.PlainText
                    wrapMode: TextEdit.Wrap
                    readOnly: true
                    selectByMouse: true
                    color: Theme.text
                    selectionColor: Theme.accent
                    selectedTextColor: Theme.accentText
                    font.pointSize: Theme.fontSize
                    Accessible.role: Accessible.StaticText
                    Accessible.name: text
                }
            }

            // Editing: a new version of this message, sent as a sibling.
            Rectangle {
                visible: root.editing
                Layout.fillWidth: true
                implicitHeight: editColumn.implicitHeight + 16
                radius: 12
                color: Theme.raised
                border.color: Theme.accent
                ColumnLayout {
                    id: editColumn
                    anchors.fill: parent
                    anchors.margins: 8
                    TextArea {
                        id: editArea
                        Layout.fillWidth: true
                        wrapMode: TextEdit.Wrap
                        selectByMouse: true
                        Accessible.name: qsTr("Edit the message")
                        background: null
                        Keys.onReturnPressed: (event) => {
                            if (event.modifiers & Qt.ShiftModifier) { event.accepted = false; return }
                            saveButton.clicked()
                        }
                        Keys.onEscapePressed: root.editing = false
                    }
                    RowLayout {
                        Layout.alignment: Qt.AlignRight
                        Button {
                            text: qsTr("Cancel")
                            flat: true
                            onClicked: root.editing = false
                        }
                        AccentButton {
                            id: saveButton
                            text: qsTr("Send")
                            enabled: chat.canSend && editArea.text.trim() !== ""
                            onClicked: {
                                if (chat.editAndResend(root.index, editArea.text)) root.editing = false
                            }
                        }
                    }
                }
            }

            RowLayout {
                Layout.alignment: Qt.AlignRight
                spacing: 0
                SiblingSwitcher {
                    visible: root.isUser && root.siblingCount > 1 && !root.editing
                    row: root.index
                    siblingIndex: root.siblingIndex
                    siblingCount: root.siblingCount
                }
                IconButton {
                    opacity: root.showActions && !root.editing ? 1 : 0
                    iconName: "copy"
                    iconSize: 14
                    tip: qsTr("Copy the message")
                    iconColor: Theme.muted
                    onClicked: Theme.copyText(root.content)
                }
                IconButton {
                    opacity: root.showActions && !root.editing ? 1 : 0
                    iconName: "edit"
                    iconSize: 14
                    tip: qsTr("Edit and send again")
                    iconColor: Theme.muted
                    enabled: chat.canSend
                    onClicked: { editArea.text = root.content; root.editing = true; editArea.forceActiveFocus() }
                }
            }
        }

        // --- the assistant's reply ---
        RowLayout {
            id: assistantRow
            visible: !root.isUser
            width: parent.width
            spacing: 12

            Rectangle {
                Layout.alignment: Qt.AlignTop
                Layout.topMargin: 2
                implicitWidth: 28
                implicitHeight: 28
                radius: 14
                color: Theme.surface
                border.color: Theme.border
                Image {
                    anchors.centerIn: parent
                    source: "qrc:/cosmos-chat.svg"
                    sourceSize: Qt.size(20, 20)
                }
                Accessible.ignored: true
            }

            ColumnLayout {
                Layout.fillWidth: true
                spacing: 6

                Label {
                    text: settings.isDemoModel(engine.modelDir) ? qsTr("Cosmos (demo model)") : "Cosmos-Reason1"
                    font.weight: Font.DemiBold
                    font.pointSize: Theme.smallFontSize
                    color: Theme.muted
                    Layout.topMargin: 6
                }

                ReasoningBlock {
                    Layout.fillWidth: true
                    visible: root.reasoning !== "" || root.thinking
                    reasoning: root.reasoning
                    thinking: root.thinking
                    streaming: root.streaming
                    seconds: root.thoughtSeconds
                }

                Repeater {
                    model: root.blocks
                    delegate: MarkdownBlock {
                        Layout.fillWidth: true
                    }
                }

                // Waiting for the first piece.
                Row {
                    visible: root.streaming && root.content === "" && !root.thinking && root.reasoning === ""
                    spacing: 5
                    Layout.topMargin: 4
                    Repeater {
                        model: 3
                        Rectangle {
                            required property int index
                            width: 7
                            height: 7
                            radius: 3.5
                            color: Theme.muted
                            SequentialAnimation on opacity {
                                loops: Animation.Infinite
                                PauseAnimation { duration: index * 180 }
                                NumberAnimation { from: 0.2; to: 1; duration: 360 }
                                NumberAnimation { from: 1; to: 0.2; duration: 360 }
                                PauseAnimation { duration: (2 - index) * 180 }
                            }
                        }
                    }
                    Accessible.name: qsTr("Waiting for the reply")
                }

                Label {
                    visible: !root.streaming && root.content === "" && root.reasoning === "" && root.error === ""
                    text: qsTr("(empty reply)")
                    color: Theme.muted
                    font.italic: true
                }

                Label {
                    objectName: "replyError"
                    visible: !root.streaming && root.error !== ""
                    text: qsTr("This reply failed: %1").arg(root.error)
                    color: Theme.danger
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                    Accessible.role: Accessible.AlertMessage
                    Accessible.name: text
                }

                // The statistics and actions; while several answers stream, only the switcher.
                RowLayout {
                    visible: !root.streaming || root.siblingCount > 1
                    spacing: 0
                    Layout.fillWidth: true
                    Label {
                        visible: !root.streaming
                        text: root.statsText()
                        color: Theme.muted
                        font.pointSize: Theme.smallFontSize
                        elide: Text.ElideRight
                        Layout.fillWidth: true
                    }
                    Item {  // keeps the switcher on the right while the statistics are hidden
                        visible: root.streaming
                        Layout.fillWidth: true
                    }
                    SiblingSwitcher {
                        visible: !root.isUser && root.siblingCount > 1
                        row: root.index
                        siblingIndex: root.siblingIndex
                        siblingCount: root.siblingCount
                    }
                    IconButton {
                        visible: !root.streaming
                        opacity: root.showActions ? 1 : 0
                        iconName: "copy"
                        iconSize: 14
                        iconColor: Theme.muted
                        tip: qsTr("Copy the answer")
                        onClicked: Theme.copyText(root.content)
                    }
                    IconButton {
                        visible: root.isLast && !root.streaming
                        iconName: "regenerate"
                        iconSize: 14
                        iconColor: Theme.muted
                        tip: qsTr("Regenerate the reply")
                        enabled: chat.canSend
                        onClicked: chat.regenerate()
                    }
                    AnswersButton {
                        visible: root.isLast && !root.streaming
                        enabled: chat.canSend
                        actionText: qsTr("Generate several answers to the question")
                        onChosen: (n) => chat.generateAnswers(n)
                    }
                }
            }
        }
    }
}
