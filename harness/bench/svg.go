package bench

import (
	"fmt"
	"math"
	"strings"
)

// The plot's geometry, in SVG user units.
const (
	svgWidth   = 980
	svgHeight  = 770
	panelW     = 380
	panelH     = 220
	panelLeft  = 90
	panelGapX  = 110
	panelTop   = 110
	panelGapY  = 110
	tickLength = 5
)

// series is one line of a panel.
type series struct {
	label, color, dash string
	y                  []float64
}

// panel is one chart: a title, a y label and its lines over the
// connection counts.
type panel struct {
	title, ylabel string
	lines         []series
	// notes are labels drawn above the first line's points (the ratios).
	notes []string
}

// Colors and dashes of the four kinds of line, shared by every panel.
var (
	serviceStyle  = series{label: "paymentsd (HTTP)", color: "#1f5fbf"}
	bareStyle     = series{label: "bare service (HTTP)", color: "#7b3fa0", dash: "10 3 2 3"}
	ceilingStyle  = series{label: "SQL ceiling (pgbench)", color: "#d9730d", dash: "7 4"}
	emulatorStyle = series{label: "Stripe emulator alone", color: "#3a8f3a", dash: "2 4"}
)

func styled(s series, y []float64) series { s.y = y; return s }

// SVG draws throughput and p99 against connections: fresh payments on the
// left, replays on the right, the service beside the bare service and the
// SQL ceiling.
func SVG(r *Results) string {
	n := len(r.Points)
	conns := make([]int, n)
	var fresh, bareFresh, freshCeil, emu, replay, bareReplay, replayCeil []float64
	var freshP99, bareFreshP99, freshCeilP99, emuP99, replayP99, bareReplayP99, replayCeilP99 []float64
	var freshNotes, replayNotes []string
	for i, p := range r.Points {
		conns[i] = p.Conns
		fresh, bareFresh, freshCeil = append(fresh, p.Fresh.Throughput), append(bareFresh, p.BareFresh.Throughput), append(freshCeil, p.FreshCeiling.TPS)
		emu = append(emu, p.Emulator.Throughput)
		replay, bareReplay, replayCeil = append(replay, p.Replay.Throughput), append(bareReplay, p.BareReplay.Throughput), append(replayCeil, p.ReplayCeiling.TPS)
		freshP99, bareFreshP99, freshCeilP99 = append(freshP99, p.Fresh.P99), append(bareFreshP99, p.BareFresh.P99), append(freshCeilP99, p.FreshCeiling.P99)
		emuP99 = append(emuP99, p.Emulator.P99)
		replayP99, bareReplayP99, replayCeilP99 = append(replayP99, p.Replay.P99), append(bareReplayP99, p.BareReplay.P99), append(replayCeilP99, p.ReplayCeiling.P99)
		freshNotes = append(freshNotes, percent(p.Fresh.Throughput, p.BareFresh.Throughput))
		replayNotes = append(replayNotes, percent(p.Replay.Throughput, p.BareReplay.Throughput))
	}
	panels := [2][2]panel{
		{
			{title: "Fresh payments: throughput", ylabel: "payments / s",
				lines: []series{styled(serviceStyle, fresh), styled(bareStyle, bareFresh), styled(ceilingStyle, freshCeil)}, notes: freshNotes},
			{title: "Replays: throughput", ylabel: "requests / s",
				lines: []series{styled(serviceStyle, replay), styled(bareStyle, bareReplay), styled(ceilingStyle, replayCeil)}, notes: replayNotes},
		},
		{
			{title: "Fresh payments: p99 latency", ylabel: "p99 ms",
				lines: []series{styled(serviceStyle, freshP99), styled(bareStyle, bareFreshP99), styled(ceilingStyle, freshCeilP99), styled(emulatorStyle, emuP99)}},
			{title: "Replays: p99 latency", ylabel: "p99 ms",
				lines: []series{styled(serviceStyle, replayP99), styled(bareStyle, bareReplayP99), styled(ceilingStyle, replayCeilP99)}},
		},
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="30" font-size="18" font-weight="bold">paymentsd against the bare service and the SQL ceiling (%s per run, %s)</text>`+"\n",
		panelLeft, r.Duration.Duration(), r.Started.Format("2006-01-02"))
	legend(&b)
	for row := range 2 {
		for col := range 2 {
			x := float64(panelLeft + col*(panelW+panelGapX))
			y := float64(panelTop + row*(panelH+panelGapY))
			drawPanel(&b, panels[row][col], conns, x, y)
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">Percentages: the service's throughput as a share of the bare service's at that connection count.</text>`+"\n",
		panelLeft, svgHeight-54)
	if s := r.Slow; s != nil {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">Slow processor (every create answered in %.0f ms, %d in flight): the service at %.0f payments/s, the bare service at %.0f: %s.</text>`+"\n",
			panelLeft, svgHeight-34, s.LatencyMS, s.Conns, s.Fresh.Throughput, s.BareFresh.Throughput, percent(s.Fresh.Throughput, s.BareFresh.Throughput))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">The emulator alone answers %s requests/s (see BENCHMARKS.md): off the throughput scale, so only its p99 is drawn.</text>`+"\n",
		panelLeft, svgHeight-14, emulatorRange(emu))
	b.WriteString("</svg>\n")
	return b.String()
}

