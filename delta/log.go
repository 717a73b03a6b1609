package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// logDirName is the name of the log directory under a table root.
const logDirName = "_delta_log"

// logFileKind classifies a file in _delta_log.
type logFileKind int

const (
	kindCommit       logFileKind = iota // N.json
	kindCheckpoint                      // N.checkpoint.parquet (classic, single file)
	kindMultiPart                       // N.checkpoint.PART.PARTS.parquet
	kindV2Checkpoint                    // N.checkpoint.<uuid>.json|parquet
)

// logFile is one recognised file of _delta_log.
type logFile struct {
	info    objectstore.ObjectInfo
	version int64
	kind    logFileKind
	part    int // multi-part: 1-based part number
	parts   int // multi-part: number of parts
}

// parseLogFile recognises commit and checkpoint files by name. name is the key relative to
// the _delta_log/ directory; names in subdirectories, temp files, .crc and compacted files
// are not recognised (ok is false).
func parseLogFile(name string) (lf logFile, ok bool) {
	if len(name) < 21 || strings.IndexByte(name, '/') >= 0 || name[20] != '.' {
		return lf, false
	}
	for i := 0; i < 20; i++ {
		if name[i] < '0' || name[i] > '9' {
			return lf, false
		}
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return lf, false
	}
	lf.version = v
	rest := name[21:]
	switch {
	case rest == "json":
		lf.kind = kindCommit
		return lf, true
	case rest == "checkpoint.parquet":
		lf.kind = kindCheckpoint
		return lf, true
	case strings.HasPrefix(rest, "checkpoint."):
		mid := strings.TrimPrefix(rest, "checkpoint.")
		if p, ok := strings.CutSuffix(mid, ".parquet"); ok {
			if a, b, ok := strings.Cut(p, "."); ok && len(a) == 10 && len(b) == 10 {
				part, err1 := strconv.Atoi(a)
				parts, err2 := strconv.Atoi(b)
				if err1 == nil && err2 == nil && part >= 1 && part <= parts {
					lf.kind, lf.part, lf.parts = kindMultiPart, part, parts
					return lf, true
				}
				return lf, false
			}
			if !strings.Contains(p, ".") {
				lf.kind = kindV2Checkpoint
				return lf, true
			}
			return lf, false
		}
		if p, ok := strings.CutSuffix(mid, ".json"); ok && !strings.Contains(p, ".") {
			lf.kind = kindV2Checkpoint
			return lf, true
		}
	}
	return lf, false
}

// logPrefix is the key prefix of the table's log directory, with a trailing slash.
func (t *Table) logPrefix() string {
	return t.key(logDirName) + "/"
}

// key joins a path relative to the table root into a store key.
func (t *Table) key(rel string) string {
	if t.root == "" {
		return rel
	}
	return t.root + "/" + rel
}

// commitKey is the store key of the commit file of version v.
func (t *Table) commitKey(v int64) string {
	return fmt.Sprintf("%s%020d.json", t.logPrefix(), v)
}

// listLog lists the recognised files of _delta_log, in ascending key order. With
// fromVersion >= 0 only the files of versions >= fromVersion are listed (the store's
// startAfter does the work, so a long log is not listed from the start).
func (t *Table) listLog(ctx context.Context, fromVersion int64) ([]logFile, error) {
	prefix := t.logPrefix()
	startAfter := ""
	if fromVersion > 0 {
		startAfter = fmt.Sprintf("%s%020d", prefix, fromVersion)
	}
	infos, err := t.store.List(ctx, prefix, startAfter)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	out := make([]logFile, 0, len(infos))
	for _, info := range infos {
		lf, ok := parseLogFile(strings.TrimPrefix(info.Key, prefix))
		if !ok || lf.version < fromVersion {
			continue
		}
		lf.info = info
		out = append(out, lf)
	}
	return out, nil
}

// lastCheckpoint is the content of _delta_log/_last_checkpoint.
type lastCheckpoint struct {
	Version       int64  `json:"version"`
	Size          int64  `json:"size"`
	Parts         *int   `json:"parts,omitempty"`
	SizeInBytes   *int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles *int64 `json:"numOfAddFiles,omitempty"`
	// V2Checkpoint names the UUID-named checkpoint the hint is about (Delta-Spark's
	// LastCheckpointV2); absent for classic and multi-part checkpoints.
	V2Checkpoint *lastCheckpointV2 `json:"v2Checkpoint,omitempty"`
}

// lastCheckpointV2 describes a UUID-named checkpoint in _last_checkpoint. Spark may also
// embed the checkpoint's non-file actions; this package neither writes nor needs them.
type lastCheckpointV2 struct {
	Path             string    `json:"path"`
	SizeInBytes      int64     `json:"sizeInBytes"`
	ModificationTime int64     `json:"modificationTime"`
	SidecarFiles     []Sidecar `json:"sidecarFiles,omitempty"`
}

