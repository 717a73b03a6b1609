package fs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

var (
	_ objectstore.Store       = (*Store)(nil)
	_ objectstore.RangeGetter = (*Store)(nil)
)

// TempPrefix starts the name of every temporary file the store writes. List skips such
// files, and keys with a segment that starts with it are invalid.
const TempPrefix = ".orch-tmp-"

// Config configures a Store.
type Config struct {
	// Dir is the root directory. A relative path is made absolute; the directory and its
	// parents are created if missing.
	Dir string
	// NoSync skips the fsync of files and directories that makes a write durable when the
	// machine (not only the process) crashes. Writes stay atomic and put-if-absent stays
	// exclusive; a machine crash may lose the latest writes. For data that may be lost so
	// (the scheduler's run records), never for tables.
	NoSync bool
}

// Store is an object store on a local directory. It is safe for concurrent use, also by
// several processes sharing the directory. Close releases its directory handle.
type Store struct {
	dir    string
	root   *os.Root
	noSync bool
}

// New opens (creating if needed) the directory cfg.Dir as a store.
func New(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("fs store: no directory given")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("fs store %s: %w", cfg.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("fs store: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("fs store: %w", err)
	}
	return &Store{dir: dir, root: root, noSync: cfg.NoSync}, nil
}

// Dir returns the absolute root directory.
func (s *Store) Dir() string { return s.dir }

// URI returns file:///dir/key (objectstore.Locator).
func (s *Store) URI(key string) string {
	p := filepath.ToSlash(s.dir)
	if key != "" {
		p = strings.TrimSuffix(p, "/") + "/" + key
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

var _ objectstore.Locator = (*Store)(nil)

// Close releases the directory handle. The store must not be used afterwards.
func (s *Store) Close() error { return s.root.Close() }

// native turns a slash-separated key or directory ("" is the root) into a name for s.root.
func native(key string) string {
	if key == "" {
		return "."
	}
	return filepath.FromSlash(key)
}

// checkKey applies the objectstore key rules plus this package's reserved prefix.
func checkKey(op, key string) error {
	if err := objectstore.ValidateKey(key); err != nil {
		return fmt.Errorf("fs %s: %w", op, err)
	}
	for _, seg := range strings.Split(key, "/") {
		if strings.HasPrefix(seg, TempPrefix) {
			return fmt.Errorf("fs %s: %w %q: segment %q uses the prefix reserved for temporary files (%s)",
				op, objectstore.ErrInvalidKey, key, seg, TempPrefix)
		}
	}
	return nil
}

// notExist reports whether err means "no such object": the name or one of its parent
// directories is missing, or a parent is a file.
func notExist(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func opErr(op, key string, err error) error {
	if notExist(err) {
		return fmt.Errorf("fs %s %q: %w", op, key, objectstore.ErrNotExist)
	}
	return fmt.Errorf("fs %s %q: %w", op, key, err)
}

// Get opens the object for reading.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// GetRange opens length bytes of the object from offset (length < 0: to the end).
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := checkKey("get", key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("fs get %q: negative offset %d", key, offset)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fs get %q: %w", key, err)
	}
	f, err := s.root.Open(native(key))
	if err != nil {
		return nil, opErr("get", key, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = iofs.ErrNotExist // a directory is not an object
	}
	if err == nil && offset > 0 {
		_, err = f.Seek(offset, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, opErr("get", key, err)
	}
	var r io.Reader = f
	if length >= 0 {
		r = io.LimitReader(f, length)
	}
	return readCloser{Reader: objectstore.ContextReader(ctx, r), Closer: f}, nil
}

// OpenReaderAt opens the object's file for reads at any offset (the caller closes it).
func (s *Store) OpenReaderAt(ctx context.Context, key string) (objectstore.ReaderAtCloser, int64, error) {
	if err := checkKey("get", key); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("fs get %q: %w", key, err)
	}
	f, err := s.root.Open(native(key))
	if err != nil {
		return nil, 0, opErr("get", key, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = iofs.ErrNotExist // a directory is not an object
	}
	if err != nil {
		f.Close()
		return nil, 0, opErr("get", key, err)
	}
	return f, fi.Size(), nil
}

// Stat returns the object's size and modification time.
func (s *Store) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := checkKey("stat", key); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("fs stat %q: %w", key, err)
	}
	fi, err := s.root.Stat(native(key))
	if err == nil && !fi.Mode().IsRegular() {
		err = iofs.ErrNotExist
	}
	if err != nil {
		return objectstore.ObjectInfo{}, opErr("stat", key, err)
	}
	return objectstore.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Put writes the object atomically, replacing any previous one.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, "put", key, r, size, false)
}

// PutIfAbsent writes the object atomically if key is free, else returns ErrExist.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, "put-if-absent", key, r, size, true)
}

// write copies r into a synced temporary file next to the key, then publishes it with
// rename (Put) or link (PutIfAbsent) and syncs the directory. On any error the
// temporary file is removed and the key is untouched.
func (s *Store) write(ctx context.Context, op, key string, r io.Reader, size int64, exclusive bool) error {
	if err := checkKey(op, key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fs %s %q: %w", op, key, err)
	}
	dir := path.Dir(key)
	if dir == "." {
		dir = ""
	}
	tmp, tmpName, err := s.createTemp(dir)
	if err != nil {
		return fmt.Errorf("fs %s %q: %w", op, key, err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
		}
		if tmpName != "" {
			_ = s.root.Remove(native(tmpName))
		}
	}()

	src := objectstore.ContextReader(ctx, r)
	if size >= 0 {
		src = io.LimitReader(src, size+1) // one byte more reveals a reader longer than size
	}
	dst := io.Writer(tmp)
	var wb *writeback
	if !s.noSync {
		wb = &writeback{f: tmp}
		dst = wb
	}
	n, err := io.Copy(dst, src)
	wb.wait()
	if err != nil {
		return fmt.Errorf("fs %s %q: read: %w", op, key, err)
	}
	if size >= 0 && n != size {
		got := fmt.Sprint(n)
		if n > size {
			got = fmt.Sprintf("more than %d", size)
		}
		return fmt.Errorf("fs %s %q: reader yielded %s bytes, want %d", op, key, got, size)
	}
	if !s.noSync {
		if err := tmp.Sync(); err != nil {
			return fmt.Errorf("fs %s %q: %w", op, key, err)
		}
	}
	err = tmp.Close()
	tmp = nil
	if err != nil {
		return fmt.Errorf("fs %s %q: %w", op, key, err)
	}
	if err := ctx.Err(); err != nil { // last chance to back out before publishing
		return fmt.Errorf("fs %s %q: %w", op, key, err)
	}

	err = s.publish(dir, func() error {
		if exclusive {
			// The deferred Remove drops the temporary name; the key keeps the data.
			return s.root.Link(native(tmpName), native(key))
		}
		if err := s.root.Rename(native(tmpName), native(key)); err != nil {
			return err
		}
		tmpName = ""
		return nil
	})
	if exclusive && errors.Is(err, iofs.ErrExist) {
		return fmt.Errorf("fs %s %q: %w", op, key, objectstore.ErrExist)
	}
	if err != nil {
		return fmt.Errorf("fs %s %q: %w", op, key, err)
	}
	return nil
}

// writeback writes a file that will be synced, syncing it every writebackEvery bytes on
// a goroutine of its own: a large file then goes to disk while it is written instead of
// all at its fsync, which the writer would wait for with its cores idle (on a VM's disk
// an fsync of 128 MiB took 0.4 s). wait ends the goroutine before the file's own fsync.
type writeback struct {
	f        *os.File
	written  int64
	asked    int64
	requests chan struct{}
	done     chan struct{}
}

// writebackEvery is small enough that the last fsync, which the writer waits for, has
// little left to write: a rewritten 18 MB file's took 10-20 ms with 16 MiB, its
// writer's cores idle.
const writebackEvery = 4 << 20

func (w *writeback) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if w.written-w.asked >= writebackEvery {
		if w.requests == nil {
			w.requests, w.done = make(chan struct{}, 1), make(chan struct{})
			go func() {
				defer close(w.done)
				for range w.requests {
					_ = w.f.Sync() // the file's own fsync at the end reports an error
				}
			}()
		}
		select {
		case w.requests <- struct{}{}:
		default: // one is waiting already; it syncs what is written by then
		}
		w.asked = w.written
	}
	return n, err
}

