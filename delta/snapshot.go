package delta

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// fileKey identifies a logical file in log replay: its path and deletion vector id.
type fileKey struct {
	path string
	dv   string
}

// tableState is the reconciled state of a table at one version.
type tableState struct {
	protocol   *Protocol
	metadata   *Metadata
	files      map[fileKey]*Add
	tombstones map[fileKey]*Remove
	txns       map[string]*Txn
	domains    map[string]*DomainMetadata

	// base, when tracked, is a list of adds sorted by (path, DV id) that were live at an
	// earlier point (a checkpoint, an earlier snapshot's Files), and added the keys of
	// the adds applied since: the sorted live files are then base's still-live entries
	// merged with the added ones, in linear time instead of a sort of every file.
	base    []*Add
	added   []fileKey
	tracked bool
	// removed says whether a file was removed since the base was set.
	removed bool
}

func newTableState() *tableState {
	return &tableState{
		files:      map[fileKey]*Add{},
		tombstones: map[fileKey]*Remove{},
		txns:       map[string]*Txn{},
		domains:    map[string]*DomainMetadata{},
	}
}

// clone copies the maps (not the actions, which are never modified).
func (s *tableState) clone() *tableState {
	c := &tableState{
		protocol:   s.protocol,
		metadata:   s.metadata,
		files:      make(map[fileKey]*Add, len(s.files)),
		tombstones: make(map[fileKey]*Remove, len(s.tombstones)),
		txns:       make(map[string]*Txn, len(s.txns)),
		domains:    make(map[string]*DomainMetadata, len(s.domains)),
		base:       s.base,
		added:      append([]fileKey(nil), s.added...),
		tracked:    s.tracked,
		removed:    s.removed,
	}
	for k, v := range s.files {
		c.files[k] = v
	}
	for k, v := range s.tombstones {
		c.tombstones[k] = v
	}
	for k, v := range s.txns {
		c.txns[k] = v
	}
	for k, v := range s.domains {
		c.domains[k] = v
	}
	return c
}

// apply reconciles one action into the state (PROTOCOL.md, Action Reconciliation).
func (s *tableState) apply(a *Action) {
	switch {
	case a.Add != nil:
		k := fileKey{a.Add.Path, a.Add.DeletionVector.UniqueID()}
		s.files[k] = a.Add
		delete(s.tombstones, k)
		if s.tracked {
			s.added = append(s.added, k)
		}
	case a.Remove != nil:
		k := fileKey{a.Remove.Path, a.Remove.DeletionVector.UniqueID()}
		delete(s.files, k)
		s.removed = true
		s.tombstones[k] = a.Remove
	case a.MetaData != nil:
		s.metadata = a.MetaData
	case a.Protocol != nil:
		s.protocol = a.Protocol
	case a.Txn != nil:
		s.txns[a.Txn.AppID] = a.Txn
	case a.DomainMetadata != nil:
		if a.DomainMetadata.Removed {
			delete(s.domains, a.DomainMetadata.Domain)
		} else {
			s.domains[a.DomainMetadata.Domain] = a.DomainMetadata
		}
	}
}

// Snapshot is the immutable state of a table at one version.
type Snapshot struct {
	table   *Table
	version int64
	state   *tableState
	schema  *StructType
	// files are the live adds sorted by path, then DV id, computed on first use
	// (filesOnce) so that snapshots made after each commit cost no sort.
	files     []*Add
	filesOnce sync.Once
	ts        time.Time // commit timestamp of version
	// checkpointVersion is the version of the checkpoint the snapshot was loaded from,
	// or -1.
	checkpointVersion int64
}

// Table returns the table the snapshot belongs to.
func (s *Snapshot) Table() *Table { return s.table }

// Version returns the snapshot's table version.
func (s *Snapshot) Version() int64 { return s.version }

// Protocol returns the table's protocol action.
func (s *Snapshot) Protocol() *Protocol { return s.state.protocol }

// Metadata returns the table's metaData action.
func (s *Snapshot) Metadata() *Metadata { return s.state.metadata }

// Schema returns the parsed table schema.
func (s *Snapshot) Schema() *StructType { return s.schema }

// PartitionColumns returns the partition column names in order.
func (s *Snapshot) PartitionColumns() []string { return s.state.metadata.PartitionColumns }

// Properties returns a copy of the table configuration (metaData.configuration).
func (s *Snapshot) Properties() map[string]string {
	out := make(map[string]string, len(s.state.metadata.Configuration))
	for k, v := range s.state.metadata.Configuration {
		out[k] = v
	}
	return out
}

