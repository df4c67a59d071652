// The open conversation: the messages (following the reply while it streams unless the reader
// scrolled up) and the composer.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Item {
    id: root

    function focusComposer() { composer.focusInput() }

    // The last row is an assistant reply (regenerate makes sense).
    readonly property bool lastIsAssistant: list.count > 0 && list.lastRole === "assistant"

    // A search result opened: show its message at the top instead of following the end.
    Connections {
        target: chat
        function onRevealRequested(row) {
            Qt.callLater(() => {
                list.positionViewAtIndex(row, ListView.Beginning)
                list.followTail = false
            })
        }
    }

    ListView {
        id: list
        anchors.top: parent.top
        anchors.bottom: composerArea.top
        anchors.left: parent.left
        anchors.right: parent.right
        model: chat
        clip: true
        spacing: 6
        reuseItems: false
        cacheBuffer: 4000
        boundsBehavior: Flickable.StopAtBounds
        activeFocusOnTab: true
        keyNavigationEnabled: false
        Accessible.role: Accessible.List
        Accessible.name: qsTr("Messages")

        property string lastRole: ""
        // Follow the end while true; the reader scrolling up turns it off, reaching the end on.
        property bool followTail: true
        property bool autoScrolling: false

        function scrollToEnd() {
            autoScrolling = true
            positionViewAtEnd()
            autoScrolling = false
        }
        // Any scroll we did not make (wheel, drag, scroll bar, keys) decides: at the end, follow.
        onContentYChanged: if (!autoScrolling) followTail = atYEnd
        onMovementEnded: followTail = atYEnd
        onContentHeightChanged: if (followTail) Qt.callLater(scrollToEnd)
        onHeightChanged: if (followTail) Qt.callLater(scrollToEnd)
        onCountChanged: {
            followTail = true
            Qt.callLater(scrollToEnd)
        }
        ScrollBar.vertical: ScrollBar { id: scrollBar; policy: ScrollBar.AsNeeded }

        header: Item { width: 1; height: 18 }
        footer: Item { width: 1; height: 12 }

        delegate: MessageDelegate {
            width: ListView.view.width
            isLast: index === ListView.view.count - 1
            onIsLastChanged: if (isLast) ListView.view.lastRole = role
            Component.onCompleted: if (isLast) ListView.view.lastRole = role
        }
    }

    // "Jump to the latest" while a reply streams below the reader.
    RoundButton {
        anchors.horizontalCenter: list.horizontalCenter
        anchors.bottom: list.bottom
        anchors.bottomMargin: 12
        visible: !list.followTail && list.count > 0 && !list.atYEnd
        icon.source: "qrc:/icons/chevron-down.svg"
        icon.color: Theme.text
        text: chat.busy ? qsTr("Follow the reply") : qsTr("Latest")
        display: AbstractButton.TextBesideIcon
        Accessible.name: text
        onClicked: { list.followTail = true; list.scrollToEnd() }
    }

    // The empty conversation: a greeting and examples to start from.
    Column {
        id: emptyState
        anchors.centerIn: list
        width: Math.min(list.width - 48, 560)
        visible: list.count === 0
        spacing: 14
        Image {
            source: "qrc:/cosmos-chat.svg"
            sourceSize: Qt.size(64, 64)
            anchors.horizontalCenter: parent.horizontalCenter
            Accessible.ignored: true
        }
        Label {
            width: parent.width
            text: qsTr("What should Cosmos-Reason1 reason about?")
            font.pointSize: Theme.titleFontSize
            font.weight: Font.DemiBold
            color: Theme.text
            horizontalAlignment: Text.AlignHCenter
            wrapMode: Text.Wrap
        }
        Label {
            width: parent.width
            text: qsTr("It thinks step by step before it answers; the reasoning folds away above each answer.")
            color: Theme.muted
            horizontalAlignment: Text.AlignHCenter
            wrapMode: Text.Wrap
        }
        Column {
            width: parent.width
            spacing: 8
            // Only when there is room above the composer.
            visible: list.height > 480
            Repeater {
                model: [
                    qsTr("A robot arm holds a full cup and moves fast. Is it about to drop the cup?"),
                    qsTr("Which safety checks should a warehouse robot run before lifting a box?"),
                    qsTr("Explain why a ball rolling off a table lands further away when it is faster.")
                ]
                delegate: ItemDelegate {
                    id: example
                    required property string modelData
                    width: parent.width
                    text: modelData
                    padding: 10
                    leftPadding: 14
                    focusPolicy: Qt.StrongFocus
                    Accessible.name: qsTr("Use the example: %1").arg(modelData)
                    contentItem: Label {
                        text: example.text
                        wrapMode: Text.Wrap
                        color: Theme.text
                    }
                    background: Rectangle {
                        radius: Theme.radius
                        color: example.hovered ? Theme.hover : Theme.surface
                        border.color: example.visualFocus ? Theme.accent : Theme.border
                    }
                    onClicked: composer.setText(modelData)
                }
            }
        }
    }

    // The composer, centered under the messages.
    Item {
        id: composerArea
        anchors.left: parent.left
        anchors.right: parent.right
        anchors.bottom: parent.bottom
        height: composer.implicitHeight + 24
        Composer {
            id: composer
            width: Math.min(parent.width - 32, Theme.contentMaxWidth)
            anchors.horizontalCenter: parent.horizontalCenter
            anchors.top: parent.top
            anchors.topMargin: 4
            canRegenerate: root.lastIsAssistant
            onSent: { list.followTail = true; list.scrollToEnd() }
        }
    }
}