// wait ends the syncs along the way (nil: there are none).
func (w *writeback) wait() {
	if w != nil && w.requests != nil {
		close(w.requests)
		<-w.done
		w.requests = nil
	}
}

// createTemp creates dir as needed and an exclusive temporary file in it. It retries
// when a concurrent Delete prunes the directory between the two steps.
func (s *Store) createTemp(dir string) (*os.File, string, error) {
	for attempt := 0; ; attempt++ {
		err := s.mkdirs(dir)
		if err == nil {
			name := path.Join(dir, TempPrefix+rand.Text())
			var f *os.File
			f, err = s.root.OpenFile(native(name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
			if err == nil {
				return f, name, nil
			}
		}
		if !errors.Is(err, iofs.ErrNotExist) || attempt >= 10 {
			return nil, "", err
		}
	}
}

// mkdirs creates dir and its missing parents, syncing each new directory's parent so the
// new entry survives a crash.
func (s *Store) mkdirs(dir string) error {
	if dir == "" {
		return nil
	}
	if fi, err := s.root.Stat(native(dir)); err == nil && fi.IsDir() {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		d := strings.Join(parts[:i+1], "/")
		err := s.root.Mkdir(native(d), 0o777)
		switch {
		case err == nil:
			if err := s.syncDir(strings.Join(parts[:i], "/")); err != nil {
				return err
			}
		case errors.Is(err, iofs.ErrExist):
			// Already there (or a file: creating the temporary file below reports it).
		default:
			return err
		}
	}
	return nil
}

// publish runs create, which makes a key appear in dir (a link or a rename), under a
// shared lock of dir, then syncs dir so the new entry is durable (unless NoSync). List
// reads a directory under an exclusive lock of it, so it never reads one while a key
// appears there: the listing of a directory is a snapshot (see List).
func (s *Store) publish(dir string, create func() error) error {
	f, err := s.root.Open(native(dir))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := flock(f, lockShared); err != nil {
		return fmt.Errorf("lock directory: %w", err)
	}
	err = create()
	if uerr := flock(f, unlock); err == nil && uerr != nil {
		err = fmt.Errorf("unlock directory: %w", uerr)
	}
	if err != nil || s.noSync {
		return err
	}
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync directory: %w", err) // EINVAL: the file system does not sync directories
	}
	return nil
}

// syncDir fsyncs a directory so renames, links and new entries in it are durable.
func (s *Store) syncDir(dir string) error {
	if s.noSync {
		return nil
	}
	f, err := s.root.Open(native(dir))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err // EINVAL: the file system does not sync directories; nothing to do
	}
	return nil
}