// Files returns the live add actions, sorted by path (then deletion vector id). The slice
// is shared: do not modify it or the actions.
func (s *Snapshot) Files() []*Add {
	s.filesOnce.Do(func() {
		if s.files == nil {
			s.files = s.state.sortedFiles()
		}
	})
	return s.files
}

// setBase makes sorted (adds sorted by key, each live in the state) the base of the
// state's sorted files, with nothing added since.
func (s *tableState) setBase(sorted []*Add) {
	s.base, s.added, s.tracked, s.removed = sorted, nil, true, false
}

// sortedFiles returns the live adds sorted by (path, DV id): from the base and the adds
// applied since when tracked, else by sorting them all.
func (s *tableState) sortedFiles() []*Add {
	if !s.tracked {
		return sortAdds(s.files)
	}
	if len(s.added) == 0 && !s.removed {
		return s.base // nothing applied since: the base is the live set
	}
	out := make([]*Add, 0, len(s.files))
	var extra []*Add
	if len(s.added) > 0 {
		keys := slices.Clone(s.added)
		slices.SortFunc(keys, compareFileKeys)
		keys = slices.Compact(keys)
		for _, k := range keys {
			if a, ok := s.files[k]; ok {
				extra = append(extra, a)
			}
		}
	}
	// A base entry stays when it is still the live add of its key; an add applied since
	// for the same key is in extra instead.
	j := 0
	for _, a := range s.base {
		k := fileKey{a.Path, a.DeletionVector.UniqueID()}
		if s.files[k] != a {
			continue
		}
		for j < len(extra) && compareFileKeys(addKey(extra[j]), k) < 0 {
			out = append(out, extra[j])
			j++
		}
		if j < len(extra) && extra[j] == a {
			j++ // re-applied unchanged: once
		}
		out = append(out, a)
	}
	out = append(out, extra[j:]...)
	return out
}

func addKey(a *Add) fileKey { return fileKey{a.Path, a.DeletionVector.UniqueID()} }

func compareFileKeys(a, b fileKey) int {
	if c := strings.Compare(a.path, b.path); c != 0 {
		return c
	}
	return strings.Compare(a.dv, b.dv)
}

// sortedByKey says whether adds are in strictly increasing key order.
func sortedByKey(adds []*Add) bool {
	for i := 1; i < len(adds); i++ {
		if compareFileKeys(addKey(adds[i-1]), addKey(adds[i])) >= 0 {
			return false
		}
	}
	return true
}

// NumRecords sums stats.numRecords over the live files; ok is false when a file has no
// numRecords statistic.
func (s *Snapshot) NumRecords() (n int64, ok bool) {
	for _, a := range s.Files() {
		r, has := numRecordsFromStats(a.Stats)
		if !has {
			return n, false
		}
		n += r
	}
	return n, true
}

// Tombstones returns the remove actions still kept in the state, sorted by path.
func (s *Snapshot) Tombstones() []*Remove {
	out := make([]*Remove, 0, len(s.state.tombstones))
	for _, r := range s.state.tombstones {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].DeletionVector.UniqueID() < out[j].DeletionVector.UniqueID()
	})
	return out
}

// TxnVersion returns the last version committed by the idempotent writer appID (txn
// action); ok is false when appID never committed.
func (s *Snapshot) TxnVersion(appID string) (int64, bool) {
	if t, ok := s.state.txns[appID]; ok {
		return t.Version, true
	}
	return 0, false
}

// DomainMetadata returns the configuration of a metadata domain, if present.
func (s *Snapshot) DomainMetadata(domain string) (string, bool) {
	if d, ok := s.state.domains[domain]; ok {
		return d.Configuration, true
	}
	return "", false
}

// Timestamp returns the commit timestamp of the snapshot's version: the in-commit
// timestamp when the table has them enabled at that version, else the modification time of
// the commit file (as listed; not monotonised against earlier versions).
func (s *Snapshot) Timestamp() time.Time { return s.ts }

// CheckpointVersion returns the version of the checkpoint the snapshot was loaded from,
// or -1 when it was replayed from version 0.
func (s *Snapshot) CheckpointVersion() int64 { return s.checkpointVersion }

func sortAdds(files map[fileKey]*Add) []*Add {
	keys := make([]fileKey, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].path != keys[j].path {
			return keys[i].path < keys[j].path
		}
		return keys[i].dv < keys[j].dv
	})
	out := make([]*Add, len(keys))
	for i, k := range keys {
		out[i] = files[k]
	}
	return out
}
