package storeurl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
)

// TestStoresShareByLocation: a Stores gives one store per location and settings (a
// relative and an absolute path to one directory are one location; a mem:// name is
// one store, in this Stores only), and another store for other settings that matter.
func TestStoresShareByLocation(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	t.Chdir(base)
	stores := storeurl.NewStores()
	defer stores.Close()
	open := func(s *storeurl.Stores, u string, o storeurl.Options) objectstore.Store {
		t.Helper()
		st, err := s.Open(ctx, u, o)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		return st
	}
	for _, c := range []struct {
		name string
		a, b string
		ao   storeurl.Options
		bo   storeurl.Options
		same bool
	}{
		{"relative and absolute", "wh", filepath.Join(base, "wh"), storeurl.Options{}, storeurl.Options{}, true},
		{"file URL", "wh", "file://" + filepath.ToSlash(filepath.Join(base, "wh")), storeurl.Options{}, storeurl.Options{}, true},
		{"S3 settings do not matter locally", "wh", "wh", storeurl.Options{}, storeurl.Options{Region: "x"}, true},
		{"NoSync does locally", "wh", "wh", storeurl.Options{}, storeurl.Options{NoSync: true}, false},
		{"other directory", "wh", "other", storeurl.Options{}, storeurl.Options{}, false},
		{"mem name", "mem://a", "mem://a/", storeurl.Options{}, storeurl.Options{NoSync: true}, true},
		{"mem no name", "mem://", "mem://", storeurl.Options{}, storeurl.Options{}, true},
		{"other mem name", "mem://a", "mem://b", storeurl.Options{}, storeurl.Options{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := open(stores, c.a, c.ao) == open(stores, c.b, c.bo); got != c.same {
				t.Fatalf("%s and %s: same store %v, want %v", c.a, c.b, got, c.same)
			}
		})
	}
	other := storeurl.NewStores()
	defer other.Close()
	roundTrip(t, open(stores, "mem://a", storeurl.Options{}), "k", "v")
	if _, err := open(other, "mem://a", storeurl.Options{}).Stat(ctx, "k"); !errors.Is(err, objectstore.ErrNotExist) {
		t.Fatalf("mem://a of another Stores: Stat = %v, want a store of its own", err)
	}
	if st := open(stores, "wh", storeurl.Options{NoSync: true}).(*fs.Store); st.Dir() != filepath.Join(base, "wh") {
		t.Fatalf("NoSync store on %s, want %s", st.Dir(), filepath.Join(base, "wh"))
	}
}

