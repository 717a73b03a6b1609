package delta

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// File paths in actions (PROTOCOL.md §Add File and Remove File) are URIs: relative to the
// table root, or absolute. One file can be spelled many ways: "a%20b" and a differently
// escaped "a%20b", "/p", "file:/p", "file:///p" and "file://localhost/p", or an absolute
// URI under the table's own location for a relative path. Every action read from the log
// (commits and checkpoints) has its path replaced by one canonical spelling, so that log
// replay, conflict checks, the change data feed, vacuum and diff compare files by that
// one string, as Delta compares canonical URIs:
//
//   - a relative path: percent-decoded, then encoded the way this package writes paths
//     (encodePath); a path that is not valid percent-encoding is taken as it is, and a
//     ':' in a relative path (a timestamp partition value) is part of the name;
//   - an absolute URI under the table's location: made relative to it;
//   - any other absolute URI: scheme://host/path with the path percent-decoded and
//     re-encoded; a path with no scheme ("/p") takes the scheme and host of the table's
//     location (file when it is not known), and file://localhost/p is file:///p.
//
// The table's location comes from the store (objectstore.Locator) or, for scans, from
// ScanOptions.TableURI.

// filePath is a parsed action path.
type filePath struct {
	scheme string // lower case; "" for a path without one
	host   string
	path   string // percent-decoded; starts with "/" when abs
	abs    bool
}

// parseFilePath splits an action path. A path has a scheme only when it starts like a
// hierarchical URI ("s3://", "file:/"): "x:y/z" with no slash after the colon, or a
// first segment that is no valid scheme ("time=03:06:40/f"), is a relative path.
func parseFilePath(p string) filePath {
	var fp filePath
	if i := schemeEnd(p); i > 0 {
		fp.scheme, fp.abs = strings.ToLower(p[:i]), true
		rest := p[i+1:]
		if strings.HasPrefix(rest, "//") {
			rest = rest[2:]
			j := strings.IndexByte(rest, '/')
			if j < 0 {
				j = len(rest)
			}
			fp.host, rest = rest[:j], rest[j:]
		}
		if fp.scheme == "file" && strings.EqualFold(fp.host, "localhost") {
			fp.host = ""
		}
		if rest == "" {
			rest = "/"
		}
		fp.path = decodePathLenient(rest)
		return fp
	}
	fp.path = decodePathLenient(p)
	fp.abs = strings.HasPrefix(p, "/")
	return fp
}

// schemeEnd returns the index of the ':' ending a URI scheme followed by '/', or -1.
func schemeEnd(p string) int {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case c == ':' && i > 0 && i+1 < len(p) && p[i+1] == '/':
			return i
		default:
			return -1
		}
	}
	return -1
}

// decodePathLenient percent-decodes p, or returns it as it is when it is not valid
// percent-encoding (a writer that did not encode a '%').
func decodePathLenient(p string) string {
	if dec, err := url.PathUnescape(p); err == nil {
		return dec
	}
	return p
}

// String renders the path in canonical form.
func (fp filePath) String() string {
	if fp.scheme == "" && !fp.abs {
		return encodePath(fp.path)
	}
	return fp.scheme + "://" + fp.host + encodePath(fp.path)
}

// under returns the part of fp below base (a location), if fp lies there.
func (fp filePath) under(base filePath) (string, bool) {
	if !fp.abs || fp.scheme != base.scheme || !strings.EqualFold(fp.host, base.host) {
		return "", false
	}
	dir := strings.TrimSuffix(base.path, "/") + "/"
	if !strings.HasPrefix(fp.path, dir) || len(fp.path) == len(dir) {
		return "", false
	}
	return fp.path[len(dir):], true
}

// qualify gives a path without scheme the scheme and host of base (file when base is
// unknown).
func (fp filePath) qualify(base *filePath) filePath {
	if fp.abs && fp.scheme == "" {
		fp.scheme = "file"
		if base != nil {
			fp.scheme, fp.host = base.scheme, base.host
		}
	}
	return fp
}

