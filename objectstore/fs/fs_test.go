package fs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/storetest"
)

// newStore opens a store on <tmp>/store and, when the test ends, checks that nothing
// was created beside it and that no temporary file was left inside it.
func newStore(t *testing.T) *fs.Store {
	t.Helper()
	parent := t.TempDir()
	s, err := fs.New(fs.Config{Dir: filepath.Join(parent, "store")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != "store" {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("directory around the store holds %q, want only \"store\" (something escaped the root)", names)
		}
		if tmp := tempFiles(t, s.Dir()); len(tmp) > 0 {
			t.Errorf("temporary files left behind: %q", tmp)
		}
	})
	return s
}

func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), fs.TempPrefix) {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objectstore.Store { return newStore(t) })
}

// TestConformanceNoSync: without fsync the store keeps its contract (atomic writes,
// exclusive put-if-absent); only durability across a machine crash is given up.
func TestConformanceNoSync(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objectstore.Store {
		st, err := fs.New(fs.Config{Dir: t.TempDir(), NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	})
}

func TestLeftoverTempFilesAreInvisible(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, "_delta_log/00000000000000000000.json", strings.NewReader("{}"), 2); err != nil {
		t.Fatal(err)
	}
	// What a crash in the middle of a write leaves: a temporary file with half the bytes.
	crash := filepath.Join(s.Dir(), "_delta_log", fs.TempPrefix+"crashed")
	if err := os.WriteFile(crash, []byte("{\"add\":"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(crash)
	infos, err := s.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Key != "_delta_log/00000000000000000000.json" {
		t.Fatalf("List = %+v, want only the committed object", infos)
	}
	for _, key := range []string{"_delta_log/" + fs.TempPrefix + "crashed", fs.TempPrefix + "x/y"} {
		if _, err := s.Stat(ctx, key); !errors.Is(err, objectstore.ErrInvalidKey) {
			t.Errorf("Stat(%q): got err %v, want ErrInvalidKey (reserved prefix)", key, err)
		}
		if err := s.Put(ctx, key, strings.NewReader("x"), 1); !errors.Is(err, objectstore.ErrInvalidKey) {
			t.Errorf("Put(%q): got err %v, want ErrInvalidKey (reserved prefix)", key, err)
		}
	}
}

func TestDeletePrunesEmptyDirectories(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, k := range []string{"t/part=1/a.parquet", "t/part=2/sub/b.parquet"} {
		if err := s.Put(ctx, k, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "t/part=2/sub/b.parquet"); err != nil {
		t.Fatal(err)
	}
	got := dirTree(t, s.Dir())
	want := []string{"t", "t/part=1", "t/part=1/a.parquet"}
	if !slices.Equal(got, want) {
		t.Fatalf("after deleting the only file under t/part=2 the tree is %q, want %q", got, want)
	}
	if err := s.Delete(ctx, "t/part=1/a.parquet"); err != nil {
		t.Fatal(err)
	}
	if got := dirTree(t, s.Dir()); len(got) != 0 {
		t.Fatalf("after deleting everything the tree is %q, want the root empty (and kept)", got)
	}
}

func dirTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSymlinkCannotEscapeRoot(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("do not read"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(s.Dir(), "evil")); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(filepath.Join(s.Dir(), "evil"))
	if rc, err := s.Get(ctx, "evil/secret"); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Fatalf("Get through a symlink leaving the root returned %q, want an error", b)
	}
	if err := s.Put(ctx, "evil/planted", strings.NewReader("x"), 1); err == nil {
		t.Fatalf("Put through a symlink leaving the root succeeded, want an error")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("a file was created outside the root: stat err %v", err)
	}
}

func TestRelativeDirIsMadeAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	s, err := fs.New(fs.Config{Dir: "warehouse/sub"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !filepath.IsAbs(s.Dir()) || filepath.Base(s.Dir()) != "sub" {
		t.Fatalf("Dir() = %q, want an absolute path ending in warehouse/sub", s.Dir())
	}
	if err := s.Put(context.Background(), "k", bytes.NewReader([]byte("v")), 1); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join("warehouse", "sub", "k")); err != nil || string(b) != "v" {
		t.Fatalf("file on disk: %q, %v; want \"v\"", b, err)
	}
}

func TestPutOverDirectoryFails(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, "a/b/c", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	// "a/b" is a directory here; neither write may clobber it.
	if err := s.Put(ctx, "a/b", strings.NewReader("y"), 1); err == nil {
		t.Errorf("Put(a/b) over a directory succeeded, want an error")
	}
	if err := s.Put(ctx, "a/b/c/d", strings.NewReader("y"), 1); err == nil {
		t.Errorf("Put(a/b/c/d) below a file succeeded, want an error")
	}
	infos, err := s.List(ctx, "", "")
	if err != nil || len(infos) != 1 || infos[0].Key != "a/b/c" {
		t.Fatalf("List = %+v, %v; want only a/b/c", infos, err)
	}
}

// OpenReaderAt reads an object at any offset and reports its size; a missing key or a
// directory is ErrNotExist, as for Get.
func TestOpenReaderAt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	body := "0123456789abcdef"
	if err := s.Put(ctx, "t/part/f.parquet", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	ra, size, err := s.OpenReaderAt(ctx, "t/part/f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	if size != int64(len(body)) {
		t.Errorf("size %d, want %d", size, len(body))
	}
	buf := make([]byte, 4)
	if n, err := ra.ReadAt(buf, 10); n != 4 || err != nil || string(buf) != "abcd" {
		t.Errorf("ReadAt(4 bytes at 10) = %d, %v, %q; want 4, nil, \"abcd\"", n, err, buf)
	}
	if n, err := ra.ReadAt(buf, 14); n != 2 || !errors.Is(err, io.EOF) {
		t.Errorf("ReadAt past the end = %d, %v; want 2, EOF", n, err)
	}
	for _, key := range []string{"t/missing.parquet", "t/part"} {
		if _, _, err := s.OpenReaderAt(ctx, key); !errors.Is(err, objectstore.ErrNotExist) {
			t.Errorf("OpenReaderAt(%s) = %v, want ErrNotExist", key, err)
		}
	}
	if _, _, err := s.OpenReaderAt(ctx, "../escape"); err == nil {
		t.Error("OpenReaderAt(../escape): no error")
	}
}

// A file written in many steps (the disk's writes started along the way) reads back
// whole, of unknown size as a streamed upload is and of known size.
func TestLargeFileWrittenInSteps(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	want := make([]byte, 20<<20+12345)
	for i := range want {
		want[i] = byte(i*7 + i>>13)
	}
	for _, size := range []int64{-1, int64(len(want))} {
		pr, pw := io.Pipe()
		go func() {
			for b := want; len(b) > 0; {
				n := min(len(b), 100_000)
				pw.Write(b[:n])
				b = b[n:]
			}
			pw.Close()
		}()
		if err := s.Put(ctx, "big/file.bin", pr, size); err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(ctx, "big/file.bin")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: read %d bytes (%v), want the %d written", size, len(got), err, len(want))
		}
	}
}
