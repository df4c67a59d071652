// One search result in the sidebar: the conversation's title and the snippet around the match
// (SearchResultsModel's `snippet` role: escaped rich text, the matches in bold). Click, Enter or
// Space chooses it.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ItemDelegate {
    id: item
    required property int index
    required property var conversationId
    required property var messageId
    required property string title
    required property string snippet
    required property string plainSnippet
    property bool isCurrent: false
    readonly property string shownTitle: title !== "" ? title : qsTr("New conversation")
    signal chosen()

    height: column.implicitHeight + 14
    highlighted: ListView.isCurrentItem
    hoverEnabled: true
    focusPolicy: Qt.StrongFocus
    Accessible.name: shownTitle + ": " + plainSnippet

    onClicked: chosen()
    Keys.onReturnPressed: chosen()
    Keys.onEnterPressed: chosen()

    background: Rectangle {
        radius: Theme.radius
        color: item.isCurrent ? Theme.selected : (item.hovered || item.highlighted) ? Theme.hover : "transparent"
        border.color: item.visualFocus || (item.highlighted && item.ListView.view.activeFocus) ? Theme.accent : "transparent"
    }
    contentItem: ColumnLayout {
        id: column
        spacing: 2
        Label {
            objectName: "resultTitle"
            text: item.shownTitle
            textFormat: Text.PlainText
            color: Theme.text
            font.weight: Font.DemiBold
            elide: Text.ElideRight
            Layout.fillWidth: true
        }
        Label {
            objectName: "resultSnippet"
            text: item.snippet
            textFormat: Text.StyledText
            color: Theme.muted
            font.pointSize: Theme.smallFontSize
            wrapMode: Text.Wrap
            maximumLineCount: 2
            elide: Text.ElideRight
            Layout.fillWidth: true
        }
    }
}