// Delete removes the object and then any parent directories it left empty.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fs delete %q: %w", key, err)
	}
	fi, err := s.root.Lstat(native(key))
	if err != nil {
		if notExist(err) {
			return nil
		}
		return fmt.Errorf("fs delete %q: %w", key, err)
	}
	if fi.IsDir() {
		return nil // a directory is not an object
	}
	if err := s.root.Remove(native(key)); err != nil && !notExist(err) {
		return fmt.Errorf("fs delete %q: %w", key, err)
	}
	dir := path.Dir(key)
	if dir == "." {
		dir = ""
	}
	if err := s.syncDir(dir); err != nil && !notExist(err) {
		return fmt.Errorf("fs delete %q: sync directory: %w", key, err)
	}
	// Prune empty parents; Remove fails on the first non-empty one, which ends it.
	for d := dir; d != ""; d = parent(d) {
		if s.root.Remove(native(d)) != nil {
			break
		}
	}
	return nil
}

func parent(dir string) string {
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		return dir[:i]
	}
	return ""
}

// List walks only the directories that can hold keys with the prefix, then sorts:
// a walk's order is not byte order ("a/b-c" < "a/b/c" although "b" < "b-c").
func (s *Store) List(ctx context.Context, prefix, startAfter string) ([]objectstore.ObjectInfo, error) {
	if err := objectstore.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("fs list %q: %w", prefix, err)
	}
	if p := strings.TrimSuffix(prefix, "/"); p != "" {
		if err := checkKey("list", p); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fs list %q: %w", prefix, err)
	}
	var out []objectstore.ObjectInfo
	if err := s.walk(ctx, parent(prefix), prefix, startAfter, &out); err != nil {
		return nil, fmt.Errorf("fs list %q: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b objectstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *Store) walk(ctx context.Context, dir, prefix, startAfter string, out *[]objectstore.ObjectInfo) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	names, err := s.readDir(dir)
	if notExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasPrefix(name, TempPrefix) {
			continue
		}
		key := name
		if dir != "" {
			key = dir + "/" + name
		}
		// Decided by the name first, so that a listing after a key (startAfter) of a
		// large directory stats only the entries it returns, not all of them.
		sub := key + "/"
		asDir := (strings.HasPrefix(sub, prefix) || strings.HasPrefix(prefix, sub)) && // a key below sub may have the prefix
			(sub >= startAfter || strings.HasPrefix(startAfter, sub)) // and sort after startAfter
		asFile := strings.HasPrefix(key, prefix) && key > startAfter && objectstore.ValidateKey(key) == nil
		if !asDir && !asFile {
			continue
		}
		fi, err := s.root.Lstat(native(key))
		if err == nil && fi.Mode()&iofs.ModeSymlink != 0 {
			fi, err = s.root.Stat(native(key)) // followed only to a file inside the root
			if err != nil || fi.IsDir() {
				continue
			}
		}
		if notExist(err) {
			continue // deleted while we walked
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if asDir {
				if err := s.walk(ctx, key, prefix, startAfter, out); err != nil {
					return err
				}
			}
			continue
		}
		if asFile && fi.Mode().IsRegular() { // sockets, devices, pipes are not objects
			*out = append(*out, objectstore.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		}
	}
	return nil
}

// readDir reads a directory's entries under an exclusive lock of it, which waits for keys
// being published there (see publish) and holds off new ones until the read is done. A
// plain readdir taken while other writers create files can return a later file and miss
// an earlier one (ext4 returns entries in hash order), so a Delta log listing would show
// a gap where a version exists.
func (s *Store) readDir(dir string) ([]string, error) {
	f, err := s.root.Open(native(dir))
	if err != nil {
		return nil, err
	}
	defer f.Close() // releases the lock
	if err := flock(f, lockExclusive); err != nil {
		return nil, fmt.Errorf("lock directory %q: %w", dir, err)
	}
	return f.Readdirnames(-1)
}

type readCloser struct {
	io.Reader
	io.Closer
}