// canonicalFilePath returns the canonical spelling of an action path for a table at
// location loc (nil when unknown).
func canonicalFilePath(p string, loc *filePath) string {
	fp := parseFilePath(p).qualify(loc)
	if loc != nil {
		if rel, ok := fp.under(*loc); ok {
			return encodePath(rel)
		}
	}
	return fp.String()
}

// storeLocation returns the location of key in store, when the store has one.
func storeLocation(store objectstore.Store, key string) *filePath {
	l, ok := store.(objectstore.Locator)
	if !ok {
		return nil
	}
	fp := parseFilePath(l.URI(key))
	if !fp.abs {
		return nil
	}
	return &fp
}

// location is the table's own location, when its store has one.
func (t *Table) location() *filePath { return storeLocation(t.store, t.root) }

// canonicalizePaths rewrites the file paths of actions read from the log in canonical
// form (see above).
func (t *Table) canonicalizePaths(acts []Action) {
	loc := t.location()
	for i := range acts {
		a := &acts[i]
		switch {
		case a.Add != nil:
			a.Add.Path = canonicalFilePath(a.Add.Path, loc)
		case a.Remove != nil:
			a.Remove.Path = canonicalFilePath(a.Remove.Path, loc)
		case a.CDC != nil:
			a.CDC.Path = canonicalFilePath(a.CDC.Path, loc)
		}
	}
}

// canonicalCopies returns actions to commit with their file paths in canonical form; an
// action whose path changes is copied, so the caller's Add or Remove is left as given.
func (t *Table) canonicalCopies(acts []Action) []Action {
	loc := t.location()
	out := acts
	copied := false
	for i := range acts {
		a := acts[i]
		switch {
		case a.Add != nil:
			if p := canonicalFilePath(a.Add.Path, loc); p != a.Add.Path {
				c := *a.Add
				c.Path, a.Add = p, &c
			}
		case a.Remove != nil:
			if p := canonicalFilePath(a.Remove.Path, loc); p != a.Remove.Path {
				c := *a.Remove
				c.Path, a.Remove = p, &c
			}
		case a.CDC != nil:
			if p := canonicalFilePath(a.CDC.Path, loc); p != a.CDC.Path {
				c := *a.CDC
				c.Path, a.CDC = p, &c
			}
		default:
			continue
		}
		if a != acts[i] {
			if !copied {
				out, copied = slices.Clone(acts), true
			}
			out[i] = a
		}
	}
	return out
}

// relPath turns a path of an action into a key relative to the table root (decoded).
// An absolute URI is not below the root (ok false): paths the log names under the
// table's location are made relative when they are read.
func (t *Table) relPath(p string) (string, bool) {
	fp := parseFilePath(p)
	if fp.abs {
		if loc := t.location(); loc != nil {
			if rel, ok := fp.qualify(loc).under(*loc); ok {
				return rel, true
			}
		}
		return "", false
	}
	return fp.path, true
}

// resolveFileKey finds the store key of a data file an action names: below root for a
// relative path; for an absolute URI, the key in store when the store holds that location
// (tableURI, when set, is the table's location, for a store that does not know its own).
// A file the store cannot reach is an error naming it.
func resolveFileKey(store objectstore.Store, root, tableURI, p string) (string, error) {
	fp := parseFilePath(p)
	if !fp.abs {
		return joinKey(root, fp.path), nil
	}
	tableLoc := storeLocation(store, root)
	if tableURI != "" {
		if u := parseFilePath(strings.TrimSuffix(tableURI, "/")); u.abs {
			tableLoc = &u
		}
	}
	fp = fp.qualify(tableLoc)
	if tableLoc != nil {
		if rel, ok := fp.under(*tableLoc); ok {
			return joinKey(root, rel), nil
		}
	}
	if storeLoc := storeLocation(store, ""); storeLoc != nil {
		if key, ok := fp.under(*storeLoc); ok {
			return key, nil
		}
		return "", fmt.Errorf("file %s is outside %s, the location that holds the table, and cannot be read from there", fp, storeLoc)
	}
	if tableLoc != nil {
		return "", fmt.Errorf("file %s is outside the table's location %s and cannot be read from its store", fp, tableLoc)
	}
	return "", fmt.Errorf("file %s is named by absolute URI, and the table's store has no location to resolve it against", fp)
}
