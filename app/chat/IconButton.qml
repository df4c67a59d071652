// A flat tool button showing one of the monochrome icons in qrc:/icons/, tinted for the theme,
// with a tooltip that is also its accessible name.
import QtQuick
import QtQuick.Controls

ToolButton {
    id: root
    property string iconName
    property string tip
    property color iconColor: Theme.text
    property int iconSize: 18

    icon.source: iconName !== "" ? "qrc:/icons/" + iconName + ".svg" : ""
    icon.width: iconSize
    icon.height: iconSize
    icon.color: enabled ? iconColor : Theme.muted
    display: text !== "" ? AbstractButton.TextBesideIcon : AbstractButton.IconOnly
    focusPolicy: Qt.StrongFocus
    hoverEnabled: true
    palette.buttonText: Theme.text

    ToolTip.visible: hovered && tip !== ""
    ToolTip.text: tip
    ToolTip.delay: 600
    Accessible.name: tip !== "" ? tip : text
    Accessible.role: Accessible.Button
}
