// A menu entry with its keyboard shortcut shown on the right (the shortcut itself is a Shortcut
// in Main.qml; Qt Quick's Fusion menus do not show one).
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
import QtQuick.Layouts

MenuItem {
    id: control
    property string shortcutText
    icon.color: Theme.text
    Accessible.name: text
    Accessible.description: shortcutText

    contentItem: RowLayout {
        spacing: 8
        IconImage {
            visible: control.icon.source.toString() !== ""
            source: control.icon.source
            sourceSize: Qt.size(16, 16)
            color: control.enabled ? control.icon.color : Theme.muted
        }
        Label {
            text: control.text
            color: control.enabled ? Theme.text : Theme.muted
            elide: Text.ElideRight
            Layout.fillWidth: true
        }
        Label {
            visible: control.shortcutText !== ""
            text: control.shortcutText
            color: Theme.muted
            font.pointSize: Theme.smallFontSize
        }
    }
}
