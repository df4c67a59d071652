// The sidebar's search pieces: SearchField (typing, Esc clears it and is then left to the window,
// the clear button) and SearchResultDelegate (title, or "New conversation" for an untitled one;
// the snippet as styled text, so markup escaped by SearchResultsModel shows as text; click and
// Enter choose it).
import QtQuick
import QtTest
import CosmosChat

Item {
    id: root
    width: 400
    height: 400

    Component {
        id: fieldComponent
        SearchField { width: 260 }
    }
    Component {
        id: resultComponent
        SearchResultDelegate {
            width: 260
            index: 0
            conversationId: 3
            messageId: 9
            title: "Robots"
            snippet: "the <b>robot</b> says &lt;b&gt;"
            plainSnippet: "the robot says <b>"
        }
    }

    TestCase {
        name: "Search"
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

        function test_escapeClears() {
            const f = createTemporaryObject(fieldComponent, root)
            f.forceActiveFocus()
            keyClick("r")
            keyClick("o")
            compare(f.text, "ro")
            const clear = find(f, (it) => it.tip === "Clear the search (Esc)")
            verify(clear.visible)
            keyClick(Qt.Key_Escape)
            compare(f.text, "")
            verify(!clear.visible)
            verify(f.activeFocus)
        }

        function test_clearButton() {
            const f = createTemporaryObject(fieldComponent, root)
            f.text = "cup"
            const clear = find(f, (it) => it.tip === "Clear the search (Esc)")
            mouseClick(clear)
            compare(f.text, "")
        }

        function test_resultShowsTitleAndSnippet() {
            const r = createTemporaryObject(resultComponent, root)
            const title = find(r, (it) => it.objectName === "resultTitle")
            const snippet = find(r, (it) => it.objectName === "resultSnippet")
            compare(title.text, "Robots")
            compare(title.textFormat, Text.PlainText)
            compare(snippet.textFormat, Text.StyledText)
            compare(r.Accessible.name, "Robots: the robot says <b>")
            r.title = ""
            compare(title.text, "New conversation")
        }

        function test_clickAndEnterChoose() {
            const r = createTemporaryObject(resultComponent, root)
            const chosen = createTemporaryObject(signalSpy, root, { target: r, signalName: "chosen" })
            mouseClick(r)
            compare(chosen.count, 1)
            r.forceActiveFocus()
            keyClick(Qt.Key_Return)
            compare(chosen.count, 2)
        }
    }

    Component {
        id: signalSpy
        SignalSpy {}
    }
}
