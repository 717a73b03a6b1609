package web

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
)

const (
	fullToken = "full-secret-token"
	readToken = "read-only-token"
)

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func TestAuth(t *testing.T) {
	e := newEnv(t, envOptions{auth: Auth{Token: fullToken, ReadToken: readToken}})
	origin := e.srv.URL
	trigger := "/api/v1/pipelines/shop/runs"
	for _, tc := range []struct {
		name   string
		r      req
		want   int
		inBody string
	}{
		{"no token", req{path: "/api/v1/pipelines"}, 401, "a token is needed"},
		{"wrong token", req{path: "/api/v1/pipelines", header: bearer("guess")}, 401, "not valid"},
		{"not a bearer", req{path: "/api/v1/pipelines", header: map[string]string{"Authorization": "Basic eDp5"}}, 401, ""},
		{"read token views", req{path: "/api/v1/pipelines", header: bearer(readToken)}, 200, `"shop"`},
		{"full token views", req{path: "/api/v1/runs", header: bearer(fullToken)}, 200, `"runs"`},
		{"metrics need a token", req{path: "/metrics"}, 401, ""},
		{"metrics with the read token", req{path: "/metrics", header: bearer(readToken)}, 200, "orchestrator_pipelines_loaded 2"},
		{"health without a token: status only", req{path: "/healthz"}, 200, `"status":"ok"`},
		{"openapi is public", req{path: "/api/v1/openapi.json"}, 200, "openapi"},
		{"no token trigger", req{method: "POST", path: trigger}, 401, ""},
		{"wrong token trigger", req{method: "POST", path: trigger, header: bearer("guess")}, 401, ""},
		{"read token trigger", req{method: "POST", path: trigger, header: bearer(readToken)}, 403, "may view only"},
		{"read token cancel", req{method: "POST", path: "/api/v1/runs/shop@20260101T000000Z/cancel", header: bearer(readToken)}, 403, ""},
		{"read token retry", req{method: "POST", path: "/api/v1/runs/shop@20260101T000000Z/retry", header: bearer(readToken)}, 403, ""},
		{"cross-origin trigger", req{method: "POST", path: trigger, header: map[string]string{"Authorization": "Bearer " + fullToken, "Origin": "http://evil.example"}}, 403, "cross-origin"},
		{"cross-site fetch trigger", req{method: "POST", path: trigger, header: map[string]string{"Authorization": "Bearer " + fullToken, "Sec-Fetch-Site": "cross-site"}}, 403, ""},
		{"full token trigger", req{method: "POST", path: trigger, header: bearer(fullToken)}, 202, `"trigger":"manual"`},
		{"pages send to the login", req{path: "/pipelines"}, 303, ""},
		{"page with the read token", req{path: "/pipelines", header: bearer(readToken)}, 200, "read-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.do(tc.r)
			if resp.StatusCode != tc.want || !strings.Contains(body, tc.inBody) {
				t.Errorf("%s %s: %d %.200s; want %d with %q", tc.r.method, tc.r.path, resp.StatusCode, body, tc.want, tc.inBody)
			}
			if tc.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	if _, body := e.do(req{path: "/healthz"}); strings.Contains(body, "shop") {
		t.Errorf("healthz without a token shows the pipelines: %s", body)
	}
	if _, body := e.do(req{path: "/pipelines", header: bearer(readToken)}); strings.Contains(body, "Run now") {
		t.Error("the read-only pipelines page offers Run now")
	}

	// A browser logs in with a form; the cookie is HttpOnly, SameSite=Strict.
	login := func(tok string, hdr map[string]string) *http.Response {
		hr, _ := http.NewRequest("POST", e.srv.URL+"/login", strings.NewReader(url.Values{"token": {tok}, "next": {"/tables"}}.Encode()))
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			hr.Header.Set(k, v)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := login(fullToken, map[string]string{"Origin": "http://evil.example"}); resp.StatusCode != 403 {
		t.Errorf("cross-origin login: %d, want 403", resp.StatusCode)
	}
	if resp := login("guess", map[string]string{"Origin": origin}); resp.StatusCode != 401 {
		t.Errorf("login with a wrong token: %d, want 401", resp.StatusCode)
	}
	resp := login(fullToken, map[string]string{"Origin": origin})
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			session = c
		}
	}
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/tables" || session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d to %q, cookie %+v; want 303 to /tables with an HttpOnly SameSite=Strict cookie", resp.StatusCode, resp.Header.Get("Location"), session)
	}
	cookie := map[string]string{"Cookie": sessionCookie + "=" + session.Value}
	if resp, _ := e.do(req{path: "/tables", header: cookie}); resp.StatusCode != 200 {
		t.Errorf("page with the session: %d, want 200", resp.StatusCode)
	}
	// A form post with the cookie must come from the server's own page.
	if resp, _ := e.do(req{method: "POST", path: "/pipelines/shop/run", header: cookie}); resp.StatusCode != 403 {
		t.Errorf("cookie post without an origin: %d, want 403", resp.StatusCode)
	}
	if resp, _ := e.do(req{method: "POST", path: "/pipelines/shop/run", header: map[string]string{"Cookie": cookie["Cookie"], "Origin": "http://evil.example"}}); resp.StatusCode != 403 {
		t.Errorf("cookie post from another origin: %d, want 403", resp.StatusCode)
	}
	resp, _ = e.do(req{method: "POST", path: "/pipelines/shop/run", header: map[string]string{"Cookie": cookie["Cookie"], "Origin": origin}})
	if resp.StatusCode != 303 || !strings.HasPrefix(resp.Header.Get("Location"), "/runs/shop@") {
		t.Errorf("same-origin form post: %d to %q, want 303 to the run", resp.StatusCode, resp.Header.Get("Location"))
	}
	forged := strings.Replace(session.Value, "2.", "1.", 1)
	if resp, _ := e.do(req{path: "/api/v1/runs", header: map[string]string{"Cookie": sessionCookie + "=" + forged + "x"}}); resp.StatusCode != 401 {
		t.Errorf("forged cookie: %d, want 401", resp.StatusCode)
	}
	if got := safeNext("//evil.example/x"); got != "/" {
		t.Errorf("login next //evil.example/x goes to %q, want /", got)
	}
}

