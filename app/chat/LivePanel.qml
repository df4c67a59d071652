// The live panel: device and precision, memory with its breakdown, tokens per second over the
// last minute, the last reply's timings, and how much of the context is used.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import CosmosChat.Backend

Rectangle {
    id: root
    color: Theme.sidebar
    Accessible.role: Accessible.Pane
    Accessible.name: qsTr("Live panel")

    function bytes(v) { return settings.formatBytes(Number(v) || 0) }
    function fraction(part, whole) { return whole > 0 ? Math.max(0, Math.min(1, part / whole)) : 0 }

    readonly property var segments: [
        { name: qsTr("Weights"), value: stats.weightBytes, color: Theme.accent },
        { name: qsTr("KV cache"), value: stats.kvCacheBytes, color: "#3d8bfd" },
        { name: qsTr("Workspace"), value: stats.workspaceBytes, color: "#e0a000" },
        { name: qsTr("Other"), value: stats.otherBytes, color: Theme.muted }
    ]

    component Metric: ColumnLayout {
        property string label
        property string value
        spacing: 0
        Layout.fillWidth: true
        Accessible.role: Accessible.StaticText
        Accessible.name: label + ": " + value
        Label { text: parent.label; color: Theme.muted; font.pointSize: Theme.smallFontSize }
        Label { text: parent.value; color: Theme.text; font.pointSize: Theme.fontSize + 1; font.weight: Font.DemiBold }
    }

    ScrollView {
        id: scroll
        anchors.fill: parent
        contentWidth: availableWidth
        clip: true

        ColumnLayout {
            width: scroll.availableWidth - 32
            x: 16
            spacing: 22

            Item { Layout.preferredHeight: 2 }

            SettingsSection {
                title: qsTr("Device")
                Layout.fillWidth: true
                Label {
                    text: stats.deviceName !== "" ? stats.deviceName : qsTr("No model loaded")
                    color: Theme.text
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                Flow {
                    visible: stats.deviceName !== ""
                    spacing: 6
                    Layout.fillWidth: true
                    Repeater {
                        model: [stats.onGpu ? "GPU" : "CPU", stats.precision].filter(s => s !== "")
                        delegate: Rectangle {
                            required property string modelData
                            implicitWidth: chipLabel.implicitWidth + 16
                            implicitHeight: chipLabel.implicitHeight + 6
                            radius: height / 2
                            color: Theme.surface
                            border.color: Theme.border
                            Label {
                                id: chipLabel
                                anchors.centerIn: parent
                                text: parent.modelData
                                color: Theme.text
                                font.pointSize: Theme.smallFontSize
                            }
                        }
                    }
                }
                Label {
                    visible: engine.deviceNote !== ""
                    text: engine.deviceNote
                    color: Theme.muted
                    font.pointSize: Theme.smallFontSize
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
            }

            SettingsSection {
                title: stats.onGpu ? qsTr("GPU memory") : qsTr("Memory")
                subtitle: stats.onGpu ? "" : qsTr("This process's resident memory; the weights are memory-mapped.")
                Layout.fillWidth: true
                Label {
                    text: qsTr("%1 of %2").arg(root.bytes(stats.memoryUsed)).arg(root.bytes(stats.memoryTotal))
                    color: Theme.text
                    font.weight: Font.DemiBold
                }
                // Used memory as stacked segments, over the total.
                Rectangle {
                    Layout.fillWidth: true
                    implicitHeight: 10
                    radius: 5
                    color: Theme.surface
                    border.color: Theme.border
                    clip: true
                    Row {
                        x: 1
                        y: 1
                        height: parent.height - 2
                        readonly property real usedWidth: (parent.width - 2) * root.fraction(stats.memoryUsed, stats.memoryTotal)
                        Repeater {
                            model: root.segments
                            delegate: Rectangle {
                                required property var modelData
                                height: parent.height
                                width: Math.max(0, parent.usedWidth * root.fraction(modelData.value, stats.memoryUsed))
                                color: modelData.color
                            }
                        }
                    }
                }
                GridLayout {
                    columns: 3
                    columnSpacing: 8
                    rowSpacing: 3
                    Layout.fillWidth: true
                    Repeater {
                        model: root.segments
                        delegate: Rectangle {
                            required property var modelData
                            Layout.row: index
                            Layout.column: 0
                            required property int index
                            implicitWidth: 9
                            implicitHeight: 9
                            radius: 2
                            color: modelData.color
                        }
                    }
                    Repeater {
                        model: root.segments
                        delegate: Label {
                            required property var modelData
                            required property int index
                            Layout.row: index
                            Layout.column: 1
                            Layout.fillWidth: true
                            text: modelData.name
                            color: Theme.muted
                            font.pointSize: Theme.smallFontSize
                        }
                    }
                    Repeater {
                        model: root.segments
                        delegate: Label {
                            required property var modelData
                            required property int index
                            Layout.row: index
                            Layout.column: 2
                            Layout.alignment: Qt.AlignRight
                            text: root.bytes(modelData.value)
                            color: Theme.text
                            font.pointSize: Theme.smallFontSize
                        }
                    }
                }
            }

            SettingsSection {
                title: qsTr("Speed")
                Layout.fillWidth: true
                RowLayout {
                    Layout.fillWidth: true
                    Label {
                        text: stats.tokensPerSecond.toFixed(1)
                        font.pointSize: Theme.fontSize + 10
                        font.weight: Font.DemiBold
                        color: engine.state === EngineHost.Generating ? Theme.accent : Theme.text
                    }
                    Label {
                        text: qsTr("tokens/s now")
                        color: Theme.muted
                        Layout.alignment: Qt.AlignBaseline
                    }
                }
                SpeedChart {
                    Layout.fillWidth: true
                    values: stats.history
                    capacity: 240
                }
                Label {
                    text: qsTr("last 60 s")
                    color: Theme.muted
                    font.pointSize: Theme.smallFontSize
                    Layout.alignment: Qt.AlignRight
                }
            }

            SettingsSection {
                title: qsTr("Last reply")
                Layout.fillWidth: true
                GridLayout {
                    columns: 2
                    columnSpacing: 12
                    rowSpacing: 10
                    Layout.fillWidth: true
                    Metric {
                        label: qsTr("Time to first token")
                        value: stats.ttft > 0 ? (stats.ttft < 1 ? qsTr("%1 ms").arg(Math.round(stats.ttft * 1000))
                                                               : qsTr("%1 s").arg(stats.ttft.toFixed(2))) : "—"
                    }
                    Metric {
                        label: qsTr("Prompt")
                        value: stats.prefillSpeed > 0 ? qsTr("%1 tok/s").arg(stats.prefillSpeed.toFixed(0)) : "—"
                    }
                    Metric {
                        label: qsTr("Decode")
                        value: stats.decodeSpeed > 0 ? qsTr("%1 tok/s").arg(stats.decodeSpeed.toFixed(1)) : "—"
                    }
                }
            }

            SettingsSection {
                title: qsTr("Context")
                Layout.fillWidth: true
                Label {
                    text: stats.contextLimit > 0
                          ? qsTr("%1 of %2 tokens").arg(stats.contextUsed.toLocaleString(Qt.locale(), "f", 0))
                                                   .arg(stats.contextLimit.toLocaleString(Qt.locale(), "f", 0))
                          : "—"
                    color: Theme.text
                }
                Rectangle {
                    Layout.fillWidth: true
                    implicitHeight: 10
                    radius: 5
                    color: Theme.surface
                    border.color: Theme.border
                    Accessible.role: Accessible.ProgressBar
                    Accessible.name: qsTr("Context used")
                    Rectangle {
                        x: 1
                        y: 1
                        height: parent.height - 2
                        radius: 4
                        width: (parent.width - 2) * root.fraction(stats.contextUsed, stats.contextLimit)
                        color: root.fraction(stats.contextUsed, stats.contextLimit) > 0.9 ? Theme.danger : "#3d8bfd"
                    }
                }
            }

            Item { Layout.preferredHeight: 8 }
        }
    }
}
