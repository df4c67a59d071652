// Covers the window while a model loads: progress, the folder, and Cancel (also Esc).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Rectangle {
    id: root
    color: Qt.rgba(0, 0, 0, Theme.dark ? 0.55 : 0.35)
    Accessible.role: Accessible.Dialog
    Accessible.name: qsTr("Loading the model")

    // Swallows clicks and wheel events meant for what is underneath.
    MouseArea { anchors.fill: parent; hoverEnabled: true; onWheel: (wheel) => wheel.accepted = true }

    Shortcut {
        sequence: "Esc"
        enabled: root.visible
        onActivated: engine.cancelLoad()
    }
    onVisibleChanged: if (visible) cancelButton.forceActiveFocus()

    Rectangle {
        anchors.centerIn: parent
        width: Math.min(parent.width - 64, 460)
        implicitHeight: card.implicitHeight + 40
        radius: 14
        color: Theme.raised
        border.color: Theme.border

        ColumnLayout {
            id: card
            anchors.fill: parent
            anchors.margins: 20
            spacing: 12
            Label {
                text: qsTr("Loading the model")
                font.pointSize: Theme.titleFontSize
                font.weight: Font.DemiBold
                color: Theme.text
            }
            Label {
                text: settings.isDemoModel(settings.modelDir) ? qsTr("Demo model") : settings.modelDir
                color: Theme.muted
                elide: Text.ElideMiddle
                Layout.fillWidth: true
            }
            ProgressBar {
                Layout.fillWidth: true
                from: 0
                to: 1
                value: engine.loadProgress
                indeterminate: engine.loadProgress <= 0
                Accessible.name: qsTr("Load progress")
            }
            RowLayout {
                Layout.fillWidth: true
                Label {
                    text: qsTr("%1%").arg(Math.round(engine.loadProgress * 100))
                    color: Theme.text
                    font.family: Theme.monoFamily
                    Layout.fillWidth: true
                }
                Button {
                    id: cancelButton
                    text: qsTr("Cancel")
                    Accessible.name: qsTr("Cancel loading")
                    onClicked: engine.cancelLoad()
                }
            }
        }
    }
}
