package web

import (
	"bytes"
	"net/http"
	"sync"
	"time"
)

// Many clients polling one run get the same bytes: the run page and the run's JSON are
// rendered once per change of the run (the observer's revision) and at most once per
// cacheTTL (durations of a running run move on), whoever asks. A miss renders once
// while the other askers of the same key wait for it.

const cacheTTL = time.Second

// maxCacheEntries and maxCacheBytes bound the cache; past either, it is emptied.
const (
	maxCacheEntries = 4096
	maxCacheBytes   = 64 << 20
)

type responseCache struct {
	mu      sync.Mutex // guards entries and bytes
	entries map[string]*cacheEntry
	bytes   int
}

type cacheEntry struct {
	mu        sync.Mutex // guards the fields; held during the first render
	rendering bool       // a request renders it again
	rev       uint64
	at        time.Time
	code      int
	header    http.Header
	body      []byte
}

// cachingWriter captures a response.
type cachingWriter struct {
	header http.Header
	code   int
	buf    bytes.Buffer
}

func (c *cachingWriter) Header() http.Header { return c.header }
func (c *cachingWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
func (c *cachingWriter) Write(p []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return c.buf.Write(p)
}

// serve answers from the cache entry of key when it is of revision rev and younger
// than cacheTTL, else renders it with h (a 200 is kept, anything else is not). While one
// request renders a stale entry again, the others get the stale one at once.
func (c *responseCache) serve(w http.ResponseWriter, r *http.Request, key string, rev uint64, h http.HandlerFunc) {
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= maxCacheEntries || c.bytes >= maxCacheBytes {
		c.entries, c.bytes = map[string]*cacheEntry{}, 0
	}
	e := c.entries[key]
	if e == nil {
		e = &cacheEntry{}
		c.entries[key] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	fresh := e.body != nil && e.rev == rev && time.Since(e.at) < cacheTTL
	if fresh || (e.body != nil && e.rendering) {
		header, code, body := e.header, e.code, e.body
		e.mu.Unlock()
		copyResponse(w, header, code, body)
		return
	}
	first := e.body == nil
	if !first {
		e.rendering = true // the others take the stale entry meanwhile
		e.mu.Unlock()
	} // the first render keeps the lock: the others wait for it
	cw := &cachingWriter{header: http.Header{}}
	h(cw, r)
	if !first {
		e.mu.Lock()
	}
	e.rendering = false
	grown := 0
	if cw.code == http.StatusOK {
		grown = cw.buf.Len() - len(e.body)
		e.rev, e.at, e.code, e.header, e.body = rev, time.Now(), cw.code, cw.header, cw.buf.Bytes()
	}
	e.mu.Unlock()
	c.mu.Lock()
	c.bytes += grown
	c.mu.Unlock()
	copyResponse(w, cw.header, cw.code, cw.buf.Bytes())
}

func copyResponse(w http.ResponseWriter, header http.Header, code int, body []byte) {
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	w.Write(body)
}

// cached wraps the handler of a run's page or JSON: its cache key is the path, whether
// the live part alone is asked for, and the viewer's role (a read-only page has no
// buttons); other query parameters neither matter nor make entries of their own.
func (s *Server) cached(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Path
		if r.URL.Query().Get("partial") == "1" {
			key += "?partial=1"
		}
		if roleOf(r.Context()) != roleAdmin {
			key += "#read"
		}
		s.cache.serve(w, r, key, s.obs.revision(r.PathValue("id")), h)
	}
}
