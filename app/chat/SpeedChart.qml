// Tokens per second over the last minute (stats.history: 240 samples at 4 Hz, oldest first),
// drawn on a Canvas: a filled area under the line, with the peak as the scale.
import QtQuick

Canvas {
    id: root
    property var values: []
    property int capacity: 240
    property color lineColor: Theme.accent
    property color gridColor: Theme.border
    property color labelColor: Theme.muted
    readonly property real peak: {
        let m = 0
        for (let i = 0; i < values.length; ++i) m = Math.max(m, Number(values[i]) || 0)
        return m
    }

    implicitHeight: 110
    onValuesChanged: requestPaint()
    onLineColorChanged: requestPaint()
    onWidthChanged: requestPaint()
    Accessible.role: Accessible.Chart
    Accessible.name: qsTr("Tokens per second over the last minute, peak %1").arg(peak.toFixed(1))

    // A round number at or above v for the scale.
    function niceMax(v) {
        if (v <= 0) return 10
        const p = Math.pow(10, Math.floor(Math.log10(v)))
        for (const f of [1, 2, 2.5, 5, 10]) if (f * p >= v) return f * p
        return 10 * p
    }

    onPaint: {
        const ctx = getContext("2d")
        ctx.reset()
        const w = width, h = height
        const top = 14, bottom = h - 2
        const scale = niceMax(peak)
        ctx.strokeStyle = gridColor
        ctx.lineWidth = 1
        for (let g = 0; g <= 2; ++g) {
            const y = Math.round(top + (bottom - top) * g / 2) + 0.5
            ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(w, y); ctx.stroke()
        }
        ctx.fillStyle = labelColor
        ctx.font = "10px sans-serif"
        ctx.fillText(scale + " tok/s", 2, 10)
        const n = values.length
        if (n < 2) return
        const step = w / (capacity - 1)
        const x0 = w - (n - 1) * step
        const yOf = (v) => bottom - (bottom - top) * Math.min(1, (Number(v) || 0) / scale)
        ctx.beginPath()
        ctx.moveTo(x0, bottom)
        for (let i = 0; i < n; ++i) ctx.lineTo(x0 + i * step, yOf(values[i]))
        ctx.lineTo(x0 + (n - 1) * step, bottom)
        ctx.closePath()
        ctx.fillStyle = Qt.rgba(lineColor.r, lineColor.g, lineColor.b, 0.18)
        ctx.fill()
        ctx.beginPath()
        for (let j = 0; j < n; ++j) {
            const x = x0 + j * step, y = yOf(values[j])
            if (j === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y)
        }
        ctx.strokeStyle = lineColor
        ctx.lineWidth = 1.6
        ctx.stroke()
    }
}
