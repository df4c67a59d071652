// Every setting: the model folder, precision (with memory estimates; the ones this backend cannot
// run are disabled with the reason) and context length, which reload the model; sampling; the
// system prompt; appearance; where the app keeps its files.
import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts
import CosmosChat.Backend

Item {
    id: root
    signal closeRequested()
    signal reloadRequested()
    signal downloadRequested()

    property string folderMessage: ""

    // A change of model, precision or context reloads a loaded model.
    function reloadIfLoaded() {
        if (engine.hasModel || engine.state === EngineHost.Failed) reloadRequested()
    }
    function chooseFolder(url) {
        const message = settings.validateModelDir(url)
        folderMessage = message
        if (message !== "") return
        settings.modelDir = settings.pathFromUrl(url)
        reloadRequested()
    }

    FolderDialog {
        id: folderDialog
        title: qsTr("Choose the model folder")
        // The folder that holds the current model (or ~/models).
        currentFolder: "file://" + (settings.modelDir !== ""
                                    ? settings.modelDir.substring(0, Math.max(1, settings.modelDir.lastIndexOf("/")))
                                    : appInfo.modelsDir)
        onAccepted: root.chooseFolder(selectedFolder.toString())
    }

    ScrollView {
        id: scroll
        anchors.fill: parent
        contentWidth: availableWidth
        clip: true

        ColumnLayout {
            id: page
            width: Math.min(scroll.availableWidth - 48, 720)
            x: (scroll.availableWidth - width) / 2
            spacing: 28

            Item { Layout.preferredHeight: 4 }

            RowLayout {
                Layout.fillWidth: true
                IconButton {
                    iconName: "back"
                    tip: qsTr("Back to the chat (Esc)")
                    onClicked: root.closeRequested()
                }
                Label {
                    text: qsTr("Settings")
                    font.pointSize: Theme.titleFontSize + 2
                    font.weight: Font.DemiBold
                    color: Theme.text
                    Layout.fillWidth: true
                }
            }

            // --- model ---
            SettingsSection {
                title: qsTr("Model")
                subtitle: qsTr("The folder downloaded from Hugging Face: config.json, the *.safetensors weights and tokenizer.json.")
                Layout.fillWidth: true
                RowLayout {
                    Layout.fillWidth: true
                    TextField {
                        Layout.fillWidth: true
                        readOnly: true
                        text: settings.modelDir
                        placeholderText: qsTr("No model folder chosen")
                        selectByMouse: true
                        Accessible.name: qsTr("Model folder")
                    }
                    Button {
                        text: qsTr("Choose…")
                        icon.source: "qrc:/icons/folder.svg"
                        icon.color: Theme.text
                        Accessible.name: qsTr("Choose the model folder")
                        onClicked: folderDialog.open()
                    }
                    Button {
                        text: download.active ? qsTr("Download (%1%)").arg(Math.floor(download.fraction * 100)) : qsTr("Download…")
                        icon.source: "qrc:/icons/download.svg"
                        icon.color: Theme.text
                        Accessible.name: qsTr("Download a model from Hugging Face")
                        onClicked: root.downloadRequested()
                    }
                }
                Label {
                    visible: root.folderMessage !== ""
                    text: root.folderMessage
                    color: Theme.danger
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                Label {
                    visible: settings.modelIsDemo
                    text: qsTr("This is the demo model: random weights, so its replies are meaningless text.")
                    color: Theme.muted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                RowLayout {
                    Button {
                        text: engine.hasModel ? qsTr("Reload") : qsTr("Load")
                        icon.source: "qrc:/icons/regenerate.svg"
                        icon.color: Theme.text
                        enabled: settings.modelDir !== "" && engine.state !== EngineHost.Loading
                        onClicked: root.reloadRequested()
                    }
                    Label {
                        text: engine.hasModel ? (engine.kvCache === "int8"
                                                 ? qsTr("Loaded: %1 on %2, int8 KV cache").arg(engine.precision).arg(engine.deviceName)
                                                 : qsTr("Loaded: %1 on %2").arg(engine.precision).arg(engine.deviceName)) : ""
                        color: Theme.muted
                        elide: Text.ElideRight
                        Layout.fillWidth: true
                    }
                }
            }

            // --- precision and context ---
            SettingsSection {
                title: qsTr("Precision")
                subtitle: qsTr("Memory estimates for %1 tokens of context. Changing the precision reloads the model.")
                          .arg(settings.contextLength.toLocaleString(Qt.locale(), "f", 0))
                Layout.fillWidth: true
                ButtonGroup { id: precisionGroup }
                Repeater {
                    model: settings.precisionOptions
                    delegate: RowLayout {
                        required property var modelData
                        Layout.fillWidth: true
                        spacing: 10
                        RadioButton {
                            ButtonGroup.group: precisionGroup
                            text: modelData.name
                            enabled: modelData.enabled
                            checked: settings.precision === modelData.name
                            Layout.preferredWidth: 90
                            Accessible.name: qsTr("Precision %1").arg(modelData.name)
                            Accessible.description: modelData.reason
                            onToggled: if (checked) { settings.precision = modelData.name; root.reloadIfLoaded() }
                        }
                        Label {
                            text: modelData.bytes > 0 ? "≈ " + settings.formatBytes(modelData.bytes) : "—"
                            color: modelData.enabled ? Theme.text : Theme.muted
                            font.family: Theme.monoFamily
                            Layout.preferredWidth: 90
                        }
                        Label {
                            text: modelData.reason
                            color: !modelData.fits ? Theme.danger : Theme.muted
                            font.pointSize: Theme.smallFontSize
                            wrapMode: Text.Wrap
                            Layout.fillWidth: true
                        }
                    }
                }
                RowLayout {
                    Layout.topMargin: 6
                    Label { text: qsTr("Context length"); color: Theme.text; Layout.preferredWidth: 140 }
                    ComboBox {
                        id: contextBox
                        readonly property var sizes: {
                            const list = [2048, 4096, 8192, 16384, 32768, 65536, 131072]
                                         .filter(n => n <= settings.maxContextLength)
                            if (list.indexOf(settings.contextLength) < 0) {
                                list.push(settings.contextLength)
                                list.sort((a, b) => a - b)
                            }
                            return list
                        }
                        model: sizes.map(n => qsTr("%1 tokens").arg(n.toLocaleString(Qt.locale(), "f", 0)))
                        currentIndex: Math.max(0, sizes.indexOf(settings.contextLength))
                        Layout.preferredWidth: 200
                        Accessible.name: qsTr("Context length")
                        Accessible.description: contextHint.text
                        onActivated: (i) => {
                            if (sizes[i] === settings.contextLength) return
                            settings.contextLength = sizes[i]
                            root.reloadIfLoaded()
                        }
                    }
                    // The cache holds this many tokens for all answers together; one conversation ends at the
                    // model's last position (the live panel's "of N tokens").
                    Label {
                        id: contextHint
                        visible: settings.contextLength > settings.maxContextLength
                        text: visible ? qsTr("This model's positions end at %1 tokens: one conversation holds at most that many.")
                                            .arg(settings.maxContextLength.toLocaleString(Qt.locale(), "f", 0)) : ""
                        color: Theme.muted
                        font.pointSize: Theme.smallFontSize
                        wrapMode: Text.Wrap
                        Layout.fillWidth: true
                    }
                }
                RowLayout {
                    Label { text: qsTr("KV cache"); color: Theme.text; Layout.preferredWidth: 140 }
                    ComboBox {
                        id: kvBox
                        readonly property var options: settings.kvCacheOptions
                        model: options.map(o => o.bytes > 0 ? qsTr("%1 (≈ %2)").arg(o.name).arg(settings.formatBytes(o.bytes))
                                                            : o.name)
                        currentIndex: Math.max(0, options.findIndex(o => o.name === settings.resolvedKvCache()))
                        Layout.preferredWidth: 200
                        Accessible.name: qsTr("KV cache")
                        Accessible.description: kvHint.text
                        // Off only when a format cannot run where the model runs; the hint then says why.
                        enabled: options.every(o => o.enabled)
                        onActivated: (i) => {
                            if (options[i].name === settings.kvCache) return
                            settings.kvCache = options[i].name
                            root.reloadIfLoaded()
                        }
                    }
                    Label {
                        id: kvHint
                        text: {
                            const off = kvBox.options.find(o => !o.enabled)
                            if (off) return qsTr("int8: %1").arg(off.reason)
                            const on = kvBox.options[kvBox.currentIndex]
                            return on ? on.reason : ""
                        }
                        color: Theme.muted
                        font.pointSize: Theme.smallFontSize
                        wrapMode: Text.Wrap
                        Layout.fillWidth: true
                    }
                }
                CheckBox {
                    text: qsTr("Keep quantized weights on disk")
                    checked: settings.keepQuantizedWeights
                    onToggled: settings.keepQuantizedWeights = checked
                    Accessible.name: qsTr("Keep quantized weights on disk")
                    Accessible.description: hint.text
                }
                Label {
                    id: hint
                    text: qsTr("int8, fp8 and int4 then load faster the next time; one file per model and precision in ~/.cache/cosmos-chat/quantized (the 7B in int8: about 7.1 GB, in int4 3.8 GB).")
                    color: Theme.muted
                    font.pointSize: Theme.smallFontSize
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
            }

            // --- sampling ---
            SettingsSection {
                title: qsTr("Sampling")
                subtitle: qsTr("Cosmos-Reason1 recommends temperature 0.6, top-p 0.95, repetition penalty 1.05 and 4096 new tokens.")
                Layout.fillWidth: true

                component SliderRow: RowLayout {
                    id: sliderRow
                    property string label
                    property real from
                    property real to
                    property real step
                    property real value
                    property int decimals: 2
                    signal moved(real value)
                    Layout.fillWidth: true
                    Label { text: sliderRow.label; color: Theme.text; Layout.preferredWidth: 140 }
                    Slider {
                        from: sliderRow.from
                        to: sliderRow.to
                        stepSize: sliderRow.step
                        value: sliderRow.value
                        snapMode: Slider.SnapAlways
                        Layout.fillWidth: true
                        Accessible.name: sliderRow.label
                        onMoved: sliderRow.moved(value)
                    }
                    Label {
                        text: sliderRow.value.toFixed(sliderRow.decimals)
                        color: Theme.text
                        font.family: Theme.monoFamily
                        horizontalAlignment: Text.AlignRight
                        Layout.preferredWidth: 48
                    }
                }

                SliderRow {
                    label: qsTr("Temperature")
                    from: 0; to: 2; step: 0.05
                    value: settings.temperature
                    onMoved: (v) => settings.temperature = v
                }
                Label {
                    visible: settings.temperature === 0
                    text: qsTr("0 is greedy: always the most likely token.")
                    color: Theme.muted
                    font.pointSize: Theme.smallFontSize
                    Layout.leftMargin: 146
                }
                SliderRow {
                    label: qsTr("Top-p")
                    from: 0.05; to: 1; step: 0.01
                    value: settings.topP
                    onMoved: (v) => settings.topP = v
                }
                SliderRow {
                    label: qsTr("Repetition penalty")
                    from: 1; to: 2; step: 0.01
                    value: settings.repetitionPenalty
                    onMoved: (v) => settings.repetitionPenalty = v
                }
                RowLayout {
                    Label { text: qsTr("Top-k"); color: Theme.text; Layout.preferredWidth: 140 }
                    SpinBox {
                        from: 0; to: 1000
                        value: settings.topK
                        editable: true
                        Accessible.name: qsTr("Top-k, 0 is off")
                        onValueModified: settings.topK = value
                    }
                    Label { text: qsTr("0 is off"); color: Theme.muted; font.pointSize: Theme.smallFontSize }
                }
                RowLayout {
                    Label { text: qsTr("Max new tokens"); color: Theme.text; Layout.preferredWidth: 140 }
                    SpinBox {
                        from: 1; to: 131072
                        stepSize: 256
                        value: settings.maxNewTokens
                        editable: true
                        Accessible.name: qsTr("Maximum new tokens")
                        onValueModified: settings.maxNewTokens = value
                    }
                }
                RowLayout {
                    Label { text: qsTr("Seed"); color: Theme.text; Layout.preferredWidth: 140 }
                    CheckBox {
                        id: randomSeed
                        text: qsTr("Random")
                        checked: settings.seed < 0
                        Accessible.name: qsTr("Random seed for every reply")
                        onToggled: settings.seed = checked ? -1 : 0
                    }
                    SpinBox {
                        enabled: !randomSeed.checked
                        from: 0; to: 2147483647
                        value: Math.max(0, settings.seed)
                        editable: true
                        Accessible.name: qsTr("Seed")
                        onValueModified: settings.seed = value
                    }
                }
                Button {
                    text: qsTr("Restore the recommended values")
                    flat: true
                    onClicked: settings.resetSampling()
                }
            }

            // --- system prompt ---
            SettingsSection {
                title: qsTr("System prompt")
                subtitle: qsTr("Sent before every conversation. The default asks for the reasoning in <think> and the answer in <answer>.")
                Layout.fillWidth: true
                RowLayout {
                    Label { text: qsTr("Preset"); color: Theme.text; Layout.preferredWidth: 140 }
                    ComboBox {
                        id: presetBox
                        model: settings.systemPromptPresets()
                        textRole: "name"
                        Layout.preferredWidth: 260
                        displayText: {
                            const presets = settings.systemPromptPresets()
                            for (const p of presets) if (p.text === settings.systemPrompt) return p.name
                            return qsTr("Custom")
                        }
                        Accessible.name: qsTr("System prompt preset")
                        onActivated: (i) => settings.systemPrompt = model[i].text
                    }
                }
                ScrollView {
                    Layout.fillWidth: true
                    Layout.preferredHeight: 130
                    TextArea {
                        id: promptArea
                        text: settings.systemPrompt
                        wrapMode: TextEdit.Wrap
                        selectByMouse: true
                        font.family: Theme.monoFamily
                        font.pointSize: Theme.fontSize - 0.5
                        placeholderText: qsTr("No system prompt")
                        Accessible.name: qsTr("System prompt")
                        onEditingFinished: settings.systemPrompt = text
                        background: Rectangle {
                            radius: 6
                            color: Theme.raised
                            border.color: promptArea.activeFocus ? Theme.accent : Theme.border
                        }
                    }
                }
                Button {
                    text: qsTr("Restore the default prompt")
                    flat: true
                    onClicked: settings.resetSystemPrompt()
                }
            }

            // --- appearance ---
            SettingsSection {
                title: qsTr("Appearance")
                Layout.fillWidth: true
                RowLayout {
                    Label { text: qsTr("Theme"); color: Theme.text; Layout.preferredWidth: 140 }
                    ComboBox {
                        readonly property var values: ["system", "light", "dark"]
                        model: [qsTr("Follow the system"), qsTr("Light"), qsTr("Dark")]
                        currentIndex: Math.max(0, values.indexOf(settings.theme))
                        Layout.preferredWidth: 200
                        Accessible.name: qsTr("Theme")
                        onActivated: (i) => settings.theme = values[i]
                    }
                }
                RowLayout {
                    Label { text: qsTr("Text size"); color: Theme.text; Layout.preferredWidth: 140 }
                    SpinBox {
                        from: 7; to: 24
                        value: settings.fontSize
                        Accessible.name: qsTr("Text size in points")
                        onValueModified: settings.fontSize = value
                    }
                    Label { text: qsTr("points"); color: Theme.muted }
                }
            }

            // --- about ---
            SettingsSection {
                title: qsTr("About")
                Layout.fillWidth: true
                GridLayout {
                    columns: 2
                    columnSpacing: 12
                    rowSpacing: 4
                    Layout.fillWidth: true
                    Label { text: qsTr("Version"); color: Theme.muted }
                    Label { text: appInfo.version; color: Theme.text }
                    Label { text: qsTr("Conversations"); color: Theme.muted }
                    TextEdit { text: appInfo.databaseFile; readOnly: true; selectByMouse: true; color: Theme.text; font.pointSize: Theme.fontSize; wrapMode: TextEdit.WrapAnywhere; Layout.fillWidth: true }
                    Label { text: qsTr("Log file"); color: Theme.muted }
                    TextEdit { text: appInfo.logFile; readOnly: true; selectByMouse: true; color: Theme.text; font.pointSize: Theme.fontSize; wrapMode: TextEdit.WrapAnywhere; Layout.fillWidth: true }
                }
            }

            Item { Layout.preferredHeight: 24 }
        }
    }
}
