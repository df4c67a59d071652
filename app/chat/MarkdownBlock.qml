// One block of an answer (a delegate of the message's MessageBlocksModel): Markdown rendered by
// TextEdit, or a fenced code block in a monospace box with its language and a copy button.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Loader {
    id: root
    required property string text
    required property string kind
    required property string language
    required property string code

    sourceComponent: kind === "code" ? codeBlock : markdownBlock

    Component {
        id: markdownBlock
        TextEdit {
            id: markdown
            text: root.text
            textFormat: TextEdit.MarkdownText
            wrapMode: TextEdit.Wrap
            readOnly: true
            selectByMouse: true
            color: Theme.text
            selectionColor: Theme.accent
            selectedTextColor: Theme.accentText
            font.pointSize: Theme.fontSize
            onLinkActivated: (link) => Qt.openUrlExternally(link)
            Accessible.role: Accessible.StaticText
            Accessible.name: getText(0, length)
            HoverHandler {
                enabled: parent.hoveredLink !== ""
                cursorShape: Qt.PointingHandCursor
            }
            // Links get the palette's color when parsed: parse again after a theme change.
            Connections {
                target: Theme
                function onDarkChanged() {
                    markdown.text = ""
                    markdown.text = Qt.binding(() => root.text)
                }
            }
        }
    }

    Component {
        id: codeBlock
        Rectangle {
            radius: Theme.radius
            color: Theme.codeBackground
            border.color: Theme.border
            implicitHeight: codeColumn.implicitHeight
            Accessible.role: Accessible.StaticText
            Accessible.name: qsTr("Code block %1").arg(root.language)

            ColumnLayout {
                id: codeColumn
                width: parent.width
                spacing: 0
                Rectangle {
                    Layout.fillWidth: true
                    Layout.margins: 1
                    implicitHeight: 30
                    radius: Theme.radius - 1
                    color: Theme.codeHeader
                    RowLayout {
                        anchors.fill: parent
                        anchors.leftMargin: 12
                        anchors.rightMargin: 2
                        Label {
                            text: root.language !== "" ? root.language : qsTr("code")
                            color: Theme.muted
                            font.pointSize: Theme.smallFontSize
                            font.family: Theme.monoFamily
                            Layout.fillWidth: true
                        }
                        IconButton {
                            id: copyButton
                            iconName: copied.running ? "check" : "copy"
                            iconSize: 14
                            iconColor: Theme.muted
                            text: copied.running ? qsTr("Copied") : qsTr("Copy")
                            font.pointSize: Theme.smallFontSize
                            tip: qsTr("Copy the code")
                            onClicked: { Theme.copyText(root.code); copied.restart() }
                            Timer { id: copied; interval: 1500 }
                        }
                    }
                }
                TextEdit {
                    Layout.fillWidth: true
                    Layout.margins: 12
                    Layout.topMargin: 8
                    text: root.code
                    textFormat: TextEdit.PlainText
                    wrapMode: TextEdit.Wrap
                    readOnly: true
                    selectByMouse: true
                    color: Theme.text
                    selectionColor: Theme.accent
                    selectedTextColor: Theme.accentText
                    font.family: Theme.monoFamily
                    font.pointSize: Theme.fontSize - 0.5
                    Accessible.role: Accessible.StaticText
                    Accessible.name: text
                }
            }
        }
    }
}
