// Composer: Enter sends, Shift+Enter starts a new line, Esc stops a running reply, and nothing is
// sent (the text is kept) while sending is blocked; the answers button sends the typed message for
// n answers (chat.sendForAnswers) or, with nothing typed, asks n answers to the last message. The
// `chat` view-model is a fake here.
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
        property string answersBlockedReason: ""
        property int minAnswers: 2
        property int maxAnswers: 8
        property var answerCalls: []    // {text, n}: text "" for generateAnswers
        function sendForAnswers(text, n) {
            if (!canSend) return false
            answerCalls = answerCalls.concat([{ text: text, n: n }])
            return true
        }
        function generateAnswers(n) { answerCalls = answerCalls.concat([{ text: "", n: n }]); return true }
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
            fakeChat.answersBlockedReason = ""
            fakeChat.answerCalls = []
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

        function pickAnswers(n) {
            const b = findChild(composer, "answersButton")
            mouseClick(b)
            tryVerify(() => b.menu.opened)
            for (let i = 0; i < b.menu.count; ++i)
                if (b.menu.itemAt(i).objectName === "answers" + n) { mouseClick(b.menu.itemAt(i)); break }
            tryVerify(() => !b.menu.visible)
        }

        function test_answersSendTheTypedMessage() {
            const b = findChild(composer, "answersButton")
            verify(!b.visible)                 // nothing typed, nothing to answer again
            const sent = signalSpy.createObject(root, { target: composer, signalName: "sent" })
            typeText("why")
            verify(b.visible)
            compare(b.Accessible.name, "Send and generate several answers")
            pickAnswers(5)
            compare(fakeChat.answerCalls, [{ text: "why", n: 5 }])
            compare(input.text, "")
            compare(sent.count, 1)
            compare(fakeChat.sentTexts, [])
            sent.destroy()
        }

        function test_answersToTheLastMessage() {
            composer.canRegenerate = true
            const b = findChild(composer, "answersButton")
            verify(b.visible)
            compare(b.Accessible.name, "Generate several answers to the last message")
            pickAnswers(2)
            compare(fakeChat.answerCalls, [{ text: "", n: 2 }])
            fakeChat.busy = true
            verify(!b.visible)
        }

        function test_answersRefusedKeepTheText() {
            fakeChat.answersBlockedReason = "every answer would be the same"
            typeText("why")
            const b = findChild(composer, "answersButton")
            verify(b.tip.indexOf("every answer would be the same") >= 0)
            mouseClick(b)
            tryVerify(() => b.menu.opened)
            for (let i = 0; i < b.menu.count; ++i)
                if (b.menu.itemAt(i).objectName.startsWith("answers") && b.menu.itemAt(i).objectName !== "answersReason")
                    verify(!b.menu.itemAt(i).enabled)
            b.menu.close()
            compare(fakeChat.answerCalls, [])
            compare(input.text, "why")
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
