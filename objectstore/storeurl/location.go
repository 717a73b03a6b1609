package storeurl

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// IsURL reports whether s is written as a URL (scheme://...) rather than a path.
func IsURL(s string) bool { return strings.Contains(s, "://") }

// Local returns the directory a location names when it is a local one (a path or a
// file:// URL).
func Local(rawURL string) (dir string, ok bool) {
	loc, err := parse(rawURL)
	if err != nil || loc.scheme != local {
		return "", false
	}
	return loc.dir, true
}

// InProcess reports whether a location names a store that lives only inside the process
// that opens it (mem://), so that nothing written there outlives it.
func InProcess(rawURL string) bool {
	loc, err := parse(rawURL)
	return err == nil && loc.scheme == inMemory
}

// Join returns the location of rel (a slash-separated path) under the location base.
func Join(base, rel string) string {
	if IsURL(base) {
		return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(rel, "/")
	}
	return filepath.Join(base, filepath.FromSlash(rel))
}

// Anchor returns loc, a location written in a file of directory dir: a relative path is
// relative to dir; URLs and absolute paths stay as they are.
func Anchor(dir, loc string) string {
	if IsURL(loc) || filepath.IsAbs(loc) {
		return loc
	}
	return filepath.Join(dir, loc)
}

// URI returns a location as an absolute URI (file:///abs/dir, s3://bucket/prefix, with
// no trailing slash): how a Delta log names files by absolute path. It is "" for a path
// that cannot be made absolute.
func URI(rawURL string) string {
	if IsURL(rawURL) {
		return strings.TrimRight(rawURL, "/")
	}
	abs, err := filepath.Abs(rawURL)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}

// Parts splits a location into its scheme ("file", "s3" or "mem"), its authority (the
// bucket, or the in-memory store's name; "" for a directory) and its path (the absolute
// directory, with slashes, or the key prefix without leading or trailing slash): what a
// naming convention of datasets (OpenLineage's) is made of.
func Parts(rawURL string) (scheme, authority, path string, err error) {
	loc, err := parse(rawURL)
	if err != nil {
		return "", "", "", err
	}
	switch loc.scheme {
	case local:
		abs, err := filepath.Abs(loc.dir)
		if err != nil {
			return "", "", "", err
		}
		return "file", "", filepath.ToSlash(abs), nil
	case s3Bucket:
		return "s3", loc.bucket, loc.path, nil
	}
	return "mem", loc.name, loc.path, nil
}

// Spark returns a location as a Spark cluster reads it: a local path or file:// URL as
// the absolute path (a cluster on this machine or a shared file system), s3://bucket/key
// as s3a://bucket/key (Hadoop's S3 connector). Other locations have no Spark form.
func Spark(loc string) (string, error) {
	if rest, ok := strings.CutPrefix(loc, "file://"); ok {
		loc = rest
	}
	if rest, ok := strings.CutPrefix(loc, "s3://"); ok {
		return "s3a://" + rest, nil
	}
	if IsURL(loc) {
		return "", fmt.Errorf("%s: Spark reads local paths and s3:// (as s3a://) only", loc)
	}
	return filepath.Abs(loc)
}
