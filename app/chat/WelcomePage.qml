// Shown while no model is loaded: open a model folder, download Cosmos-Reason1-7B (the download
// page, or the command), or try the demo model (tiny, random weights: meaningless text, but the
// whole app runs).
import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts

Item {
    id: root
    signal loadRequested()
    signal downloadRequested()

    property string folderMessage: ""
    property string demoMessage: ""
    property bool makingDemo: false
    readonly property string downloadCommand:
        "cosmos-cli download --repo nvidia/Cosmos-Reason1-7B --out ~/models/Cosmos-Reason1-7B"

    function chooseFolder(url) {
        const message = settings.validateModelDir(url)
        folderMessage = message
        if (message !== "") return
        settings.modelDir = settings.pathFromUrl(url)
        loadRequested()
    }

    FolderDialog {
        id: folderDialog
        title: qsTr("Choose the Cosmos-Reason1-7B folder")
        currentFolder: "file://" + appInfo.modelsDir
        onAccepted: root.chooseFolder(selectedFolder.toString())
    }

    // Writing the demo model takes a moment: let the busy indicator show first.
    Timer {
        id: demoTimer
        interval: 30
        onTriggered: {
            const result = settings.createDemoModel()
            root.makingDemo = false
            if (result.error) { root.demoMessage = result.error; return }
            root.demoMessage = ""
            settings.modelDir = result.path
            root.loadRequested()
        }
    }

    component Card: Rectangle {
        id: card
        property string title
        property string iconName
        default property alias content: cardBody.data
        Layout.fillWidth: true
        implicitHeight: cardColumn.implicitHeight + 36
        radius: 12
        color: Theme.surface
        border.color: Theme.border
        ColumnLayout {
            id: cardColumn
            anchors.fill: parent
            anchors.margins: 18
            spacing: 10
            RowLayout {
                spacing: 10
                Button {
                    enabled: false
                    flat: true
                    padding: 0
                    icon.source: "qrc:/icons/" + card.iconName + ".svg"
                    icon.color: Theme.accent
                    icon.width: 20
                    icon.height: 20
                    background: null
                    Accessible.ignored: true
                }
                Label {
                    text: card.title
                    font.pointSize: Theme.fontSize + 2
                    font.weight: Font.DemiBold
                    color: Theme.text
                    Layout.fillWidth: true
                    Accessible.role: Accessible.Heading
                    Accessible.name: text
                }
            }
            ColumnLayout {
                id: cardBody
                spacing: 10
                Layout.fillWidth: true
            }
        }
    }

    ScrollView {
        id: scroll
        anchors.fill: parent
        contentWidth: availableWidth
        clip: true

        ColumnLayout {
            width: Math.min(scroll.availableWidth - 48, 640)
            x: (scroll.availableWidth - width) / 2
            spacing: 16

            Item { Layout.preferredHeight: 16 }
            Image {
                source: "qrc:/cosmos-chat.svg"
                sourceSize: Qt.size(88, 88)
                Layout.alignment: Qt.AlignHCenter
                Accessible.ignored: true
            }
            Label {
                text: qsTr("Welcome to Cosmos Chat")
                font.pointSize: Theme.titleFontSize + 6
                font.weight: Font.DemiBold
                color: Theme.text
                horizontalAlignment: Text.AlignHCenter
                Layout.fillWidth: true
            }
            Label {
                text: qsTr("Chat with NVIDIA Cosmos-Reason1-7B on this computer. It reasons step by step about the physical world; nothing you type leaves the machine.")
                color: Theme.muted
                wrapMode: Text.Wrap
                horizontalAlignment: Text.AlignHCenter
                Layout.fillWidth: true
                Layout.bottomMargin: 8
            }

            Card {
                title: qsTr("Open your model folder")
                iconName: "folder"
                Label {
                    text: qsTr("The folder with config.json, the model-*.safetensors files and tokenizer.json.")
                    color: Theme.muted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                AccentButton {
                    text: qsTr("Choose model folder…")
                    iconName: "folder"
                    Accessible.name: qsTr("Choose the model folder")
                    onClicked: folderDialog.open()
                }
                Label {
                    visible: root.folderMessage !== ""
                    text: root.folderMessage
                    color: Theme.danger
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
            }

            Card {
                title: qsTr("Don't have it yet?")
                iconName: "download"
                Label {
                    text: qsTr("Download it from Hugging Face here (about 16.6 GB): every file is checked, an interrupted download resumes, and the model is ready to load when it is done.")
                    color: Theme.muted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                AccentButton {
                    text: download.active ? qsTr("Show the download (%1%)").arg(Math.floor(download.fraction * 100))
                                          : qsTr("Download Cosmos-Reason1-7B…")
                    iconName: "download"
                    onClicked: root.downloadRequested()
                }
                Label {
                    text: qsTr("Or from a terminal, then choose the folder above:")
                    color: Theme.muted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                Rectangle {
                    Layout.fillWidth: true
                    implicitHeight: commandRow.implicitHeight + 12
                    radius: 6
                    color: Theme.codeBackground
                    border.color: Theme.border
                    RowLayout {
                        id: commandRow
                        anchors.fill: parent
                        anchors.leftMargin: 12
                        anchors.rightMargin: 4
                        TextEdit {
                            text: root.downloadCommand
                            readOnly: true
                            selectByMouse: true
                            wrapMode: TextEdit.Wrap
                            color: Theme.text
                            font.family: Theme.monoFamily
                            font.pointSize: Theme.fontSize - 0.5
                            Layout.fillWidth: true
                            Accessible.role: Accessible.StaticText
                            Accessible.name: text
                        }
                        IconButton {
                            id: copyCommand
                            iconName: copiedTimer.running ? "check" : "copy"
                            iconSize: 16
                            tip: qsTr("Copy the command")
                            onClicked: { Theme.copyText(root.downloadCommand); copiedTimer.restart() }
                            Timer { id: copiedTimer; interval: 1500 }
                        }
                    }
                }
                Label {
                    text: qsTr("huggingface-cli works too: huggingface-cli download nvidia/Cosmos-Reason1-7B --local-dir ~/models/Cosmos-Reason1-7B")
                    color: Theme.muted
                    font.pointSize: Theme.smallFontSize
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
            }

            Card {
                title: qsTr("Just looking around?")
                iconName: "flask"
                Label {
                    text: qsTr("The demo model is a tiny model (about 40 MB) with random weights. It runs the whole app — streaming, reasoning blocks, the live panel — but its replies are meaningless text.")
                    color: Theme.muted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                RowLayout {
                    Button {
                        text: qsTr("Try the demo model")
                        icon.source: "qrc:/icons/flask.svg"
                        icon.color: Theme.text
                        enabled: !root.makingDemo
                        Accessible.name: qsTr("Try the demo model, random weights")
                        onClicked: { root.makingDemo = true; demoTimer.start() }
                    }
                    BusyIndicator {
                        visible: root.makingDemo
                        running: visible
                        implicitWidth: 24
                        implicitHeight: 24
                    }
                }
                Label {
                    visible: root.demoMessage !== ""
                    text: root.demoMessage
                    color: Theme.danger
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
            }

            Item { Layout.preferredHeight: 24 }
        }
    }
}
