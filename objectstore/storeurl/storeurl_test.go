package storeurl_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
)

func roundTrip(t *testing.T, st objectstore.Store, key, value string) {
	t.Helper()
	ctx := context.Background()
	if err := st.Put(ctx, key, strings.NewReader(value), int64(len(value))); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if got := read(t, st, key); got != value {
		t.Fatalf("Get(%q) = %q, want %q", key, got, value)
	}
}

func read(t *testing.T, st objectstore.Store, key string) string {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOpenDirectory(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	t.Chdir(base)
	cases := []struct {
		url     string
		wantDir string
	}{
		{"warehouse/rel", filepath.Join(base, "warehouse", "rel")},
		{filepath.Join(base, "plain-abs"), filepath.Join(base, "plain-abs")},
		{"file://" + filepath.ToSlash(filepath.Join(base, "from-url")), filepath.Join(base, "from-url")},
		{"file://localhost" + filepath.ToSlash(filepath.Join(base, "localhost")), filepath.Join(base, "localhost")},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			st, err := storeurl.Open(ctx, c.url, storeurl.Options{})
			if err != nil {
				t.Fatalf("Open(%q): %v", c.url, err)
			}
			fst, ok := st.(*fs.Store)
			if !ok {
				t.Fatalf("Open(%q) gave a %T, want *fs.Store", c.url, st)
			}
			defer fst.Close()
			if fst.Dir() != c.wantDir {
				t.Fatalf("Open(%q).Dir() = %q, want %q", c.url, fst.Dir(), c.wantDir)
			}
			roundTrip(t, st, "a/b.json", "{}")
			if _, err := os.Stat(filepath.Join(c.wantDir, "a", "b.json")); err != nil {
				t.Fatalf("object not on disk where expected: %v", err)
			}
		})
	}
}

func TestOpenMem(t *testing.T) {
	ctx := context.Background()
	open := func(u string) objectstore.Store {
		t.Helper()
		st, err := storeurl.Open(ctx, u, storeurl.Options{})
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		if _, ok := st.(*mem.Store); !ok {
			t.Fatalf("Open(%q) gave a %T, want *mem.Store", u, st)
		}
		return st
	}
	// Open gives a new store each time, named or not: nothing is shared through the
	// process (a Stores shares them, TestStoresShareByLocation).
	for _, u := range []string{"mem://", "mem://name"} {
		a, b := open(u), open(u)
		roundTrip(t, a, "k", "in a")
		if _, err := b.Stat(ctx, "k"); err == nil {
			t.Fatalf("two %s stores from Open share objects, want each to be new", u)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	cases := []struct{ url, want string }{
		{"", "empty URL"},
		{"gs://bucket/x", `unknown scheme "gs"`},
		{"file://otherhost/x", "file:///absolute/dir"},
		{"file:relative/x", "file:///absolute/dir"},
		{"file:///abs?x=1", "file:///absolute/dir"},
		{"mem://a/b", "mem://name"},
		{"s3:///no-bucket", "s3://bucket/prefix"},
		{"s3://bucket/p?endpoint=x", "s3://bucket/prefix"},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			st, err := storeurl.Open(context.Background(), c.url, storeurl.Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open(%q) = %v, %v; want an error containing %q", c.url, st, err, c.want)
			}
		})
	}
}

// TestOpenS3 opens s3:// URLs against the test MinIO. The environment points at a
// wrong endpoint on purpose: Options must override it.
func TestOpenS3(t *testing.T) {
	cfg := testenv.S3Config(t)
	ctx := context.Background()
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1") // nothing listens there
	t.Setenv("AWS_ACCESS_KEY_ID", "env-key-that-is-wrong")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret-that-is-wrong")
	t.Setenv("AWS_REGION", "us-east-1")
	opts := storeurl.Options{Endpoint: cfg.Endpoint, AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey, PathStyle: true}
	prefix := testenv.S3Prefix(t)

	st, err := storeurl.Open(ctx, "s3://"+cfg.Bucket+"/"+prefix+"/", opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, ok := st.(*s3.Store); !ok {
		t.Fatalf("Open gave a %T, want *s3.Store", st)
	}
	roundTrip(t, st, "_delta_log/0.json", "{}")
	defer st.Delete(ctx, "_delta_log/0.json")

	// The same object seen from the bucket root sits under the URL's prefix.
	whole, err := storeurl.Open(ctx, "s3a://"+cfg.Bucket, opts)
	if err != nil {
		t.Fatalf("Open bucket root: %v", err)
	}
	if got := read(t, whole, prefix+"/_delta_log/0.json"); got != "{}" {
		t.Fatalf("object under the prefix reads %q, want %q", got, "{}")
	}

	if _, err := storeurl.Open(ctx, "s3://no-such-bucket-orch-test/x", opts); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Open of a missing bucket: got err %v, want one saying it does not exist", err)
	}
}

// TestSpark: the Spark form of a location is s3a:// for s3://, an absolute path for a
// local one, and an error naming the location for any other.
func TestSpark(t *testing.T) {
	abs, _ := filepath.Abs("wh")
	for _, tc := range []struct{ in, want, err string }{
		{"s3://bucket/wh", "s3a://bucket/wh", ""},
		{"file:///data/wh", "/data/wh", ""},
		{"/data/wh", "/data/wh", ""},
		{"wh", abs, ""},
		{"mem://x", "", "mem://x: Spark reads local paths and s3:// (as s3a://) only"},
	} {
		got, err := storeurl.Spark(tc.in)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("Spark(%q) = %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}
