// Composer: Enter sends, Shift+Enter starts a new line, Esc stops a running reply, and nothing is
// sent (the text is kept) while sending is blocked. The `chat` view-model is a fake here.
import QtQuick
import QtTest
import CosmosChat

Item {
    id: root
    width: 800
    height: 300

    QtObject {
        id: fakeChat
        property bool busy: false
        property bool canSend: true
        property string blockedReason: ""
        property var sentTexts: []
        property int stops: 0
        property int regenerations: 0
        function send(text) {
            if (!canSend) return false
            sentTexts = sentTexts.concat([text])
            return true
        }
        function stop() { stops += 1 }
        function regenerate() { regenerations += 1; return true }
    }

    Component {
        id: composerComponent
        Composer {
            width: 600
            chatModel: fakeChat
        }
    }

    TestCase {
        name: "Composer"
        when: windowShown

        property var composer: null
        property var input: null

        function init() {
            fakeChat.busy = false
            fakeChat.canSend = true
            fakeChat.blockedReason = ""
            fakeChat.sentTexts = []
            fakeChat.stops = 0
            fakeChat.regenerations = 0
            composer = createTemporaryObject(composerComponent, root)
            verify(composer)
            input = findChild(composer, "composerInput")
            verify(input)
            composer.focusInput()
            tryVerify(() => input.activeFocus)
        }

        function typeText(text) {
            for (const ch of text) keyClick(ch)
        }

        function test_enterSends() {
            const sent = signalSpy.createObject(root, { target: composer, signalName: "sent" })
            typeText("hello")
            compare(input.text, "hello")
            keyClick(Qt.Key_Return)
            compare(fakeChat.sentTexts, ["hello"])
            compare(input.text, "")
            compare(sent.count, 1)
            sent.destroy()
        }

        function test_keypadEnterSends() {
            typeText("hi")
            keyClick(Qt.Key_Enter)
            compare(fakeChat.sentTexts, ["hi"])
        }

        function test_shiftEnterAddsLine() {
            typeText("first")
            keyClick(Qt.Key_Return, Qt.ShiftModifier)
            typeText("second")
            compare(fakeChat.sentTexts, [])
            compare(input.text, "first\nsecond")
            keyClick(Qt.Key_Return)
            compare(fakeChat.sentTexts, ["first\nsecond"])
        }

        function test_blankIsNotSent() {
            typeText("   ")
            keyClick(Qt.Key_Return)
            compare(fakeChat.sentTexts, [])
            const button = findChild(composer, "sendButton")
            verify(!button.enabled)
        }

        function test_blockedKeepsText() {
            fakeChat.canSend = false
            fakeChat.blockedReason = "Load a model first"
            typeText("question")
            keyClick(Qt.Key_Return)
            compare(fakeChat.sentTexts, [])
            compare(input.text, "question")
            compare(input.placeholderText, "Load a model first")
            verify(!findChild(composer, "sendButton").enabled)
        }

        function test_escapeStopsWhileBusy() {
            fakeChat.busy = true
            keyClick(Qt.Key_Escape)
            compare(fakeChat.stops, 1)
            const button = findChild(composer, "sendButton")
            verify(button.enabled)        // Stop
            mouseClick(button)
            compare(fakeChat.stops, 2)
            fakeChat.busy = false
            keyClick(Qt.Key_Escape)
            compare(fakeChat.stops, 2)
        }

        function test_sendButton() {
            const button = findChild(composer, "sendButton")
            verify(!button.enabled)
            typeText("via button")
            verify(button.enabled)
            mouseClick(button)
            compare(fakeChat.sentTexts, ["via button"])
        }

        function test_regenerate() {
            const button = findChild(composer, "regenerateButton")
            verify(!button.visible)
            composer.canRegenerate = true
            verify(button.visible)
            mouseClick(button)
            compare(fakeChat.regenerations, 1)
            fakeChat.busy = true
            verify(!button.visible)
        }
    }

    Component {
        id: signalSpy
        SignalSpy {}
    }
}
