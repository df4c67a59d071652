// The model's status in the top bar: which model, on which device, at which precision (or that it
// is loading). Clicking opens the settings.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import CosmosChat.Backend

AbstractButton {
    id: root
    readonly property string modelName: {
        if (settings.isDemoModel(engine.modelDir)) return qsTr("Demo model")
        const parts = engine.modelDir.split("/").filter(p => p !== "")
        return parts.length > 0 ? parts[parts.length - 1] : ""
    }
    readonly property color dotColor: {
        switch (engine.state) {
        case EngineHost.Ready: return Theme.accent
        case EngineHost.Generating: return Theme.accent
        case EngineHost.Loading: return "#e0a000"
        case EngineHost.Failed: return engine.hasModel ? Theme.accent : Theme.danger
        default: return Theme.muted
        }
    }

    text: {
        switch (engine.state) {
        case EngineHost.Loading: return qsTr("Loading… %1%").arg(Math.round(engine.loadProgress * 100))
        case EngineHost.NoModel: return qsTr("No model")
        default:
            if (!engine.hasModel) return qsTr("Model not loaded")
            return [modelName, engine.deviceName, engine.precision].filter(s => s !== "").join(" · ")
        }
    }
    hoverEnabled: true
    focusPolicy: Qt.StrongFocus
    leftPadding: 10
    rightPadding: 12
    topPadding: 5
    bottomPadding: 5
    implicitWidth: Math.min(380, implicitContentWidth + leftPadding + rightPadding)
    implicitHeight: implicitContentHeight + topPadding + bottomPadding
    Accessible.role: Accessible.Button
    Accessible.name: qsTr("Model: %1. Open the settings").arg(text)
    ToolTip.visible: hovered
    ToolTip.delay: 600
    ToolTip.text: engine.modelDir !== "" ? engine.modelDir + (engine.deviceNote !== "" ? "\n" + engine.deviceNote : "") : qsTr("Choose a model in the settings")

    contentItem: RowLayout {
        spacing: 7
        Rectangle {
            implicitWidth: 8
            implicitHeight: 8
            radius: 4
            color: root.dotColor
            SequentialAnimation on opacity {
                running: engine.state === EngineHost.Generating || engine.state === EngineHost.Loading
                loops: Animation.Infinite
                onRunningChanged: if (!running) parent.opacity = 1
                NumberAnimation { to: 0.3; duration: 600 }
                NumberAnimation { to: 1; duration: 600 }
            }
        }
        Label {
            text: root.text
            color: Theme.text
            font.pointSize: Theme.smallFontSize
            elide: Text.ElideMiddle
            Layout.fillWidth: true
        }
    }
    background: Rectangle {
        radius: height / 2
        color: root.hovered || root.visualFocus ? Theme.hover : Theme.surface
        border.color: root.visualFocus ? Theme.accent : Theme.border
    }
}
