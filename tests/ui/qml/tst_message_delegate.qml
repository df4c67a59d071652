// MessageDelegate: a user message shows its text and can be edited (Edit → text area → Send or
// Enter calls chat.editAndResend(row, text); Esc and Cancel keep the message); an assistant
// message shows its reasoning in a ReasoningBlock and its answer blocks, its statistics and a copy
// action that puts the answer on the clipboard; while the reply streams the actions are hidden.
// A message with other versions shows the "‹ 2/3 ›" switcher (chat.switchSibling(row, ±1), by
// mouse and keyboard, disabled at the ends and while a single reply streams, enabled while several
// answers stream: chat.canSwitchVersions). The last reply's "Generate N answers" button opens a
// menu of 2..8 answers (mouse and keyboard) calling chat.generateAnswers(n); with greedy sampling
// it says why in its tooltip and menu, and the counts are disabled. A failed reply shows its error.
// The delegate reads the app's context objects `chat`, `settings` and `engine` by name: fakes with
// those ids here (it sees them through the instantiating document's scope).
import QtQuick
import QtTest
import CosmosChat

Item {
    id: root
    width: 900
    height: 700

    QtObject {
        id: chat
        property bool canSend: true
        property bool busy: false
        property bool canSwitchVersions: !busy
        property string answersBlockedReason: ""
        property int minAnswers: 2
        property int maxAnswers: 8
        property var answerRequests: [] // generateAnswers calls: n
        property var switches: []       // switchSibling calls: {row, delta}
        property var edits: []          // accepted: a new version was sent
        property int refusedEdits: 0
        property int regenerations: 0
        // Like ChatViewModel: a blank text, or sending blocked, is refused (false).
        function editAndResend(row, text) {
            if (!canSend || text.trim() === "") { refusedEdits += 1; return false }
            edits = edits.concat([{ row: row, text: text }])
            return true
        }
        function regenerate() { regenerations += 1; return true }
        function generateAnswers(n) { answerRequests = answerRequests.concat([n]); return true }
        function switchSibling(row, delta) {
            if (!canSwitchVersions) return false
            switches = switches.concat([{ row: row, delta: delta }])
            return true
        }
    }
    QtObject {
        id: settings
        function isDemoModel(dir) { return dir === "/models/demo" }
    }
    QtObject {
        id: engine
        property string modelDir: "/models/cosmos"
    }

    ListModel {
        id: answerBlocks
        ListElement { text: "The cup stays in the **gripper**."; kind: "markdown"; language: ""; code: "" }
        ListElement { text: ""; kind: "code"; language: "python"; code: "print(slip_limit())" }
        ListElement { text: "Lower the acceleration."; kind: "markdown"; language: ""; code: "" }
    }
    ListModel { id: noBlocks }

    Component {
        id: delegateComponent
        MessageDelegate {
            width: 800
            index: 0
            messageId: 1
            role: "user"
            content: ""
            reasoning: ""
            thinking: false
            streaming: false
            thoughtSeconds: 0
            stats: ({})
            blocks: noBlocks
            siblingIndex: 1
            siblingCount: 1
            error: ""
        }
    }

    // Pastes the clipboard here to check what a copy action put there.
    Component {
        id: clipboardReader
        TextEdit { textFormat: TextEdit.PlainText }
    }

    TestCase {
        name: "MessageDelegate"
        when: windowShown

        function find(item, pred) {
            if (!item) return null
            if (pred(item)) return item
            for (let i = 0; i < item.children.length; ++i) {
                const found = find(item.children[i], pred)
                if (found) return found
            }
            return null
        }
        function findAll(item, pred, out) {
            if (!out) out = []
            if (!item) return out
            if (pred(item)) out.push(item)
            for (let i = 0; i < item.children.length; ++i) findAll(item.children[i], pred, out)
            return out
        }
        // Waits for the layouts from `top` down to `item` (shown just now) to place it.
        function laidOut(item, top) {
            const chain = []
            for (let it = item; it && it !== top; it = it.parent) chain.unshift(it)
            for (const it of chain) waitForItemPolished(it)
        }
        function button(item, tip) { return find(item, (it) => it.tip === tip) }
        function textButton(item, label) { return find(item, (it) => it.text === label && it.checkable !== undefined) }
        function editArea(item) { return find(item, (it) => it.placeholderText !== undefined && it.readOnly === false) }
        function label(item, text) { return find(item, (it) => it.text === text && it.visible) }
        function typeText(text) { for (const ch of text) keyClick(ch) }

        function user(props) {
            const base = { index: 2, messageId: 7, role: "user", content: "Will it drop the cup?", isLast: true }
            const d = createTemporaryObject(delegateComponent, root, Object.assign(base, props || {}))
            verify(d)
            return d
        }
        function assistant(props) {
            const base = {
                index: 3, messageId: 8, role: "assistant", isLast: true,
                content: "The cup stays in the **gripper**.\n\n```python\nprint(slip_limit())\n```\n\nLower the acceleration.",
                reasoning: "The arm is fast.\nFriction holds the cup.", thoughtSeconds: 2.5,
                stats: { generated_tokens: 42, decode_tok_per_s: 12.34, ttft_s: 0.5 },
                blocks: answerBlocks
            }
            const d = createTemporaryObject(delegateComponent, root, Object.assign(base, props || {}))
            verify(d)
            return d
        }
        function clipboardText() {
            const reader = createTemporaryObject(clipboardReader, root)
            if (!reader.canPaste) return null
            reader.paste()
            return reader.text
        }

        function init() {
            chat.canSend = true
            chat.busy = false
            chat.canSwitchVersions = Qt.binding(() => !chat.busy)
            chat.answersBlockedReason = ""
            chat.answerRequests = []
            chat.switches = []
            chat.edits = []
            chat.refusedEdits = 0
            chat.regenerations = 0
            engine.modelDir = "/models/cosmos"
        }

        // --- the user's message ---

        function test_userShowsText() {
            const d = user()
            verify(find(d, (it) => it.text === "Will it drop the cup?" && it.readOnly === true && it.visible))
            verify(!editArea(d).visible)
            verify(button(d, "Edit and send again").visible)
            verify(!button(d, "Copy the answer").visible)   // the reply's actions are not shown
        }

        function test_editSendsNewVersion() {
            const d = user()
            mouseClick(button(d, "Edit and send again"))
            verify(d.editing)
            const area = editArea(d)
            verify(area.visible)
            compare(area.text, "Will it drop the cup?")
            tryVerify(() => area.activeFocus)
            area.selectAll()
            typeText("Will it spill?")
            compare(area.text, "Will it spill?")
            mouseClick(textButton(d, "Send"))
            compare(chat.edits.length, 1)
            compare(chat.edits[0].row, 2)
            compare(chat.edits[0].text, "Will it spill?")
            verify(!d.editing)
        }

        function test_enterSendsShiftEnterAddsLine() {
            const d = user({ index: 0 })
            mouseClick(button(d, "Edit and send again"))
            const area = editArea(d)
            tryVerify(() => area.activeFocus)
            area.cursorPosition = area.length
            keyClick(Qt.Key_Return, Qt.ShiftModifier)
            typeText("More")
            compare(chat.edits, [])
            keyClick(Qt.Key_Return)
            compare(chat.edits.length, 1)
            compare(chat.edits[0].row, 0)
            compare(chat.edits[0].text, "Will it drop the cup?\nMore")
            verify(!d.editing)
        }

        function test_escapeCancels() {
            const d = user()
            mouseClick(button(d, "Edit and send again"))
            const area = editArea(d)
            tryVerify(() => area.activeFocus)
            area.selectAll()
            typeText("changed")
            keyClick(Qt.Key_Escape)
            verify(!d.editing)
            compare(chat.edits, [])
            verify(!area.visible)
            verify(find(d, (it) => it.text === "Will it drop the cup?" && it.readOnly === true && it.visible))
        }

        function test_cancelButton() {
            const d = user()
            mouseClick(button(d, "Edit and send again"))
            mouseClick(textButton(d, "Cancel"))
            verify(!d.editing)
            compare(chat.edits, [])
        }

        function test_blankEditIsNotSent() {
            const d = user()
            mouseClick(button(d, "Edit and send again"))
            const area = editArea(d)
            tryVerify(() => area.activeFocus)
            area.selectAll()
            keyClick(Qt.Key_Delete)
            compare(area.text, "")
            verify(!textButton(d, "Send").enabled)
            mouseClick(textButton(d, "Send"))
            compare(chat.refusedEdits, 0)      // a disabled button does nothing
            keyClick(Qt.Key_Return)           // Enter asks; the view-model refuses a blank text
            compare(chat.edits, [])
            verify(d.editing)                 // still editing
        }

        function test_editNeedsCanSend() {
            chat.canSend = false
            const d = user()
            verify(!button(d, "Edit and send again").enabled)
        }

        function test_copyUserMessage() {
            const d = user()
            mouseClick(button(d, "Copy the message"))
            const copied = clipboardText()
            if (copied === null) skip("no clipboard on this platform")
            compare(copied, "Will it drop the cup?")
        }

        // --- versions (siblings) ---

        function switcher(item) { return find(item, (it) => it.siblingCount !== undefined && it.row !== undefined && it.visible) }

        function test_noSwitcherWithoutVersions() {
            verify(!switcher(user()))
            verify(!switcher(assistant()))
        }

        function test_switcherOnAReply_data() {
            return [
                { tag: "first of three", index: 1, count: 3, prev: false, next: true },
                { tag: "middle", index: 2, count: 3, prev: true, next: true },
                { tag: "last", index: 3, count: 3, prev: true, next: false },
            ]
        }
        function test_switcherOnAReply(data) {
            const d = assistant({ index: 5, siblingIndex: data.index, siblingCount: data.count })
            const s = switcher(d)
            verify(s)
            verify(label(s, data.index + "/" + data.count))
            const prev = button(s, "Previous version")
            const next = button(s, "Next version")
            compare(prev.enabled, data.prev)
            compare(next.enabled, data.next)
            mouseClick(prev)
            mouseClick(next)
            const expected = []
            if (data.prev) expected.push({ row: 5, delta: -1 })
            if (data.next) expected.push({ row: 5, delta: 1 })
            compare(chat.switches, expected)
        }

        function test_switcherOnAnEditedQuestionByKeyboard() {
            const d = user({ index: 4, siblingIndex: 2, siblingCount: 2 })
            const s = switcher(d)
            verify(s)
            verify(label(s, "2/2"))
            const prev = button(s, "Previous version")
            prev.forceActiveFocus()
            verify(prev.activeFocus)
            keyClick(Qt.Key_Space)
            compare(chat.switches, [{ row: 4, delta: -1 }])
            mouseClick(button(d, "Edit and send again"))
            verify(!switcher(d))                 // hidden while editing
        }

        function test_switcherDisabledWhileStreaming() {
            chat.busy = true
            const d = assistant({ isLast: false, siblingIndex: 2, siblingCount: 3 })
            const s = switcher(d)
            verify(s)
            verify(!button(s, "Previous version").enabled)
            verify(!button(s, "Next version").enabled)
            chat.busy = false
            verify(button(s, "Previous version").enabled)
        }

        // --- the assistant's reply ---

        function test_assistantShowsReasoningAndBlocks() {
            const d = assistant()
            const reasoningBlock = find(d, (it) => it.reasoning === "The arm is fast.\nFriction holds the cup." && it.expanded !== undefined)
            verify(reasoningBlock)
            verify(reasoningBlock.visible)
            verify(!reasoningBlock.expanded)   // a finished reply: folded
            verify(label(reasoningBlock, "Thought for 2.5 s"))
            const blocks = findAll(d, (it) => it.kind !== undefined && it.code !== undefined)
            compare(blocks.length, 3)
            compare(blocks[0].kind, "markdown")
            compare(blocks[1].kind, "code")
            const markdown = find(blocks[0], (it) => it.textFormat === TextEdit.MarkdownText)
            verify(markdown)
            compare(markdown.getText(0, markdown.length), "The cup stays in the gripper.")
            verify(find(blocks[1], (it) => it.text === "print(slip_limit())" && it.visible))
            verify(label(d, "python"))
            verify(label(d, "Cosmos-Reason1"))
            verify(label(d, "42 tokens · 12.3 tok/s · first token 0.50 s"))
            verify(!find(d, (it) => it.text === "(empty reply)" && it.visible))
        }

        function test_demoModelName() {
            engine.modelDir = "/models/demo"
            const d = assistant()
            verify(label(d, "Cosmos (demo model)"))
        }

        function test_copyAnswer() {
            const d = assistant()
            const copy = button(d, "Copy the answer")
            verify(copy.visible)
            compare(copy.opacity, 1)          // the last message shows its actions
            mouseClick(copy)
            const copied = clipboardText()
            if (copied === null) skip("no clipboard on this platform")
            compare(copied, d.content)
        }

        function test_actionsOnlyWhenDone() {
            const d = assistant({ streaming: true, thinking: true, content: "", blocks: noBlocks, stats: {} })
            verify(!button(d, "Copy the answer").visible)
            verify(!button(d, "Regenerate the reply").visible)
            const reasoningBlock = find(d, (it) => it.expanded !== undefined && it.reasoning !== undefined)
            verify(reasoningBlock.visible)
            verify(reasoningBlock.expanded)   // open while it streams
            verify(label(reasoningBlock, "Thinking…"))

            d.thinking = false
            d.content = "The cup"
            verify(!button(d, "Copy the answer").visible)

            d.streaming = false
            verify(button(d, "Copy the answer").visible)
            const regenerate = button(d, "Regenerate the reply")
            verify(regenerate.visible)
            laidOut(regenerate, d)  // the row of actions was just shown
            mouseClick(regenerate)
            compare(chat.regenerations, 1)
            verify(!reasoningBlock.expanded)  // folded once done
        }

        function test_waitingForFirstPiece() {
            const d = assistant({ streaming: true, content: "", reasoning: "", blocks: noBlocks, stats: {} })
            verify(!find(d, (it) => it.expanded !== undefined && it.reasoning !== undefined).visible)
            verify(find(d, (it) => it.spacing === 5 && it.visible))   // the three dots
            verify(!find(d, (it) => it.text === "(empty reply)" && it.visible))
        }

        function test_olderReplyHasNoRegenerate() {
            const d = assistant({ isLast: false })
            verify(!button(d, "Regenerate the reply").visible)
            compare(button(d, "Copy the answer").opacity, 0)   // until hovered
        }

        function test_regenerateNeedsCanSend() {
            chat.canSend = false
            const d = assistant()
            verify(!button(d, "Regenerate the reply").enabled)
        }

        // --- several answers ---

        function test_switcherEnabledWhileSeveralAnswersStream() {
            chat.busy = true
            chat.canSwitchVersions = true
            const d = assistant({ streaming: true, content: "Partial", siblingIndex: 2, siblingCount: 4, stats: {} })
            const s = switcher(d)
            verify(s)
            verify(s.visible)
            verify(label(s, "2/4"))
            verify(button(s, "Previous version").enabled)
            laidOut(button(s, "Next version"), d)
            mouseClick(button(s, "Next version"))
            compare(chat.switches, [{ row: 3, delta: 1 }])
            // The reply's actions wait for its end.
            verify(!button(d, "Copy the answer").visible)
            verify(!button(d, "Regenerate the reply").visible)
            verify(!findChild(d, "answersButton").visible)
        }

        function test_streamingSingleReplyHidesTheRow() {
            chat.busy = true
            const d = assistant({ streaming: true, content: "Partial", stats: {} })
            verify(!switcher(d))
        }

        function answersMenuItem(d, n) {
            const menu = findChild(d, "answersButton").menu
            for (let i = 0; i < menu.count; ++i)
                if (menu.itemAt(i).objectName === "answers" + n) return menu.itemAt(i)
            return null
        }

        function test_generateAnswersByMouse() {
            const d = assistant()
            const b = findChild(d, "answersButton")
            verify(b.visible)
            verify(b.enabled)
            compare(b.Accessible.name, "Generate several answers to the question")
            mouseClick(b)
            tryVerify(() => b.menu.opened)
            compare(b.menu.count, 8)                 // the reason line (hidden) and 2..8
            const four = answersMenuItem(d, 4)
            verify(four.enabled)
            compare(four.text, "4 answers")
            compare(four.Accessible.name, "Generate 4 answers")
            mouseClick(four)
            compare(chat.answerRequests, [4])
            tryVerify(() => !b.menu.visible)
        }

        function test_generateAnswersByKeyboard() {
            const d = assistant()
            const b = findChild(d, "answersButton")
            b.forceActiveFocus()
            verify(b.activeFocus)
            keyClick(Qt.Key_Space)
            tryVerify(() => b.menu.opened)
            keyClick(Qt.Key_Down)                  // 2 answers
            keyClick(Qt.Key_Down)                  // 3 answers
            keyClick(Qt.Key_Return)
            compare(chat.answerRequests, [3])
        }

        function test_generateAnswersExplainsGreedy() {
            chat.answersBlockedReason = "With temperature 0 (greedy sampling) every answer would be the same"
            const d = assistant()
            const b = findChild(d, "answersButton")
            verify(b.enabled)                        // reachable, so it can say why
            verify(b.tip.indexOf("temperature 0") >= 0)
            compare(b.Accessible.description, chat.answersBlockedReason)
            mouseClick(b)
            tryVerify(() => b.menu.opened)
            const reason = findChild(b.menu.contentItem, "answersReason") || b.menu.itemAt(0)
            verify(reason.visible)
            compare(reason.text, chat.answersBlockedReason)
            for (let n = 2; n <= 8; ++n) verify(!answersMenuItem(d, n).enabled)
            mouseClick(answersMenuItem(d, 3))
            compare(chat.answerRequests, [])
            b.menu.close()
        }

        function test_generateAnswersNeedsCanSend() {
            chat.canSend = false
            const d = assistant()
            verify(!findChild(d, "answersButton").enabled)
            verify(!findChild(assistant({ isLast: false }), "answersButton").visible)
        }

        function test_failedReplyShowsItsError() {
            const d = assistant({ content: "Half an", blocks: noBlocks, error: "out of memory", stats: {} })
            const e = findChild(d, "replyError")
            verify(e.visible)
            compare(e.text, "This reply failed: out of memory")
            verify(!find(d, (it) => it.text === "(empty reply)" && it.visible))
            verify(!findChild(assistant(), "replyError").visible)
        }

        function test_emptyReplyAndStopped() {
            const d = assistant({ content: "", reasoning: "", blocks: noBlocks,
                                  stats: { generated_tokens: 1, stop_reason: "cancelled" } })
            verify(label(d, "(empty reply)"))
            verify(label(d, "1 token · stopped"))
        }
    }
}
