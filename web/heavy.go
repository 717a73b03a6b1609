package web

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Heavy table reads (a sorted rows page, a diff, a change feed) are bounded per client
// and in all: a client over its share gets 429 with Retry-After at once rather than
// waiting, so that a few browser tabs cannot keep a serve's cores and memory, and the
// others' pages stay fast. A client is its address (behind a proxy: the proxy).

const (
	defaultHeavyPerClient = 2
	heavyRetryAfter       = 2 // seconds
)

// heavyLimit counts the heavy reads in progress, per client and in all.
type heavyLimit struct {
	mu        sync.Mutex // guards the fields below
	perClient map[string]int
	total     int
	maxClient int
	maxTotal  int
}

func newHeavyLimit(perClient, total int) *heavyLimit {
	return &heavyLimit{perClient: map[string]int{}, maxClient: perClient, maxTotal: total}
}

// acquire takes a slot for client; ok is false when the client or the server is at its
// limit.
func (h *heavyLimit) acquire(client string) (release func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.perClient[client] >= h.maxClient || h.total >= h.maxTotal {
		return nil, false
	}
	h.perClient[client]++
	h.total++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.perClient[client]--; h.perClient[client] <= 0 {
			delete(h.perClient, client)
		}
		h.total--
	}, true
}

// clientOf names the client of a request for the heavy limit: its address.
func clientOf(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}

// heavy wraps the handler of a heavy read: over the client's share it answers 429 with
// Retry-After. isHeavy decides for a request (a rows page is heavy only when sorted).
func (s *Server) heavy(isHeavy func(*http.Request) bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if isHeavy != nil && !isHeavy(r) {
			h(w, r)
			return
		}
		release, ok := s.heavyReads.acquire(clientOf(r))
		if !ok {
			w.Header().Set("Retry-After", fmt.Sprint(heavyRetryAfter))
			s.fail(w, r, http.StatusTooManyRequests, fmt.Sprintf("too many heavy table reads (sorts, diffs, change feeds) at once: at most %d per client; try again in %d s", s.heavyReads.maxClient, heavyRetryAfter))
			return
		}
		defer release()
		h(w, r)
	}
}

func sorted(r *http.Request) bool { return r.URL.Query().Get("order_by") != "" }
