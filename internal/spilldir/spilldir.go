package spilldir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Prefix begins the name of every spill directory.
const Prefix = "orchestrator-spill-"

// ownerFile is the name of the owner file in a spill directory.
const ownerFile = "owner.json"

// Owner is the process that made a spill directory.
type Owner struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Start is the process's start time as the system knows it (on Linux, clock ticks
	// after boot from /proc/PID/stat); empty where it cannot be read.
	Start string    `json:"start,omitempty"`
	Made  time.Time `json:"made"`
}

var (
	selfOnce sync.Once
	self     Owner
)

// Self is this process as an owner.
func Self() Owner {
	selfOnce.Do(func() {
		host, err := os.Hostname()
		if err != nil {
			host = "unknown-host"
		}
		self = Owner{Host: host, PID: os.Getpid(), Start: startTime(os.Getpid())}
	})
	return self
}

// startTime reads a process's start time (Linux); "" when it cannot.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command (field 2) is in parentheses and may hold spaces: count after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 { // starttime is field 22: the 20th after the command
		return ""
	}
	return fields[19]
}

// alive reports whether the owner's process still runs: a process of that pid runs
// and, where start times can be read, started when the owner did.
func (o Owner) alive() bool {
	err := syscall.Kill(o.PID, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if o.Start != "" {
		if now := startTime(o.PID); now != "" && now != o.Start {
			return false // the pid was reused
		}
	}
	return true
}

// Create makes a new spill directory under base (created if missing) and writes its
// owner file.
func Create(base string) (string, error) {
	if err := os.MkdirAll(base, 0o777); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(base, Prefix)
	if err != nil {
		return "", err
	}
	o := Self()
	o.Made = time.Now().UTC()
	b, _ := json.Marshal(o)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), b, 0o644); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// Removed is a spill directory Sweep removed.
type Removed struct {
	Dir   string
	Owner Owner // zero for a directory without an owner file
	Bytes int64
}

// legacyAge is how old a spill directory without an owner file must be to be removed.
const legacyAge = 24 * time.Hour

// Sweep removes the spill directories under base whose owner is gone, and says which
// and how many bytes they held. A base that does not exist has none.
func Sweep(base string) ([]Removed, error) {
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spill directories in %s: %w", base, err)
	}
	me := Self()
	var out []Removed
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), Prefix) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		var o Owner
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		switch {
		case err == nil && json.Unmarshal(b, &o) == nil && o.PID > 0:
			if o.Host != me.Host || (o.PID == me.PID && o.Start == me.Start) || o.alive() {
				continue
			}
		case errors.Is(err, fs.ErrNotExist):
			info, err := e.Info()
			if err != nil || time.Since(info.ModTime()) < legacyAge {
				continue
			}
		default:
			continue // unreadable: leave it
		}
		n := size(dir)
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, Removed{Dir: dir, Owner: o, Bytes: n})
	}
	return out, errors.Join(errs...)
}

// size is the bytes of the files under dir.
func size(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
