// "‹ 2/3 ›" on a message that has other versions (siblings: regenerated replies, edited
// questions): the arrows show the branch through the previous / next version
// (chat.switchSibling(row, ∓1)). Both arrows take the keyboard focus (Tab, then Space); they are
// disabled while a single reply streams, not while several answers do (chat.canSwitchVersions:
// that is how each is watched live). Invisible for a message without other versions.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

RowLayout {
    id: root
    property int row: 0
    property int siblingIndex: 1   // 1-based
    property int siblingCount: 1

    visible: siblingCount > 1
    spacing: 0
    Accessible.role: Accessible.Grouping
    Accessible.name: qsTr("Version %1 of %2").arg(siblingIndex).arg(siblingCount)

    IconButton {
        objectName: "previousVersion"
        iconName: "chevron-left"
        iconSize: 14
        iconColor: Theme.muted
        implicitWidth: 26
        tip: qsTr("Previous version")
        enabled: chat.canSwitchVersions && root.siblingIndex > 1
        onClicked: chat.switchSibling(root.row, -1)
    }
    Label {
        objectName: "versionLabel"
        text: root.siblingIndex + "/" + root.siblingCount
        color: Theme.muted
        font.pointSize: Theme.smallFontSize
        Accessible.ignored: true
    }
    IconButton {
        objectName: "nextVersion"
        iconName: "chevron-right"
        iconSize: 14
        iconColor: Theme.muted
        implicitWidth: 26
        tip: qsTr("Next version")
        enabled: chat.canSwitchVersions && root.siblingIndex < root.siblingCount
        onClicked: chat.switchSibling(root.row, 1)
    }
}