// TestStoresDirAndTable: a source directory is its store and the prefix in it; a table
// location is the store one level above and the table's root; a missing local directory
// is refused, not created.
func TestStoresDirAndTable(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "wh", "sales"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "wh", "file.csv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stores := storeurl.NewStores()
	defer stores.Close()
	dirOf := func(st objectstore.Store) string {
		if f, ok := st.(*fs.Store); ok {
			return f.Dir()
		}
		return "mem"
	}
	for _, c := range []struct {
		op, loc       string
		dir, key, err string
	}{
		{"Dir", filepath.Join(base, "wh"), filepath.Join(base, "wh"), "", ""},
		{"Dir", "file://" + filepath.ToSlash(filepath.Join(base, "wh")), filepath.Join(base, "wh"), "", ""},
		{"Dir", "mem://m/landing/day=1/", "mem", "landing/day=1", ""},
		{"Dir", filepath.Join(base, "missing"), "", "", "no such file"},
		{"Dir", filepath.Join(base, "wh", "file.csv"), "", "", "is not a directory"},
		{"Table", filepath.Join(base, "wh", "sales"), filepath.Join(base, "wh"), "sales", ""},
		{"Table", filepath.Join(base, "wh", "sales") + "/", filepath.Join(base, "wh"), "sales", ""},
		{"Table", "mem://m/sales", "mem", "sales", ""},
		{"Table", filepath.Join(base, "wh", "missing"), "", "", "no such directory"},
		{"Table", filepath.Join(base, "wh", "file.csv"), "", "", "not a directory"},
	} {
		t.Run(c.op+" "+c.loc, func(t *testing.T) {
			open := stores.Dir
			if c.op == "Table" {
				open = stores.Table
			}
			st, key, err := open(ctx, c.loc, storeurl.Options{})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := dirOf(st); got != c.dir || key != c.key {
				t.Fatalf("store %s, key %q; want %s, %q", got, key, c.dir, c.key)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(base, "wh", "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused table directory was created: %v", err)
	}
	m, _ := stores.Open(ctx, "mem://m", storeurl.Options{})
	if d, _, _ := stores.Dir(ctx, "mem://m/landing", storeurl.Options{}); d != m {
		t.Fatal("mem://m/landing is not in the store mem://m")
	}
}

// TestStoresTableOnS3 opens a table location on the test MinIO: the store one level
// above, the root its last segment.
func TestStoresTableOnS3(t *testing.T) {
	cfg := testenv.S3Config(t)
	ctx := context.Background()
	opts := storeurl.Options{Endpoint: cfg.Endpoint, AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey, PathStyle: true}
	prefix := testenv.S3Prefix(t)
	stores := storeurl.NewStores()
	defer stores.Close()
	st, root, err := stores.Table(ctx, "s3://"+cfg.Bucket+"/"+prefix+"/wh/sales/", opts)
	if err != nil || root != "sales" {
		t.Fatalf("Table = %q, %v; want root sales", root, err)
	}
	roundTrip(t, st, "sales/x", "v")
	defer st.Delete(ctx, "sales/x")
	wh, prefixIn, err := stores.Dir(ctx, "s3://"+cfg.Bucket+"/"+prefix+"/wh", opts)
	if err != nil || prefixIn != prefix+"/wh" {
		t.Fatalf("Dir = %q, %v; want prefix %s/wh", prefixIn, err, prefix)
	}
	if got := read(t, wh, prefix+"/wh/sales/x"); got != "v" {
		t.Fatalf("the table's object from the bucket reads %q, want v", got)
	}
	if again, _, _ := stores.Table(ctx, "s3a://"+cfg.Bucket+"/"+prefix+"/wh/other", opts); again != st {
		t.Fatal("two tables of one warehouse: two stores")
	}
}

// TestOptionsOver: the flags' settings win, the file's fill in; an insecure endpoint
// without a scheme is http, whichever side it comes from, and only there.
func TestOptionsOver(t *testing.T) {
	file := storeurl.Options{Endpoint: "minio:9000", Region: "eu", AccessKey: "k", SecretKey: "s", Insecure: true}
	for _, c := range []struct {
		name  string
		flags storeurl.Options
		want  storeurl.Options
	}{
		{"no flags", storeurl.Options{}, storeurl.Options{Endpoint: "http://minio:9000", Region: "eu", AccessKey: "k", SecretKey: "s"}},
		{"endpoint flag", storeurl.Options{Endpoint: "other:9000"}, storeurl.Options{Endpoint: "other:9000", Region: "eu", AccessKey: "k", SecretKey: "s"}},
		{"region and path style", storeurl.Options{Region: "us", PathStyle: true}, storeurl.Options{Endpoint: "http://minio:9000", Region: "us", AccessKey: "k", SecretKey: "s", PathStyle: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.flags.Over(file); got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestLocations: reading and building locations without opening them.
func TestLocations(t *testing.T) {
	abs, _ := filepath.Abs("rel/wh")
	for _, c := range []struct{ got, want string }{
		{storeurl.Join("s3://b/wh/", "sales/orders"), "s3://b/wh/sales/orders"},
		{storeurl.Join("/data/wh", "sales/orders"), filepath.Join("/data/wh", "sales", "orders")},
		{storeurl.Anchor("/p", "wh"), filepath.Join("/p", "wh")},
		{storeurl.Anchor("/p", "/abs"), "/abs"},
		{storeurl.Anchor("/p", "s3://b/x"), "s3://b/x"},
		{storeurl.URI("s3://b/wh/t/"), "s3://b/wh/t"},
		{storeurl.URI("rel/wh"), "file://" + filepath.ToSlash(abs)},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for loc, want := range map[string]string{"rel/wh": "rel/wh", "file:///data/wh": "/data/wh", "s3://b/x": "", "mem://x": ""} {
		if dir, ok := storeurl.Local(loc); dir != want || ok != (want != "") {
			t.Errorf("Local(%q) = %q, %v; want %q", loc, dir, ok, want)
		}
	}
	for loc, want := range map[string]bool{"mem://": true, "mem://x/y": true, "/data": false, "s3://b": false} {
		if got := storeurl.InProcess(loc); got != want {
			t.Errorf("InProcess(%q) = %v, want %v", loc, got, want)
		}
	}
}
