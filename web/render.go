package web

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

//go:embed openapi.json
var openAPIDoc []byte

// page names a template of templates/ (each defines "content"; layout.html wraps it).
var pageNames = []string{"pipelines", "pipeline", "run", "runs", "rollback", "backfill", "tables", "table", "schema", "history", "rows", "changes", "diff", "login", "error"}

type pageSet map[string]*template.Template

// parsePages parses every page with the layout and the shared parts.
func parsePages() (pageSet, error) {
	base, err := template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/checks.html")
	if err != nil {
		return nil, fmt.Errorf("web: templates: %w", err)
	}
	set := pageSet{}
	for _, name := range pageNames {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if _, err := t.ParseFS(templateFS, "templates/"+name+".html"); err != nil {
			return nil, fmt.Errorf("web: template %s: %w", name, err)
		}
		set[name] = t
	}
	return set, nil
}

// pageData is what the layout shows around a page.
type pageData struct {
	Title    string
	Section  string // pipelines | tables: the highlighted link
	Auth     bool   // a token is configured: show the logout button
	ReadOnly bool   // the viewer may not trigger, retry or cancel
	Engine   string
	Body     any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name, title, section string, body any) {
	s.renderTemplate(w, r, code, name, "layout", title, section, body)
}

// renderTemplate executes a page's template (the whole layout, or one of its parts for
// a live update).
func (s *Server) renderTemplate(w http.ResponseWriter, r *http.Request, code int, name, tmpl, title, section string, body any) {
	t := s.pages[name]
	data := pageData{Title: title, Section: section, Auth: !s.cfg.Auth.open(), ReadOnly: roleOf(r.Context()) != roleAdmin, Engine: s.cfg.EngineInfo, Body: body}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, tmpl, data); err != nil {
		s.log.Warn("web: render", "page", name, "err", err)
		http.Error(w, "the page failed to render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

func (s *Server) renderError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.render(w, r, code, "error", http.StatusText(code), "", struct {
		Code    int
		Status  string
		Message string
	}{code, http.StatusText(code), msg})
}

// pageError answers an error as a page.
func (s *Server) pageError(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if code == http.StatusInternalServerError {
		s.log.Warn("web: page failed", "path", r.URL.Path, "err", err)
	}
	s.renderError(w, r, code, err.Error())
}

func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := fs.ReadFile(staticFS, "static/"+path.Base(name))
	if err != nil || name != path.Base(name) {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Write(b)
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDoc)
}

// Template functions.
var funcs = template.FuncMap{
	"statusClass": func(s any) string { return "st-" + fmt.Sprint(s) },
	"utc":         utcText,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"inZone": func(t time.Time, zone string) string {
		if t.IsZero() {
			return ""
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			loc = time.UTC
		}
		return t.In(loc).Format("Mon 2006-01-02 15:04 MST")
	},
	"ms":        func(ms float64) string { return durationWords(time.Duration(ms * float64(time.Millisecond))) },
	"count":     countText,
	"hasPrefix": strings.HasPrefix,
	"dur":       durationWords,
	"bytes":     bytesText,
	"join":      strings.Join,
	"lines":     textLines,
	"query":     url.QueryEscape,
	"path":      url.PathEscape,
	"add":       func(a, b int64) int64 { return a + b },
	"sub":       func(a, b int64) int64 { return a - b },
	"seq": func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	},
	"deref": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
	"derefInt": func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	},
	"active": func(s scheduler.Status) bool { return s.Active() },
	"svg":    func(s string) template.HTML { return template.HTML(s) },
	"plural": plural,
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("15:04:05")
	},
	"int":         func(n int64) int { return int(n) },
	"pair":        func(c cell, num bool) cellPair { return cellPair{c, num} },
	"changeClass": func(ct string) string { return "ct-" + strings.ReplaceAll(ct, "_", "-") },
}

// cellPair is a cell and whether its column is numeric (right-aligned).
type cellPair struct {
	C   cell
	Num bool
}

func utcText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// durationWords renders a duration for people: "40 µs", "0.9 ms", "850 ms", "12.4 s",
// "3 min 05 s", "2 h 10 min"; "" for none.
func durationWords(d time.Duration) string {
	switch {
	case d <= 0:
		return ""
	case d < 100*time.Microsecond:
		return fmt.Sprintf("%d µs", max(d.Microseconds(), 1))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
}

// countText writes a count with thousands separators: 10,000,024.
func countText(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func bytesText(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	exp := int(math.Log(float64(n)) / math.Log(1024))
	exp = min(exp, 4)
	return fmt.Sprintf("%.1f %cB", float64(n)/math.Pow(1024, float64(exp)), "KMGT"[exp-1])
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func withRole(ctx context.Context, ro role) context.Context {
	return context.WithValue(ctx, ctxKey{}, ro)
}

func roleOf(ctx context.Context) role {
	ro, _ := ctx.Value(ctxKey{}).(role)
	return ro
}

// textLines are the non-empty lines of s, their surrounding spaces trimmed.
func textLines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
