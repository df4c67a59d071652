// The file dialogs of export and import (QtQuick.Dialogs). exportConversation(id) and exportAll()
// ask where to save, with the format chosen in the dialog's type list (a file name ending in .md,
// .json, .html, .pdf or .txt decides instead); importFile() asks for a file. The work and the
// outcome (shown in the window's banner) are the `transfer` object's (ConversationTransfer).
import QtQuick
import QtQuick.Dialogs

Item {
    id: root
    visible: false

    function exportConversation(id) {
        if (!(id > 0)) return
        exportDialog.conversationId = id
        exportDialog.title = qsTr("Export the conversation")
        openExport()
    }
    function exportAll() {
        exportDialog.conversationId = 0
        exportDialog.title = qsTr("Export all conversations")
        openExport()
    }
    function importFile() {
        importDialog.currentFolder = transfer.folder
        importDialog.open()
    }
    // The dialog starts in the last folder used, on a name made from the title and the format.
    function openExport() {
        exportDialog.currentFolder = transfer.folder
        exportDialog.selectedFile = transfer.suggestedFile(exportDialog.conversationId,
                                                           formatAt(exportDialog.selectedNameFilter.index))
        exportDialog.open()
    }

    FileDialog {
        id: exportDialog
        property var conversationId: 0
        fileMode: FileDialog.SaveFile
        acceptLabel: qsTr("Export")
        nameFilters: transfer.exportNameFilters
        onAccepted: {
            const format = root.formatAt(selectedNameFilter.index)
            if (conversationId > 0) transfer.exportConversation(conversationId, "" + selectedFile, format)
            else transfer.exportAll("" + selectedFile, format)
        }
    }
    FileDialog {
        id: importDialog
        title: qsTr("Import conversations")
        fileMode: FileDialog.OpenFile
        acceptLabel: qsTr("Import")
        nameFilters: transfer.importNameFilters
        onAccepted: transfer.importFile("" + selectedFile)
    }

    function formatAt(i) {
        const formats = transfer.formats
        return i >= 0 && i < formats.length ? formats[i].name : "markdown"
    }
}
