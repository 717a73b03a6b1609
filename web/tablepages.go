package web

import (
	"html/template"
	"net/http"
	"time"
)

// tablePage is what every tab of a table's page shares: the tabs and the facts.
type tablePage struct {
	Ref  *tableRef
	Tab  string
	Info *tableInfo
	// Query is the request's query string, kept when moving between tabs.
	Err  string
	Body any
}

func (s *Server) pageTables(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "tables", "Tables", "tables", s.catalog())
}

// tableTab renders one tab of a table's page; body computes its content (an error is
// shown on the page, with the form, so the user can correct the query).
func (s *Server) tableTab(w http.ResponseWriter, r *http.Request, tab, tmpl string, body func(ref *tableRef, ti *tableInfo) (any, error)) {
	ref, err := s.tableOf(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	ti, err := s.tableInfo(r.Context(), ref)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	p := tablePage{Ref: ref, Tab: tab, Info: ti}
	code := http.StatusOK
	if ti.Exists {
		b, err := body(ref, ti)
		if err != nil {
			if code = statusOf(err); code == http.StatusInternalServerError {
				s.pageError(w, r, err)
				return
			}
			p.Err = err.Error() // the page answers with the error's status, the form kept
		}
		p.Body = b
	}
	s.render(w, r, code, tmpl, "Table "+ref.Name, "tables", p)
}

// overview is the table page's first tab.
type overview struct {
	Horizons template.HTML
	// Inferred lists a dimension's inferred members (nil: it keeps none).
	Inferred *inferredView
}

func (s *Server) pageTable(w http.ResponseWriter, r *http.Request) {
	s.tableTab(w, r, "overview", "table", func(ref *tableRef, ti *tableInfo) (any, error) {
		inf, err := s.inferred(r.Context(), ref)
		if err != nil {
			return nil, err
		}
		return overview{Horizons: horizonSVG(ti), Inferred: inf}, nil
	})
}

func (s *Server) pageHistory(w http.ResponseWriter, r *http.Request) {
	s.tableTab(w, r, "history", "history", func(ref *tableRef, ti *tableInfo) (any, error) {
		limit, err := s.parseLimit(r.URL.Query(), 100)
		if err != nil {
			return nil, err
		}
		return s.history(r.Context(), ref, limit)
	})
}

// rowsForm is the rows tab: the query as typed and the result.
type rowsForm struct {
	Version, Timestamp, Where, Columns, OrderBy string
	Desc                                        bool
	Limit                                       int
	Result                                      *rowsResult
}

func (s *Server) pageRows(w http.ResponseWriter, r *http.Request) {
	s.tableTab(w, r, "rows", "rows", func(ref *tableRef, ti *tableInfo) (any, error) {
		q := r.URL.Query()
		f := &rowsForm{Version: q.Get("version"), Timestamp: q.Get("timestamp"), Where: q.Get("where"), Columns: q.Get("columns"),
			OrderBy: q.Get("order_by"), Limit: defaultPageRows}
		rq, err := s.parseRowsQuery(q)
		if err != nil {
			return f, err
		}
		f.Desc, f.Limit = rq.desc, rq.limit
		f.Result, err = s.rows(r.Context(), ref, rq)
		return f, err
	})
}

// changesForm is the change feed tab.
type changesForm struct {
	From, To, Types string
	Limit           int
	Result          *changesResult
	// Max is the largest count of a version, for the bars.
	Max int64
}

func (s *Server) pageChanges(w http.ResponseWriter, r *http.Request) {
	s.tableTab(w, r, "changes", "changes", func(ref *tableRef, ti *tableInfo) (any, error) {
		q := r.URL.Query()
		f := &changesForm{From: q.Get("from"), To: q.Get("to"), Types: q.Get("types"), Limit: defaultPageRows}
		if !ti.ChangeDataFeed {
			return f, badRequestf("table %s does not have its change data feed on", ref.Name)
		}
		cq, err := s.parseChangesQuery(q)
		if err != nil {
			return f, err
		}
		f.Limit = cq.limit
		f.Result, err = s.changes(r.Context(), ref, cq)
		if f.Result != nil {
			for _, vc := range f.Result.Counts {
				for _, n := range vc.Counts {
					f.Max = max(f.Max, n)
				}
			}
		}
		return f, err
	})
}

// diffForm is the diff tab.
type diffForm struct {
	From, To, Key, Where string
	Limit                int
	Result               *diffResult
}

func (s *Server) pageDiff(w http.ResponseWriter, r *http.Request) {
	s.tableTab(w, r, "diff", "diff", func(ref *tableRef, ti *tableInfo) (any, error) {
		q := r.URL.Query()
		f := &diffForm{From: q.Get("from"), To: q.Get("to"), Key: q.Get("key"), Where: q.Get("where"), Limit: defaultPageRows}
		dq, err := s.parseDiffQuery(q)
		if err != nil {
			return f, err
		}
		f.Limit = dq.limit
		f.Result, err = s.diff(r.Context(), ref, dq)
		return f, err
	})
}

// loginPage is the login form.
type loginPage struct {
	Next  string
	Error string
}

func (s *Server) pageLogin(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", "Log in", "", loginPage{Next: safeNext(r.URL.Query().Get("next"))})
}

// postLogin checks a token and sets the session cookie. The form is same-origin only
// (a login CSRF would log a victim into the attacker's session).
func (s *Server) postLogin(w http.ResponseWriter, r *http.Request) {
	if err := s.cop.Check(r); err != nil || !sameOrigin(r) {
		s.renderError(w, r, http.StatusForbidden, "refused: the login form must be sent from this server's own page")
		return
	}
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	ro := s.cfg.Auth.roleOfToken(r.PostForm.Get("token"))
	if s.cfg.Auth.open() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if ro == roleNone {
		s.render(w, r, http.StatusUnauthorized, "login", "Log in", "", loginPage{Next: next, Error: "That token is not valid."})
		return
	}
	exp := s.cfg.Now().Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.cfg.Auth.newSession(ro, exp), Path: "/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) postLogout(w http.ResponseWriter, r *http.Request) {
	if err := s.cop.Check(r); err != nil {
		s.renderError(w, r, http.StatusForbidden, "refused: cross-origin request")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", Expires: time.Unix(0, 0), MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
