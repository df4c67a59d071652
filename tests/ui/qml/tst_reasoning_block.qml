// ReasoningBlock: open while the reply streams, folded when it ends (unless the reader toggled
// it), titled "Thinking…" then "Thought for N.N s".
import QtQuick
import QtTest
import CosmosChat

Item {
    id: root
    width: 600
    height: 400

    Component {
        id: blockComponent
        ReasoningBlock {
            width: 500
            reasoning: "The cup is full.\nThe arm is fast."
        }
    }

    TestCase {
        name: "ReasoningBlock"
        when: windowShown

        function findLabel(item, pattern) {
            if (item.text !== undefined && String(item.text).match(pattern)) return item
            for (let i = 0; i < item.children.length; ++i) {
                const found = findLabel(item.children[i], pattern)
                if (found) return found
            }
            if (item.contentItem) return findLabel(item.contentItem, pattern)
            return null
        }

        function test_followsStreaming() {
            const block = createTemporaryObject(blockComponent, root, { streaming: true, thinking: true })
            verify(block.expanded)
            verify(findLabel(block, /^Thinking/))
            block.thinking = false
            block.seconds = 1.24
            verify(block.expanded)
            block.streaming = false
            verify(!block.expanded)
            verify(findLabel(block, /^Thought for 1\.2 s$/))
        }

        function test_userToggleWins() {
            const block = createTemporaryObject(blockComponent, root, { streaming: true, thinking: false, seconds: 2 })
            verify(block.expanded)
            const header = block.children[0]
            mouseClick(header)
            verify(!block.expanded)
            block.streaming = false
            verify(!block.expanded)
            mouseClick(header)
            verify(block.expanded)
        }

        function test_loadedReplyStartsFolded() {
            const block = createTemporaryObject(blockComponent, root, { streaming: false, seconds: 0 })
            verify(!block.expanded)
            verify(findLabel(block, /^Reasoning$/))
        }
    }
}
