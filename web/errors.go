package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

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

// bodyError is the error of a request body that could not be read as want: 413 when it
// is over the limit, else 400 saying what was wrong in the user's terms (the field, the
// JSON type expected), never a Go type's name.
func bodyError(err error, want string) error {
	var tooBig *http.MaxBytesError
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit)}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		} else {
			field = "field " + strconv.Quote(field)
		}
		return badRequestf("body: %s is a JSON %s: want %s", field, typ.Value, want)
	case errors.As(err, &syn):
		return badRequestf("body: not valid JSON at byte %d: want %s", syn.Offset, want)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequestf("body: the JSON ends too soon: want %s", want)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return badRequestf("body: unknown field %s: want %s", f, want)
	}
	return badRequestf("body: %s: want %s", strings.TrimPrefix(msg, "json: "), want)
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
