package web

import (
	"fmt"
	"html/template"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// The pictures of the pages, drawn as inline SVG on the server (no script draws
// anything): the DAG of a run, its Gantt timeline, the bar strip of recent runs and a
// table's retention horizons. Every text in them is escaped.

var esc = template.HTMLEscapeString

// dagNode is a stage to draw.
type dagNode struct {
	Name, Kind string
	DependsOn  []string
	Status     scheduler.Status
}

// Layout of the DAG: stages in columns by depth (the longest path from a root), each
// column ordered by its parents' rows.
const (
	nodeW, nodeH = 176, 38
	gapX, gapY   = 48, 14
	pad          = 8
)

// dagSVG draws a graph of stages, each coloured by its state and linking to its
// details (#stage-NAME) on the page.
func dagSVG(nodes []dagNode) template.HTML {
	if len(nodes) == 0 {
		return ""
	}
	l := layoutDAG(nodes)
	byName, depth, row := l.byName, l.depth, l.row
	w := pad*2 + l.cols*nodeW + (l.cols-1)*gapX
	h := pad*2 + l.rows*nodeH + (l.rows-1)*gapY
	x := func(i int) int { return pad + depth[i]*(nodeW+gapX) }
	y := func(i int) int { return pad + int(row[i])*(nodeH+gapY) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="dag" role="img" aria-label="stage graph" width="%d" height="%d" viewBox="0 0 %d %d">`, w, h, w, h)
	for i, n := range nodes {
		for _, p := range n.DependsOn {
			j, ok := byName[p]
			if !ok {
				continue
			}
			x1, y1 := x(j)+nodeW, y(j)+nodeH/2
			x2, y2 := x(i), y(i)+nodeH/2
			mx := (x1 + x2) / 2
			fmt.Fprintf(&b, `<path class="edge" d="M%d %d C%d %d %d %d %d %d"/>`, x1, y1, mx, y1, mx, y2, x2, y2)
		}
	}
	for i, n := range nodes {
		sub := n.Kind
		if n.Status != "" {
			sub += " · " + string(n.Status)
			fmt.Fprintf(&b, `<a href="#stage-%s">`, esc(n.Name))
		}
		fmt.Fprintf(&b, `<g class="node st-%s" data-stage="%s"><title>%s (%s)</title>`, esc(string(n.Status)), esc(n.Name), esc(n.Name), esc(sub))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="6"/>`, x(i), y(i), nodeW, nodeH)
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="n">%s</text>`, x(i)+10, y(i)+16, esc(clip(n.Name, 24)))
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="k">%s</text></g>`, x(i)+10, y(i)+30, esc(sub))
		if n.Status != "" {
			b.WriteString(`</a>`)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// dagLayout is where dagSVG draws a graph's stages: each in the column of its depth
// (the longest chain of dependencies before it), at a row in its column ordered by its
// parents' rows.
type dagLayout struct {
	byName     map[string]int // a stage's index in the nodes
	depth      []int
	row        []float64
	cols, rows int
}

// layoutDAG places the nodes of a graph.
func layoutDAG(nodes []dagNode) *dagLayout {
	byName := map[string]int{}
	for i, n := range nodes {
		byName[n.Name] = i
	}
	depth := make([]int, len(nodes))
	var visit func(i int, seen map[int]bool) int
	memo := map[int]int{}
	visit = func(i int, seen map[int]bool) int {
		if d, ok := memo[i]; ok {
			return d
		}
		if seen[i] {
			return 0 // a cycle cannot be: a run's graph was checked; stay safe
		}
		seen[i] = true
		d := 0
		for _, p := range nodes[i].DependsOn {
			if j, ok := byName[p]; ok {
				d = max(d, visit(j, seen)+1)
			}
		}
		memo[i] = d
		return d
	}
	maxDepth := 0
	for i := range nodes {
		depth[i] = visit(i, map[int]bool{})
		maxDepth = max(maxDepth, depth[i])
	}
	cols := make([][]int, maxDepth+1)
	for i := range nodes {
		cols[depth[i]] = append(cols[depth[i]], i)
	}
	row := make([]float64, len(nodes))
	for c, col := range cols {
		if c > 0 {
			sort.SliceStable(col, func(a, b int) bool {
				return parentRow(nodes[col[a]], byName, row) < parentRow(nodes[col[b]], byName, row)
			})
		}
		for r, i := range col {
			row[i] = float64(r)
		}
	}
	rows := 0
	for _, col := range cols {
		rows = max(rows, len(col))
	}
	return &dagLayout{byName: byName, depth: depth, row: row, cols: len(cols), rows: rows}
}

func parentRow(n dagNode, byName map[string]int, row []float64) float64 {
	sum, k := 0.0, 0
	for _, p := range n.DependsOn {
		if j, ok := byName[p]; ok {
			sum += row[j]
			k++
		}
	}
	if k == 0 {
		return 0
	}
	return sum / float64(k)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// ganttSVG draws each stage's attempts on one time axis, from the run's start to its
// end (or now).
func ganttSVG(rec *scheduler.Record, now time.Time) template.HTML {
	start, end := rec.Start, rec.End
	if start.IsZero() {
		return ""
	}
	if end.IsZero() {
		end = now
	}
	for _, s := range rec.Stages {
		for _, a := range s.Attempts {
			if !a.End.IsZero() && a.End.After(end) {
				end = a.End
			}
		}
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Millisecond
	}
	const label, plot, rowH = 190, 720, 20
	w := label + plot + 20
	h := 28 + len(rec.Stages)*rowH
	xt := func(t time.Time) float64 { return label + float64(t.Sub(start))/float64(span)*plot }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="gantt" role="img" aria-label="timeline of stage attempts" width="%d" height="%d" viewBox="0 0 %d %d">`, w, h, w, h)
	for k := 0; k <= 4; k++ {
		x := label + plot*k/4
		anchor := "start"
		if k == 4 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<line class="tick" x1="%d" y1="14" x2="%d" y2="%d"/><text class="axis" text-anchor="%s" x="%d" y="10">+%s</text>`, x, x, h, anchor, x, esc(durationWords(span*time.Duration(k)/4)))
	}
	for i, s := range rec.Stages {
		y := 20 + i*rowH
		fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d">%s</text>`, label-8, y+13, esc(clip(s.Name, 26)))
		for j, a := range s.Attempts {
			ae := a.End
			if ae.IsZero() {
				ae = end
			}
			cls := string(s.Status)
			switch {
			case a.Cancelled:
				cls = "cancelled" // a cancel is no failure
			case j < len(s.Attempts)-1 || (a.Error != "" && s.Status != scheduler.Running):
				cls = "failed"
			}
			x1, x2 := xt(a.Start), xt(ae)
			fmt.Fprintf(&b, `<rect class="bar st-%s" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s attempt %d: %s, %s</title></rect>`,
				esc(cls), x1, y+3, max(x2-x1, 2), rowH-6, esc(s.Name), a.N, esc(utcText(a.Start)), esc(durationWords(ae.Sub(a.Start))))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// stripSVG draws the recent runs as bars, oldest left: height by duration, colour by
// outcome (a failed run whose retry succeeded is the retry's colour over a red foot; a
// rolled-back run is grey), each a link to its run.
func stripSVG(runs []runEntry) template.HTML {
	const bw, gap, h = 9, 3, 26
	var longest time.Duration = 1
	for _, r := range runs {
		longest = max(longest, r.Duration)
	}
	w := recentRuns * (bw + gap)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="strip" role="img" aria-label="last %d runs" width="%d" height="%d" viewBox="0 0 %d %d">`, len(runs), w, h, w, h)
	rs := slices.Clone(runs)
	slices.Reverse(rs)
	off := (recentRuns - len(rs)) * (bw + gap)
	for i := range recentRuns - len(rs) { // room for the runs to come
		fmt.Fprintf(&b, `<rect class="slot" x="%d" y="%d" width="%d" height="3" rx="1"/>`, i*(bw+gap), h-3, bw)
	}
	for i, r := range rs {
		bh := 4 + int(float64(h-4)*float64(r.Duration)/float64(longest))
		if r.Status == scheduler.Skipped || r.Duration <= 0 {
			bh = 4
		}
		cls, foot := string(r.Status), ""
		switch {
		case r.RolledBackBy != "":
			cls = "rolledback"
		case r.Outcome != string(r.Status): // retried
			cls, foot = string(r.RetryStatus), string(r.Status)
		}
		x := off + i*(bw+gap)
		fmt.Fprintf(&b, `<a href="/runs/%s"><rect class="st-%s" x="%d" y="%d" width="%d" height="%d" rx="1"><title>%s: %s%s</title></rect>`,
			esc(pathEscape(r.ID)), esc(cls), x, h-bh, bw, bh, esc(r.ID), esc(r.Outcome), esc(durSuffix(r.Duration)))
		if foot != "" {
			fmt.Fprintf(&b, `<rect class="st-%s" x="%d" y="%d" width="%d" height="3"><title>%s: %s</title></rect>`, esc(foot), x, h-3, bw, esc(r.ID), esc(r.Outcome))
		}
		b.WriteString(`</a>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func durSuffix(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return ", " + durationWords(d)
}

// horizonSVG draws a table's versions, the part of them a vacuum or a log cleanup run
// now would break, and where each change feed consumer stands: a mark at the first
// version it has yet to read ("next" when it has read them all).
func horizonSVG(ti *tableInfo) template.HTML {
	h := ti.Horizons
	if h == nil {
		return ""
	}
	lo, hi := h.Earliest, h.Latest+1 // hi: the next commit
	const left, plot, labelW = 24, 640, 300
	rowH := 24
	height := 78 + len(ti.Consumers)*rowH
	w := left + plot + labelW
	xv := func(v int64) float64 { return left + float64(v-lo)/float64(max(hi-lo, 1))*plot }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="horizons" role="img" aria-label="versions, retention horizons and change feed readers" width="%d" height="%d" viewBox="0 0 %d %d">`, w, height, w, height)
	fmt.Fprintf(&b, `<rect class="span" x="%d" y="24" width="%d" height="18"/>`, left, plot)
	if v := min(h.VacuumVersion, hi); v > lo {
		fmt.Fprintf(&b, `<rect class="vacuum" x="%d" y="24" width="%.1f" height="18"><title>a vacuum now (files of removed data kept %s) deletes what versions %d to %d need</title></rect>`,
			left, xv(v)-left, esc(h.DeletedFileRetention), lo, v-1)
	}
	if h.LogVersion > lo {
		fmt.Fprintf(&b, `<rect class="logclean" x="%d" y="24" width="%.1f" height="8"><title>a log cleanup now (log kept %s) removes versions %d to %d</title></rect>`,
			left, xv(h.LogVersion)-left, esc(h.LogRetention), lo, h.LogVersion-1)
	}
	step := max((hi-lo)/10, 1)
	for v := lo; v <= hi; v += step {
		label := fmt.Sprintf("v%d", v)
		if v == hi {
			label = fmt.Sprintf("v%d (next)", v)
		}
		fmt.Fprintf(&b, `<line class="tick" x1="%.1f" y1="20" x2="%.1f" y2="42"/><text class="axis mid" x="%.1f" y="15">%s</text>`, xv(v), xv(v), xv(v), label)
	}
	if v := h.VacuumVersion; v > lo && v <= h.Latest {
		fmt.Fprintf(&b, `<line class="hz" x1="%.1f" y1="18" x2="%.1f" y2="%d"/>`, xv(v), xv(v), height)
	}
	for i, c := range ti.Consumers {
		y := 66 + i*rowH
		cls := "ok"
		if c.AtRisk != "" || c.Error != "" {
			cls = "risk"
		}
		x := xv(min(max(c.NextVersion, lo), hi))
		fmt.Fprintf(&b, `<g class="consumer %s"><line x1="%.1f" y1="42" x2="%.1f" y2="%d"/><circle cx="%.1f" cy="%d" r="5"/><text x="%d" y="%d">%s / %s reads from v%d</text><title>%s</title></g>`,
			cls, x, x, y-4, x, y-4, left+plot+16, y, esc(c.Pipeline), esc(c.Stage), c.NextVersion, esc(or(c.AtRisk, "safe: nothing it has yet to read is at risk")))
		fmt.Fprintf(&b, `<line class="lead" x1="%.1f" y1="%d" x2="%d" y2="%d"/>`, x+6, y-4, left+plot+12, y-4)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
