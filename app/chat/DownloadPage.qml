// Download the model from the Hugging Face Hub inside the app (the `download` view-model, on its
// own thread): repository and revision, the destination folder, the hub and a token for gated
// models; progress with speed and time left; pause/resume and cancel (the .part files stay, so
// starting again resumes). When it is complete it is the model folder, and the page offers to
// load it.
import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts

Item {
    id: root
    signal closeRequested()
    signal loadRequested()

    readonly property bool busy: download.active
    readonly property string repoName: download.repo.indexOf("/") >= 0
                                       ? download.repo.substring(download.repo.lastIndexOf("/") + 1) : download.repo

    FolderDialog {
        id: folderDialog
        title: qsTr("Choose where to put %1").arg(root.repoName)
        currentFolder: "file://" + appInfo.modelsDir
        // The model gets its own folder inside the one chosen.
        onAccepted: download.destination = settings.pathFromUrl(selectedFolder.toString()) + "/" + root.repoName
    }

    ScrollView {
        id: scroll
        anchors.fill: parent
        contentWidth: availableWidth
        clip: true

        ColumnLayout {
            width: Math.min(scroll.availableWidth - 48, 720)
            x: (scroll.availableWidth - width) / 2
            spacing: 24

            Item { Layout.preferredHeight: 4 }

            RowLayout {
                Layout.fillWidth: true
                IconButton {
                    iconName: "back"
                    tip: qsTr("Back")
                    onClicked: root.closeRequested()
                }
                Label {
                    text: qsTr("Download the model")
                    font.pointSize: Theme.titleFontSize + 2
                    font.weight: Font.DemiBold
                    color: Theme.text
                    Layout.fillWidth: true
                    Accessible.role: Accessible.Heading
                    Accessible.name: text
                }
            }

            SettingsSection {
                title: qsTr("Model")
                subtitle: qsTr("A Hugging Face repository. Cosmos-Reason1-7B is about 16.6 GB; every file is checked against its hash before it is used.")
                Layout.fillWidth: true
                GridLayout {
                    columns: 2
                    columnSpacing: 12
                    rowSpacing: 8
                    Layout.fillWidth: true
                    Label { text: qsTr("Repository"); color: Theme.text }
                    TextField {
                        Layout.fillWidth: true
                        text: download.repo
                        enabled: !root.busy
                        selectByMouse: true
                        placeholderText: "nvidia/Cosmos-Reason1-7B"
                        Accessible.name: qsTr("Repository")
                        onEditingFinished: download.repo = text
                    }
                    Label { text: qsTr("Revision"); color: Theme.text }
                    TextField {
                        Layout.preferredWidth: 200
                        text: download.revision
                        enabled: !root.busy
                        selectByMouse: true
                        placeholderText: "main"
                        Accessible.name: qsTr("Revision: branch, tag or commit")
                        onEditingFinished: download.revision = text
                    }
                }
            }

            SettingsSection {
                title: qsTr("Destination")
                subtitle: qsTr("The files go straight into this folder. An interrupted download resumes from what is already there.")
                Layout.fillWidth: true
                RowLayout {
                    Layout.fillWidth: true
                    TextField {
                        Layout.fillWidth: true
                        text: download.targetDir
                        enabled: !root.busy
                        selectByMouse: true
                        Accessible.name: qsTr("Destination folder")
                        onEditingFinished: if (text !== download.targetDir) download.destination = text
                    }
                    Button {
                        text: qsTr("Choose…")
                        icon.source: "qrc:/icons/folder.svg"
                        icon.color: Theme.text
                        enabled: !root.busy
                        Accessible.name: qsTr("Choose the destination folder")
                        onClicked: folderDialog.open()
                    }
                }
            }

            SettingsSection {
                title: qsTr("Hugging Face Hub")
                subtitle: download.hasSavedToken
                          ? qsTr("A token from HF_TOKEN or huggingface-cli login is used; one entered here replaces it for this session.")
                          : qsTr("Gated or private models need a token (huggingface.co/settings/tokens); it is used for this session only, not saved.")
                Layout.fillWidth: true
                GridLayout {
                    columns: 2
                    columnSpacing: 12
                    rowSpacing: 8
                    Layout.fillWidth: true
                    Label { text: qsTr("Address"); color: Theme.text }
                    TextField {
                        Layout.fillWidth: true
                        text: download.endpoint
                        enabled: !root.busy
                        selectByMouse: true
                        placeholderText: download.effectiveEndpoint
                        Accessible.name: qsTr("Hub address; empty for HF_ENDPOINT or huggingface.co")
                        onEditingFinished: download.endpoint = text
                    }
                    Label { text: qsTr("Token"); color: Theme.text }
                    TextField {
                        Layout.fillWidth: true
                        text: download.token
                        enabled: !root.busy
                        echoMode: TextInput.Password
                        placeholderText: download.hasSavedToken ? qsTr("(the saved token)") : qsTr("hf_… (optional)")
                        Accessible.name: qsTr("Hugging Face token")
                        onEditingFinished: download.token = text
                    }
                }
            }

            SettingsSection {
                title: qsTr("Progress")
                Layout.fillWidth: true
                ProgressBar {
                    Layout.fillWidth: true
                    from: 0
                    to: 1
                    value: download.fraction
                    indeterminate: download.state === "listing"
                    Accessible.name: qsTr("Download progress")
                }
                RowLayout {
                    Layout.fillWidth: true
                    spacing: 16
                    Label {
                        text: download.bytesTotal > 0
                              ? qsTr("%1 of %2 (%3%)").arg(settings.formatBytes(download.bytesDone))
                                    .arg(settings.formatBytes(download.bytesTotal)).arg(Math.floor(download.fraction * 100))
                              : download.state === "listing" ? qsTr("Reading the file list…") : qsTr("Not started")
                        color: Theme.text
                        font.family: Theme.monoFamily
                    }
                    Label {
                        visible: download.state === "downloading" && download.bytesPerSecond > 0
                        text: download.formatSpeed(download.bytesPerSecond)
                        color: Theme.muted
                        font.family: Theme.monoFamily
                    }
                    Label {
                        visible: download.state === "downloading" && download.secondsLeft >= 0
                        text: qsTr("%1 left").arg(download.formatDuration(download.secondsLeft))
                        color: Theme.muted
                    }
                    Item { Layout.fillWidth: true }
                }
                Label {
                    visible: download.fileCount > 0 && download.state !== "finished"
                    text: qsTr("File %1 of %2: %3").arg(download.fileIndex).arg(download.fileCount).arg(download.currentFile)
                    color: Theme.muted
                    elide: Text.ElideMiddle
                    Layout.fillWidth: true
                }
                RowLayout {
                    spacing: 8
                    AccentButton {
                        visible: !root.busy && !download.modelReady
                        text: download.state === "cancelled" || download.state === "failed" ? qsTr("Resume download") : qsTr("Download")
                        iconName: "download"
                        enabled: download.repo !== ""
                        onClicked: download.start()
                    }
                    AccentButton {
                        visible: download.modelReady && !root.busy
                        text: qsTr("Load the model")
                        iconName: "check"
                        onClicked: root.loadRequested()
                    }
                    Button {
                        visible: download.state === "downloading" || download.state === "paused"
                        text: download.state === "paused" ? qsTr("Resume") : qsTr("Pause")
                        onClicked: download.state === "paused" ? download.resume() : download.pause()
                    }
                    Button {
                        visible: root.busy
                        text: qsTr("Cancel")
                        icon.source: "qrc:/icons/close.svg"
                        icon.color: Theme.text
                        Accessible.name: qsTr("Cancel the download; what was downloaded is kept")
                        onClicked: download.cancel()
                    }
                }
                Label {
                    visible: text !== ""
                    text: download.statusText
                    color: Theme.muted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                Label {
                    visible: text !== ""
                    text: download.errorText
                    color: Theme.danger
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                    Accessible.role: Accessible.AlertMessage
                    Accessible.name: text
                }
            }

            Label {
                text: qsTr("From a terminal: cosmos-cli download --repo %1 --out %2").arg(download.repo).arg(download.targetDir)
                color: Theme.muted
                font.pointSize: Theme.smallFontSize
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }

            Item { Layout.preferredHeight: 24 }
        }
    }
}
