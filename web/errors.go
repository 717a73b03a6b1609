package web

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// httpError is an error with the status code it answers with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequestf(format string, a ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

func notFoundf(format string, a ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, a...)}
}

func conflictf(format string, a ...any) error {
	return &httpError{http.StatusConflict, fmt.Sprintf(format, a...)}
}

// statusOf is the status code an error answers with: its own, 404 for a missing
// object, else 500.
func statusOf(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.Is(err, objectstore.ErrNotExist):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// apiError answers err as JSON.
func (s *Server) apiError(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if code == http.StatusInternalServerError {
		s.log.Warn("web: request failed", "path", r.URL.Path, "err", err)
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
