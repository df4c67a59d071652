// A titled group on the settings page and the live panel.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ColumnLayout {
    id: root
    property string title
    property string subtitle
    default property alias content: body.data
    spacing: 8

    Label {
        text: root.title
        font.pointSize: Theme.fontSize + 1
        font.weight: Font.DemiBold
        color: Theme.text
        Accessible.role: Accessible.Heading
        Accessible.name: text
    }
    Label {
        visible: root.subtitle !== ""
        text: root.subtitle
        color: Theme.muted
        wrapMode: Text.Wrap
        font.pointSize: Theme.smallFontSize
        Layout.fillWidth: true
    }
    ColumnLayout {
        id: body
        spacing: 8
        Layout.fillWidth: true
    }
}