// emulatorRange is the span of the emulator's throughput, as "3800–10700".
func emulatorRange(emu []float64) string {
	if len(emu) == 0 {
		return "no"
	}
	lo, hi := emu[0], emu[0]
	for _, v := range emu {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return fmt.Sprintf("%.0f–%.0f", lo, hi)
}

// legend draws the key of the four kinds of line.
func legend(b *strings.Builder) {
	x := float64(panelLeft)
	for _, s := range []series{serviceStyle, bareStyle, ceilingStyle, emulatorStyle} {
		fmt.Fprintf(b, `<line x1="%.0f" y1="56" x2="%.0f" y2="56" stroke="%s" stroke-width="2.5"%s/>`, x, x+34, s.color, dashAttr(s.dash))
		fmt.Fprintf(b, `<circle cx="%.0f" cy="56" r="3.5" fill="%s"/>`, x+17, s.color)
		fmt.Fprintf(b, `<text x="%.0f" y="60">%s</text>`+"\n", x+42, s.label)
		x += 215
	}
}

// drawPanel draws one panel with its top-left corner at (x, y).
func drawPanel(b *strings.Builder, p panel, conns []int, x, y float64) {
	top := 0.0
	for _, s := range p.lines {
		for _, v := range s.y {
			top = math.Max(top, v)
		}
	}
	step := niceStep(top / 5)
	ymax := math.Max(step, math.Ceil(top*1.08/step)*step)
	px := func(i int) float64 { return x + xPos(conns, i)*panelW }
	py := func(v float64) float64 { return y + panelH - v/ymax*panelH }

	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="15" font-weight="bold">%s</text>`+"\n", x, y-14, p.title)
	for v := 0.0; v <= ymax+step/2; v += step {
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#e3e3e3"/>`, x, py(v), x+panelW, py(v))
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#333">%s</text>`+"\n", x-tickLength-3, py(v)+4, tickLabel(v, step))
	}
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", x, y, panelW, panelH)
	for i, c := range conns {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#888"/>`, px(i), y+panelH, px(i), y+panelH+tickLength)
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#333">%d</text>`+"\n", px(i), y+panelH+20, c)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#333">concurrent connections (log scale)</text>`+"\n", x+panelW/2, y+panelH+40)
	fmt.Fprintf(b, `<text transform="translate(%.0f %.0f) rotate(-90)" text-anchor="middle" fill="#333">%s</text>`+"\n", x-62, y+panelH/2, p.ylabel)
	for _, s := range p.lines {
		var pts []string
		for i, v := range s.y {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(i), py(v)))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>`+"\n", strings.Join(pts, " "), s.color, dashAttr(s.dash))
		for i, v := range s.y {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s at %d connections</title></circle>`,
				px(i), py(v), s.color, s.label, tickLabel(v, 0.1), conns[i])
		}
		b.WriteString("\n")
	}
	for i, note := range p.notes {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s" font-size="11" font-weight="bold">%s</text>`+"\n",
			px(i), py(p.lines[0].y[i])-9, serviceStyle.color, note)
	}
}

// xPos places the i-th connection count on a log scale from 0 to 1, with
// a margin so the end points stay inside the frame.
func xPos(conns []int, i int) float64 {
	if len(conns) < 2 {
		return 0.5
	}
	lo, hi := math.Log2(float64(conns[0])), math.Log2(float64(conns[len(conns)-1]))
	if hi == lo {
		return 0.5
	}
	return 0.06 + 0.88*(math.Log2(float64(conns[i]))-lo)/(hi-lo)
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*pow {
			return m * pow
		}
	}
	return 10 * pow
}

// tickLabel prints v with as many decimals as step needs.
func tickLabel(v, step float64) string {
	switch {
	case step >= 1:
		return fmt.Sprintf("%.0f", v)
	case step >= 0.1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return ` stroke-dasharray="` + dash + `"`
}