// about says whether the hint describes the checkpoint cp: same version, and the same
// UUID-named file when the hint names one (a classic checkpoint at the same version is a
// different file, whose size the hint does not give).
func (lc *lastCheckpoint) about(cp *checkpointRef) bool {
	if lc == nil || lc.Version != cp.version {
		return false
	}
	if lc.V2Checkpoint != nil {
		return cp.kind == kindV2Checkpoint && path.Base(cp.files[0].Key) == lc.V2Checkpoint.Path
	}
	return cp.kind != kindV2Checkpoint
}

// readLastCheckpoint reads the _last_checkpoint hint. A missing or unreadable file gives
// nil and the reason; callers treat both as "no hint".
func (t *Table) readLastCheckpoint(ctx context.Context) (*lastCheckpoint, error) {
	b, err := t.getAll(ctx, t.logPrefix()+"_last_checkpoint")
	if err != nil {
		return nil, err
	}
	var lc lastCheckpoint
	if err := json.Unmarshal(bytes.TrimSpace(b), &lc); err != nil {
		return nil, fmt.Errorf("_last_checkpoint: %w", err)
	}
	if lc.Version < 0 {
		return nil, fmt.Errorf("_last_checkpoint: negative version %d", lc.Version)
	}
	return &lc, nil
}

// check compares a checkpoint, as read, with what the hint says about it, when the hint
// is about it: the total size of its files and sidecars and its number of add actions. A
// checkpoint that disagrees was replaced or rewritten since the hint was written, and
// its content cannot be trusted to be the state of its version.
func (lc *lastCheckpoint) check(cp *checkpointRef, cd *checkpointData) error {
	if !lc.about(cp) {
		return nil
	}
	name := cp.files[0].Key
	if lc.SizeInBytes != nil && cd.size != *lc.SizeInBytes {
		return fmt.Errorf("%s: the checkpoint (with its sidecars) is %d bytes, but _last_checkpoint records %d", name, cd.size, *lc.SizeInBytes)
	}
	if lc.NumOfAddFiles != nil {
		var adds int64
		for i := range cd.actions {
			if cd.actions[i].Add != nil {
				adds++
			}
		}
		if adds != *lc.NumOfAddFiles {
			return fmt.Errorf("%s: the checkpoint holds %d add actions, but _last_checkpoint records %d", name, adds, *lc.NumOfAddFiles)
		}
	}
	return nil
}

// getAll reads a whole object.
func (t *Table) getAll(ctx context.Context, key string) ([]byte, error) {
	rc, err := t.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// readCommit reads and decodes the commit file of version v. A commit holds at least one
// action: an empty file (truncated, or left by a writer on a store without atomic puts)
// is an error, never an empty commit, so that no reader skips the version's changes and
// no writer commits on top of it.
func (t *Table) readCommit(ctx context.Context, v int64) ([]Action, error) {
	key := t.commitKey(v)
	b, err := t.getAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read version %d: %w", v, err)
	}
	acts, err := DecodeActions(bytes.NewReader(b))
	if err == nil && len(acts) == 0 {
		err = fmt.Errorf("the file is empty (%d bytes): a commit holds at least one action", len(b))
	}
	if err != nil {
		return nil, fmt.Errorf("read version %d: corrupt commit file %s: %w", v, key, err)
	}
	t.canonicalizePaths(acts)
	return acts, nil
}

// checkpointRef is one complete checkpoint: a classic file, every part of a multi-part
// set, or a V2 (UUID-named) checkpoint.
type checkpointRef struct {
	version int64
	kind    logFileKind
	files   []objectstore.ObjectInfo // in part order
}

// logSegment is what a snapshot of one version is built from: an optional checkpoint and
// the commit files after it, contiguous up to version.
type logSegment struct {
	version    int64
	checkpoint *checkpointRef
	commits    []logFile // versions (checkpoint or -1)+1 .. version, ascending
	// versionFile is the commit file of version itself when listed (it gives the
	// snapshot's timestamp even when version is covered by the checkpoint).
	versionFile *logFile
}

// logIndex sorts a listing into commits and complete checkpoints.
type logIndex struct {
	commits     []logFile // ascending, one per version
	checkpoints []*checkpointRef
}

