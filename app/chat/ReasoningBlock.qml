// The model's reasoning (<think>…</think>) above its answer: open while it streams, folded once the
// reply is done ("Thought for N.N s"); the reader can toggle it either way.
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
import QtQuick.Layouts

ColumnLayout {
    id: root
    property string reasoning
    property bool thinking: false
    property bool streaming: false
    property real seconds: 0
    property bool expanded: streaming
    property bool userToggled: false

    spacing: 4
    onStreamingChanged: if (!userToggled) expanded = streaming

    AbstractButton {
        id: header
        Layout.fillWidth: false
        hoverEnabled: true
        focusPolicy: Qt.StrongFocus
        padding: 4
        leftPadding: 6
        rightPadding: 10
        checkable: true
        checked: root.expanded
        onToggled: { root.userToggled = true; root.expanded = checked }
        Accessible.role: Accessible.Button
        Accessible.name: title.text + (root.expanded ? qsTr(", expanded") : qsTr(", collapsed"))
        Accessible.description: qsTr("Show or hide the model's reasoning")

        contentItem: RowLayout {
            spacing: 6
            IconImage {
                source: root.expanded ? "qrc:/icons/chevron-down.svg" : "qrc:/icons/chevron-right.svg"
                sourceSize: Qt.size(14, 14)
                color: Theme.muted
            }
            IconImage {
                source: "qrc:/icons/reasoning.svg"
                sourceSize: Qt.size(15, 15)
                color: root.thinking ? Theme.accent : Theme.muted
            }
            Label {
                id: title
                text: root.thinking ? qsTr("Thinking…")
                      : root.seconds > 0 ? qsTr("Thought for %1 s").arg(root.seconds.toFixed(1))
                      : qsTr("Reasoning")
                color: Theme.muted
                font.pointSize: Theme.smallFontSize
                font.weight: Font.DemiBold
            }
            BusyIndicator {
                visible: root.thinking
                running: visible
                implicitWidth: 16
                implicitHeight: 16
            }
        }
        background: Rectangle {
            radius: 6
            color: header.hovered ? Theme.hover : "transparent"
            border.color: header.visualFocus ? Theme.accent : "transparent"
        }
    }

    Item {
        visible: root.expanded && root.reasoning !== ""
        Layout.fillWidth: true
        implicitHeight: reasoningText.implicitHeight + 8
        Rectangle {
            x: 12
            width: 2
            height: parent.height
            radius: 1
            color: Theme.reasoningBar
        }
        TextEdit {
            id: reasoningText
            x: 26
            y: 4
            width: parent.width - 30
            text: root.reasoning.trim()
            textFormat: TextEdit.PlainText
            wrapMode: TextEdit.Wrap
            readOnly: true
            selectByMouse: true
            color: Theme.muted
            selectionColor: Theme.accent
            selectedTextColor: Theme.accentText
            font.pointSize: Theme.fontSize - 0.5
            Accessible.role: Accessible.StaticText
            Accessible.name: qsTr("Reasoning: %1").arg(text)
        }
    }
}
