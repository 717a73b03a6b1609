package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// Config configures a Server.
type Config struct {
	// Scheduler runs the loaded pipelines; the pages show its pipelines and runs.
	Scheduler *scheduler.Scheduler
	// Observer receives the scheduler's record changes and slots (see NewObserver); it
	// feeds the live pages and /metrics.
	Observer *Observer
	// Auth says who may use the server.
	Auth Auth
	// Addr is the listen address, shown by /healthz.
	Addr string
	// LoadErrors lists the pipeline files that failed to load (nil: none).
	LoadErrors func() []LoadError
	// Stopping reports a shutdown in progress (/healthz answers 503).
	Stopping func() bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives request errors; nil means slog.Default().
	Logger *slog.Logger
	// EngineInfo names this build (shown in the page footer).
	EngineInfo string
	// MaxRows caps the rows one request returns (default 1000).
	MaxRows int
	// HeavyPerClient caps the heavy table reads (sorted rows, diffs, change feeds) of
	// one client at once (default 2); HeavyTotal those of all clients (default twice
	// the CPUs). Past either, 429 with Retry-After.
	HeavyPerClient, HeavyTotal int
}

// LoadError is a pipeline file that failed to load.
type LoadError struct {
	File string `json:"file"`
	// Pipeline is the pipeline whose previous version goes on running, if any.
	Pipeline string `json:"pipeline,omitempty"`
	Problem  string `json:"problem"`
}

// Limits of requests.
const (
	maxBodyBytes    = 64 << 10
	defaultMaxRows  = 1000
	defaultPageRows = 100
)

// Server serves the pages, the API, /metrics and /healthz.
type Server struct {
	cfg    Config
	sched  *scheduler.Scheduler
	obs    *Observer
	log    *slog.Logger
	mux    *http.ServeMux
	routes []route
	pages  pageSet
	tables *tableCache
	cop    *http.CrossOriginProtection

	summaries  summaryCache
	cache      responseCache
	heavyReads *heavyLimit
	closing    closer
	stop       <-chan struct{} // closed by Close
}

// route is one registered handler; the OpenAPI document lists the API ones.
type route struct {
	method, pattern string
	access          access
}

// access says who may call a route.
type access int

const (
	public access = iota // anyone (login, assets, health)
	view                 // a read or full token
	change               // a full token, from the server's own pages or a client without cookies
)

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Scheduler == nil {
		return nil, errors.New("web: no scheduler")
	}
	if cfg.Observer == nil {
		cfg.Observer = NewObserver()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = defaultMaxRows
	}
	if cfg.HeavyPerClient <= 0 {
		cfg.HeavyPerClient = defaultHeavyPerClient
	}
	if cfg.HeavyTotal <= 0 {
		cfg.HeavyTotal = 2 * runtime.NumCPU()
	}
	if cfg.LoadErrors == nil {
		cfg.LoadErrors = func() []LoadError { return nil }
	}
	if cfg.Stopping == nil {
		cfg.Stopping = func() bool { return false }
	}
	if err := CheckListen(cfg.Addr, cfg.Auth); err != nil && cfg.Addr != "" {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, sched: cfg.Scheduler, obs: cfg.Observer, log: cfg.Logger, mux: http.NewServeMux(),
		pages: pages, tables: newTableCache(cfg.Scheduler, cfg.Now), cop: http.NewCrossOriginProtection()}
	s.heavyReads = newHeavyLimit(cfg.HeavyPerClient, cfg.HeavyTotal)
	s.closing.ch = make(chan struct{})
	s.stop = s.closing.ch
	s.obs.attach(cfg.Scheduler)
	s.register()
	return s, nil
}

// Handler returns the server's handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// HTTPServer returns an http.Server for the handler with the timeouts the pages and
// API need (event streams extend their own write deadline).
func (s *Server) HTTPServer() *http.Server {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	srv.RegisterOnShutdown(s.Close)
	return srv
}

func (s *Server) handle(method, pattern string, a access, h http.HandlerFunc) {
	s.routes = append(s.routes, route{method, pattern, a})
	s.mux.Handle(method+" "+pattern, s.guard(a, h))
}

// ctxKey keys the request's role in its context.
type ctxKey struct{}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	if s.cfg.Auth.open() {
		// Without a token only this machine may use the server: a page of another site
		// that resolves its name to 127.0.0.1 (DNS rebinding) is refused by its Host.
		host := r.Host
		if hh, _, err := splitHostPortLoose(host); err == nil {
			host = hh
		}
		if !loopbackHost(host) {
			http.Error(w, "this server answers to localhost only (it has no token)", http.StatusMisdirectedRequest)
			return
		}
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	}
	s.mux.ServeHTTP(w, r)
}

// guard checks who may call a route.
func (s *Server) guard(a access, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a == public {
			h(w, r)
			return
		}
		api := strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics"
		ro, byCookie, err := s.cfg.Auth.identify(r, s.cfg.Now())
		switch {
		case err != nil || (ro == roleNone && (api || r.Method != http.MethodGet)):
			w.Header().Set("WWW-Authenticate", `Bearer realm="orchestrator"`)
			msg := "a token is needed: Authorization: Bearer TOKEN, or log in at /login"
			if err != nil {
				msg = "the token is not valid"
			}
			s.fail(w, r, http.StatusUnauthorized, msg)
			return
		case ro == roleNone:
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if a == change {
			if ro != roleAdmin {
				s.fail(w, r, http.StatusForbidden, "this token may view only: triggering, retrying and cancelling runs need the full token")
				return
			}
			if err := s.cop.Check(r); err != nil || (byCookie && !sameOrigin(r)) {
				s.fail(w, r, http.StatusForbidden, "refused: the request does not come from this server's own pages (cross-origin)")
				return
			}
		}
		h(w, r.WithContext(withRole(r.Context(), ro)))
	})
}

// fail answers an error: JSON for the API, a page otherwise.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics" || r.URL.Path == "/healthz" {
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	s.renderError(w, r, code, msg)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(w, `{"error":"encode: %s"}`, strings.ReplaceAll(err.Error(), `"`, `'`))
	}
}

// splitHostPortLoose splits host[:port].
func splitHostPortLoose(hostport string) (string, string, error) {
	if strings.HasPrefix(hostport, "[") || strings.Count(hostport, ":") == 1 {
		i := strings.LastIndexByte(hostport, ':')
		if i > 0 && !strings.HasSuffix(hostport, "]") {
			return hostport[:i], hostport[i+1:], nil
		}
	}
	return hostport, "", nil
}
