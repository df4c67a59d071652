// Colors, sizes and fonts shared by every view. Main.qml sets `dark` and `fontSize` from the
// settings (theme "system" follows the desktop's palette).
pragma Singleton
import QtQuick

QtObject {
    property bool dark: false
    property int fontSize: 10          // points, the body text
    readonly property int smallFontSize: Math.max(7, fontSize - 1)
    readonly property int titleFontSize: fontSize + 4
    readonly property string monoFamily: "DejaVu Sans Mono"

    readonly property color accent: dark ? "#8ccf19" : "#4a8500"      // NVIDIA green, readable on both
    readonly property color accentText: dark ? "#10160a" : "#ffffff"
    readonly property color window: dark ? "#1d1f23" : "#ffffff"
    readonly property color sidebar: dark ? "#16181b" : "#f3f4f6"
    readonly property color surface: dark ? "#272a30" : "#f4f5f7"
    readonly property color raised: dark ? "#2f333a" : "#ffffff"
    readonly property color hover: dark ? "#30343b" : "#e8eaee"
    readonly property color selected: dark ? "#353a43" : "#dfe3e9"
    readonly property color border: dark ? "#3a3e46" : "#d9dce1"
    readonly property color text: dark ? "#e7e9ec" : "#1f2328"
    readonly property color muted: dark ? "#9aa1ab" : "#5d636b"
    readonly property color userBubble: dark ? "#2c3e55" : "#e6effb"
    readonly property color codeBackground: dark ? "#15171a" : "#f6f8fa"
    readonly property color codeHeader: dark ? "#1f2226" : "#eceef1"
    readonly property color reasoningBar: dark ? "#4b525c" : "#c5cad1"
    readonly property color danger: dark ? "#ff6b6b" : "#c62828"
    readonly property color dangerBackground: dark ? "#3a1f22" : "#fdecea"
    readonly property color warningBackground: dark ? "#3a321c" : "#fff6db"
    readonly property color infoBackground: dark ? "#1e3040" : "#e8f2fd"
    readonly property color link: dark ? "#7cb7ff" : "#0b5cad"

    // Puts text on the clipboard (QML has no clipboard API: a hidden TextEdit copies it).
    function copyText(value) {
        clipboardHelper.text = value
        clipboardHelper.selectAll()
        clipboardHelper.copy()
        clipboardHelper.text = ""
    }
    property TextEdit clipboardHelper: TextEdit { visible: false; textFormat: TextEdit.PlainText }

    readonly property int radius: 8
    readonly property int spacing: 8
    readonly property int sidebarWidth: 264
    readonly property int panelWidth: 300
    readonly property int contentMaxWidth: 860
}
