// The primary action of a page: filled with the accent color.
import QtQuick
import QtQuick.Controls

Button {
    id: root
    property string iconName
    icon.source: iconName !== "" ? "qrc:/icons/" + iconName + ".svg" : ""
    icon.color: enabled ? Theme.accentText : Theme.muted
    icon.width: 16
    icon.height: 16
    leftPadding: 14
    rightPadding: 16
    topPadding: 8
    bottomPadding: 8
    focusPolicy: Qt.StrongFocus
    Accessible.name: text
    palette.buttonText: enabled ? Theme.accentText : Theme.muted
    font.weight: Font.DemiBold
    background: Rectangle {
        implicitHeight: 34
        radius: 7
        color: !root.enabled ? Theme.surface
               : root.down ? Qt.darker(Theme.accent, 1.2)
               : root.hovered ? Qt.lighter(Theme.accent, 1.1) : Theme.accent
        border.color: root.visualFocus ? Theme.text : "transparent"
        border.width: 2
    }
}