func TestListenNeedsAToken(t *testing.T) {
	for _, tc := range []struct {
		addr string
		auth Auth
		ok   bool
	}{
		{"127.0.0.1:8080", Auth{}, true},
		{"localhost:8080", Auth{}, true},
		{"[::1]:8080", Auth{}, true},
		{"0.0.0.0:8080", Auth{}, false},
		{":8080", Auth{}, false},
		{"192.168.1.10:8080", Auth{}, false},
		{"0.0.0.0:8080", Auth{Token: "t"}, true},
	} {
		err := CheckListen(tc.addr, tc.auth)
		if (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, token %v) = %v, want ok %v", tc.addr, tc.auth.Token != "", err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--auth-token-file") {
			t.Errorf("CheckListen(%q): %v; want it to say how to give a token", tc.addr, err)
		}
	}
	if _, err := New(Config{Scheduler: newEnv(t, envOptions{}).sched, Addr: "0.0.0.0:8080"}); err == nil {
		t.Error("New on 0.0.0.0 without a token: no error")
	}
}

// TestOpenServerAnswersLocalhostOnly: without a token a request must name this machine
// (a DNS rebinding page names its own host).
func TestOpenServerAnswersLocalhostOnly(t *testing.T) {
	e := newEnv(t, envOptions{})
	hr, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/pipelines", nil)
	hr.Host = "evil.example"
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host evil.example: %d, want 421", resp.StatusCode)
	}
	if resp, _ := e.do(req{method: "POST", path: "/api/v1/pipelines/shop/runs", header: map[string]string{"Origin": "http://evil.example"}}); resp.StatusCode != 403 {
		t.Errorf("cross-origin trigger without a token configured: %d, want 403", resp.StatusCode)
	}
}