func indexLog(files []logFile) *logIndex {
	idx := &logIndex{}
	type mpKey struct {
		version int64
		parts   int
	}
	multi := map[mpKey]map[int]objectstore.ObjectInfo{}
	for _, f := range files {
		switch f.kind {
		case kindCommit:
			idx.commits = append(idx.commits, f)
		case kindCheckpoint, kindV2Checkpoint:
			idx.checkpoints = append(idx.checkpoints, &checkpointRef{version: f.version, kind: f.kind, files: []objectstore.ObjectInfo{f.info}})
		case kindMultiPart:
			k := mpKey{f.version, f.parts}
			if multi[k] == nil {
				multi[k] = map[int]objectstore.ObjectInfo{}
			}
			multi[k][f.part] = f.info
		}
	}
	for k, parts := range multi {
		if len(parts) != k.parts {
			continue // incomplete set: a writer died half-way, ignore it
		}
		ref := &checkpointRef{version: k.version, kind: kindMultiPart}
		for i := 1; i <= k.parts; i++ {
			ref.files = append(ref.files, parts[i])
		}
		idx.checkpoints = append(idx.checkpoints, ref)
	}
	sort.Slice(idx.commits, func(i, j int) bool { return idx.commits[i].version < idx.commits[j].version })
	// Newest first; at one version prefer classic, then multi-part, then V2.
	sort.SliceStable(idx.checkpoints, func(i, j int) bool {
		a, b := idx.checkpoints[i], idx.checkpoints[j]
		if a.version != b.version {
			return a.version > b.version
		}
		return a.kind < b.kind
	})
	return idx
}

// prefer moves the UUID-named checkpoint the _last_checkpoint hint names ahead of the
// other checkpoints of its version.
func (idx *logIndex) prefer(hint *lastCheckpoint) {
	if hint == nil || hint.V2Checkpoint == nil {
		return
	}
	for i, cp := range idx.checkpoints {
		if hint.about(cp) {
			j := i
			for j > 0 && idx.checkpoints[j-1].version == cp.version {
				j--
			}
			copy(idx.checkpoints[j+1:i+1], idx.checkpoints[j:i])
			idx.checkpoints[j] = cp
			return
		}
	}
}

// latestVersion is the newest version the listing shows (commit or checkpoint), or -1.
func (idx *logIndex) latestVersion() int64 {
	v := int64(-1)
	if n := len(idx.commits); n > 0 {
		v = idx.commits[n-1].version
	}
	if len(idx.checkpoints) > 0 && idx.checkpoints[0].version > v {
		v = idx.checkpoints[0].version
	}
	return v
}

// errNoLog marks a table root without any log file.
var errNoLog = errors.New("no _delta_log found (not a Delta table)")

// segment builds the log segment of version target (-1 = latest), skipping the
// checkpoints in bad (ones that failed to load). full says whether the listing started at
// version 0; when it did not, failures that an older checkpoint might fix are reported as
// errNeedFullListing.
func (idx *logIndex) segment(target int64, bad map[*checkpointRef]bool, full bool) (*logSegment, error) {
	latest := idx.latestVersion()
	if latest < 0 {
		return nil, errNoLog
	}
	if target < 0 {
		target = latest
	}
	if target > latest {
		return nil, fmt.Errorf("version %d does not exist: the latest version is %d", target, latest)
	}
	seg := &logSegment{version: target}
	for _, cp := range idx.checkpoints {
		if cp.version <= target && !bad[cp] {
			seg.checkpoint = cp
			break
		}
	}
	start := int64(0)
	if seg.checkpoint != nil {
		start = seg.checkpoint.version + 1
	} else {
		if !full {
			return nil, errNeedFullListing
		}
		if len(idx.commits) == 0 || idx.commits[0].version > 0 {
			if e := idx.earliestVersion(); e >= 0 {
				return nil, fmt.Errorf("%w: version %d is not reconstructable: the earliest available version is %d (older log files were cleaned up)", ErrVersionCleaned, target, e)
			}
			return nil, fmt.Errorf("version %d is not reconstructable: the log has no checkpoint and starts at version %d, not 0", target, idx.commits[0].version)
		}
	}
	// The commits start..target must all be there.
	i := sort.Search(len(idx.commits), func(i int) bool { return idx.commits[i].version >= start })
	next := start
	for ; i < len(idx.commits) && idx.commits[i].version <= target; i++ {
		c := idx.commits[i]
		if c.version != next {
			return nil, fmt.Errorf("the log is missing version %d (the next commit found is version %d): versions must be contiguous", next, c.version)
		}
		seg.commits = append(seg.commits, c)
		next++
	}
	if next <= target {
		return nil, fmt.Errorf("the log is missing version %d", next)
	}
	j := sort.Search(len(idx.commits), func(i int) bool { return idx.commits[i].version >= target })
	if j < len(idx.commits) && idx.commits[j].version == target {
		vf := idx.commits[j]
		seg.versionFile = &vf
	}
	return seg, nil
}

// earliestVersion is the oldest version a snapshot can be built for: the oldest
// checkpoint, or 0 when the log starts at 0.
func (idx *logIndex) earliestVersion() int64 {
	if len(idx.commits) > 0 && idx.commits[0].version == 0 {
		return 0
	}
	e := int64(-1)
	for _, cp := range idx.checkpoints {
		if e < 0 || cp.version < e {
			e = cp.version
		}
	}
	return e
}

// errNeedFullListing says a partial listing was not enough to build a segment.
var errNeedFullListing = errors.New("need full log listing")
