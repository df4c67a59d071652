// A message strip above the content: an error, a warning or a note, with an optional action and a
// close button. Invisible while `text` is empty.
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
import QtQuick.Layouts

Rectangle {
    id: root
    property string text
    property string kind: "error"      // error | warning | info
    property string actionText
    property bool closable: true
    signal action()
    signal dismissed()

    visible: text !== ""
    implicitHeight: visible ? row.implicitHeight + 14 : 0
    radius: Theme.radius
    color: kind === "error" ? Theme.dangerBackground : kind === "warning" ? Theme.warningBackground : Theme.infoBackground
    border.color: kind === "error" ? Qt.rgba(Theme.danger.r, Theme.danger.g, Theme.danger.b, 0.45) : Theme.border
    Accessible.role: Accessible.AlertMessage
    Accessible.name: text

    RowLayout {
        id: row
        anchors.fill: parent
        anchors.leftMargin: 12
        anchors.rightMargin: 4
        spacing: 8

        IconImage {
            source: "qrc:/icons/" + (root.kind === "info" ? "reasoning" : "alert") + ".svg"
            sourceSize: Qt.size(18, 18)
            color: root.kind === "error" ? Theme.danger : Theme.muted
            Layout.alignment: Qt.AlignVCenter
        }
        Label {
            text: root.text
            color: Theme.text
            wrapMode: Text.Wrap
            textFormat: Text.PlainText
            Layout.fillWidth: true
            Layout.alignment: Qt.AlignVCenter
        }
        Button {
            visible: root.actionText !== ""
            text: root.actionText
            flat: true
            Accessible.name: root.actionText
            onClicked: root.action()
        }
        IconButton {
            visible: root.closable
            iconName: "close"
            iconSize: 14
            tip: qsTr("Dismiss")
            onClicked: root.dismissed()
        }
    }
}