// TestEscaping: markup in a description, a cell, a column name, a run's error and a
// load error is shown as text on every page.
func TestEscaping(t *testing.T) {
	e := newEnv(t, envOptions{loadErrors: []LoadError{{File: "bad<script>.yaml", Problem: "line 1: <script>alert('load')</script>"}}})
	rec := e.run("shop")
	// A table another writer made, with a column named like markup, at a declared path.
	ctx := context.Background()
	st := e.sched.StoreOf("slow").Objects()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "<script>alert('col')</script>", Type: arrow.BinaryTypes.String}}, nil)
	ds, err := delta.SchemaFromArrow(schema)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.Create(ctx, st, "raw/signals", delta.CreateOptions{Schema: ds}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.StringBuilder).Append("<img src=x onerror=alert(1)>")
	b.Field(1).(*array.StringBuilder).Append("</td><script>alert('v')</script>")
	recb := b.NewRecordBatch()
	defer recb.Release()
	if _, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{recb}}); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/pipelines", "/pipelines/shop", "/runs/" + rec.ID, "/tables/raw.customers/rows", "/tables/raw.customers/changes",
		"/tables/raw.signals", "/tables/raw.signals/rows", "/tables/raw.signals/history", "/tables/raw.customers/diff?from=0&to=1",
		"/tables/raw.customers/rows?where=" + url.QueryEscape("name = '<script>x</script>")} {
		resp, body := e.do(req{path: path})
		if want := 200; resp.StatusCode != want && !(strings.Contains(path, "where=") && resp.StatusCode == 400) { // an unterminated quote: 400, the form kept
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") || strings.Contains(body, "</td><script>") {
			i := strings.Index(body, "<script>alert")
			t.Errorf("%s: markup from data is not escaped: ...%s...", path, body[max(i-80, 0):min(i+80, len(body))])
		}
	}
	_, body := e.do(req{path: "/tables/raw.customers/rows"})
	if !strings.Contains(body, "&lt;script&gt;alert(&#39;cell&#39;)&lt;/script&gt;") {
		t.Error("rows page: the cell value is not shown as text")
	}
	_, body = e.do(req{path: "/pipelines"})
	if !strings.Contains(body, "&lt;script&gt;alert(&#39;load&#39;)") || !strings.Contains(body, "&lt;script&gt;alert(&#39;desc&#39;)") {
		t.Error("pipelines page: the load error or description is not shown as text")
	}
	_, body = e.do(req{path: "/tables/raw.signals/rows"})
	if !strings.Contains(body, "&lt;script&gt;alert(&#39;col&#39;)&lt;/script&gt;") || !strings.Contains(body, "&lt;img src=x") {
		t.Error("rows page: the column name or value is not shown as text")
	}
	if svg := string(dagSVG([]dagNode{{Name: "<script>s</script>", Kind: "<b>"}})); strings.Contains(svg, "<script>") || !strings.Contains(svg, "&lt;script&gt;") {
		t.Errorf("DAG: stage name not escaped: %s", svg)
	}
	resp, _ := e.do(req{path: "/pipelines"})
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q, want scripts from the server only", csp)
	}
}

// TestTraversal: only declared tables open; a path in the request, plain or encoded, is
// not found, and nothing outside the warehouse is read.
func TestTraversal(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.run("shop")
	write(t, e.dir, "secret/_delta_log/00000000000000000000.json", `{"commitInfo":{"operation":"SECRET"}}`)
	for _, path := range []string{
		"/api/v1/tables/..%2Fsecret", "/api/v1/tables/..%2F..%2Fetc%2Fpasswd/rows", "/api/v1/tables/%2e%2e%2fsecret/history",
		"/api/v1/tables/raw.customers%2F..%2F..%2Fsecret/history", "/tables/..%2Fsecret", "/tables/..%252Fsecret/rows",
		"/api/v1/tables/secret/history", "/api/v1/tables/raw.customers?pipeline=..%2Fshop", "/api/v1/tables/raw/customers",
		"/api/v1/tables/..", "/static/..%2Fweb.go", "/static/%2e%2e%2fserver.go", "/api/v1/runs/..%2F..%2Fsecret",
		"/api/v1/runs/shop@20260101T000000Z/stages/..%2F..%2Fsecret/log", "/tables/raw.customers/../../secret",
	} {
		resp, err := http.Get(e.srv.URL + path) // follows the mux's redirects to cleaned paths
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
		if strings.Contains(body, "SECRET") || strings.Contains(body, "package web") || strings.Contains(body, "root:") {
			t.Errorf("GET %s read outside the warehouse: %.200s", path, body)
		}
	}
}

// TestBoundedRequests: a request body over the cap is refused before it is read whole,
// and a row limit over the cap is refused, naming it.
func TestBoundedRequests(t *testing.T) {
	e := newEnv(t, envOptions{auth: Auth{Token: fullToken}})
	big := `{"params":{"p":"` + strings.Repeat("x", maxBodyBytes) + `"}}`
	resp, body := e.do(req{method: "POST", path: "/api/v1/pipelines/shop/runs", body: big,
		header: map[string]string{"Authorization": "Bearer " + fullToken, "Content-Type": "application/json"}})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "the request body is larger than 65536 bytes") {
		t.Errorf("a %d-byte body: %d %.200s; want 413 saying the body is too large", len(big), resp.StatusCode, body)
	}
	if runs, list := e.do(req{path: "/api/v1/runs?pipeline=shop", header: bearer(fullToken)}); runs.StatusCode != 200 || strings.Contains(list, `"trigger":"manual"`) {
		t.Errorf("runs after the oversized trigger: %d\n%.300s; want none started", runs.StatusCode, list)
	}
	resp, body = e.do(req{path: "/api/v1/runs?limit=100000", header: bearer(fullToken)})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "limit") {
		t.Errorf("limit=100000: %d %.200s; want 400 naming the limit", resp.StatusCode, body)
	}
}
