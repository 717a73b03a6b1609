package delta

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// IsolationLevel is the isolation a transaction asks for (delta.isolationLevel).
type IsolationLevel string

// The isolation levels. Serializable is the default and what OSS Delta and delta-rs use.
const (
	Serializable      IsolationLevel = "Serializable"
	WriteSerializable IsolationLevel = "WriteSerializable"
)

// DefaultMaxCommitAttempts bounds how often a commit is retried after losing the race for
// a version to commits that do not conflict with it. delta-rs allows 15; Spark practically
// unlimited. 100 keeps a busy table (many concurrent appenders) from failing appends.
const DefaultMaxCommitAttempts = 100

// TxOptions describe a transaction's commitInfo and conflict behaviour.
type TxOptions struct {
	// Operation is commitInfo.operation: "WRITE", "DELETE", "MERGE", "CREATE TABLE", ...
	Operation string
	// OperationParameters go into commitInfo as given (Spark uses JSON-encoded strings).
	OperationParameters map[string]any
	// OperationMetrics are written as decimal strings, as Spark does.
	OperationMetrics map[string]int64
	// Lineage is recorded under commitInfo.orchestrator.
	Lineage *Lineage
	// UserMetadata is commitInfo.userMetadata.
	UserMetadata string
	// IsolationLevel defaults to the table's delta.isolationLevel, else Serializable.
	IsolationLevel IsolationLevel
	// MaxAttempts bounds commit retries; default DefaultMaxCommitAttempts.
	MaxAttempts int
}

// PartitionPredicate tells whether a file, by its partition values, is in what a
// transaction read. nil values are nulls.
type PartitionPredicate func(partitionValues map[string]*string) bool

// Transaction collects the actions of one commit made on top of a snapshot. It is used
// by one goroutine. Commit writes it with optimistic concurrency control.
type Transaction struct {
	table       *Table
	snap        *Snapshot // nil when creating the table
	readVersion int64     // snap.Version(), or -1
	opts        TxOptions
	isolation   IsolationLevel

	proto   *Protocol
	md      *Metadata
	txns    map[string]*Txn
	domains map[string]bool
	actions []Action // adds, removes, cdc, domain metadata, in order

	removed        map[string]bool
	readWhole      bool
	readFiles      map[string]bool
	readPredicates []PartitionPredicate

	ident *identityState // identity values this transaction allocated (identity.go)

	committed bool
	version   int64
	commitTS  int64 // commitInfo.timestamp of the last attempt, ms
	// prevTS is the commit timestamp of the version before the one being attempted (its
	// in-commit timestamp, else its time), which an in-commit timestamp must exceed.
	prevTS int64
	// rowHWM is the row id high-water mark the next attempt starts from (row tracking:
	// the snapshot's, raised by concurrent commits); rowErr a failure to read it.
	rowHWM int64
	rowErr error
	// built are the actions of the last attempt after tx.actions (with row ids, the
	// high-water mark's domain), which the committed snapshot applies.
	built []Action
	// sysDomains are system-controlled domains this package writes (a new clustered
	// table's delta.clustering); users' actions may not carry such domains.
	sysDomains    []*DomainMetadata
	checkpointErr error
	// rowIDsCarried says the rows the transaction's files copy carry their row ids in
	// materialized columns (a DELETE or UPDATE on a row-tracking table).
	rowIDsCarried bool
}

// NewTransaction starts a transaction on snap (nil only for table creation, see Create).
func (t *Table) NewTransaction(snap *Snapshot, opts TxOptions) *Transaction {
	tx := &Transaction{
		table:       t,
		snap:        snap,
		readVersion: -1,
		opts:        opts,
		isolation:   opts.IsolationLevel,
		txns:        map[string]*Txn{},
		domains:     map[string]bool{},
		removed:     map[string]bool{},
		readFiles:   map[string]bool{},
		version:     -1,
	}
	tx.rowHWM = -1
	if snap != nil {
		tx.readVersion = snap.version
		tx.prevTS = snap.ts.UnixMilli()
		tx.rowHWM, tx.rowErr = snap.RowIDHighWaterMark()
	}
	if tx.isolation == "" && snap != nil {
		// The table's delta.isolationLevel, when it names a level we implement.
		if l := IsolationLevel(snap.Metadata().Configuration[PropIsolationLevel]); l == Serializable || l == WriteSerializable {
			tx.isolation = l
		}
	}
	if tx.isolation == "" {
		tx.isolation = Serializable
	}
	if tx.opts.MaxAttempts <= 0 {
		tx.opts.MaxAttempts = DefaultMaxCommitAttempts
	}
	return tx
}

// Snapshot returns the snapshot the transaction reads (nil for a create).
func (tx *Transaction) Snapshot() *Snapshot { return tx.snap }

// AddFiles adds data files (add actions). PartitionValues must name every partition column.
func (tx *Transaction) AddFiles(adds ...*Add) {
	for _, a := range adds {
		if a.PartitionValues == nil {
			a.PartitionValues = map[string]*string{}
		}
		tx.actions = append(tx.actions, Action{Add: a})
	}
}

// RemoveFiles removes data files. The extended fields (extendedFileMetadata, size,
// partitionValues) are filled from the snapshot when missing, and deletionTimestamp from
// the table clock. Removing a file counts as reading it for conflict detection.
func (tx *Transaction) RemoveFiles(removes ...*Remove) {
	now := tx.table.opts.Now().UnixMilli()
	for _, r := range removes {
		if r.DeletionTimestamp == nil {
			ts := now
			r.DeletionTimestamp = &ts
		}
		if tx.snap != nil && (r.Size == nil || r.PartitionValues == nil) {
			if a, ok := tx.snap.state.files[fileKey{r.Path, r.DeletionVector.UniqueID()}]; ok {
				if r.Size == nil {
					sz := a.Size
					r.Size = &sz
				}
				if r.PartitionValues == nil {
					r.PartitionValues = a.PartitionValues
				}
				if r.Stats == "" {
					r.Stats = a.Stats
				}
				if r.Tags == nil {
					r.Tags = a.Tags
				}
			}
		}
		if tx.snap != nil && r.BaseRowID == nil && r.DefaultRowCommitVersion == nil {
			// Row tracking: a remove carries the row ids of the add it deletes.
			if a, ok := tx.snap.state.files[fileKey{r.Path, r.DeletionVector.UniqueID()}]; ok {
				r.BaseRowID, r.DefaultRowCommitVersion = a.BaseRowID, a.DefaultRowCommitVersion
			}
		}
		if r.PartitionValues == nil {
			r.PartitionValues = map[string]*string{}
		}
		r.ExtendedFileMetadata = true
		tx.removed[r.Path] = true
		tx.readFiles[r.Path] = true
		tx.actions = append(tx.actions, Action{Remove: r})
	}
}

// RemoveAdds removes live files given as their add actions, with dataChange=true.
func (tx *Transaction) RemoveAdds(adds ...*Add) {
	rs := make([]*Remove, len(adds))
	for i, a := range adds {
		sz := a.Size
		rs[i] = &Remove{Path: a.Path, DataChange: true, PartitionValues: a.PartitionValues, Size: &sz, Stats: a.Stats, Tags: a.Tags, DeletionVector: a.DeletionVector,
			BaseRowID: a.BaseRowID, DefaultRowCommitVersion: a.DefaultRowCommitVersion}
	}
	tx.RemoveFiles(rs...)
}

// AddCDC adds change data files (cdc actions).
func (tx *Transaction) AddCDC(cdcs ...*CDC) {
	for _, c := range cdcs {
		if c.PartitionValues == nil {
			c.PartitionValues = map[string]*string{}
		}
		tx.actions = append(tx.actions, Action{CDC: c})
	}
}

// SetTxn records that the idempotent writer appID has committed version (txn action).
// Concurrent commits with the same appID conflict.
func (tx *Transaction) SetTxn(appID string, version int64) {
	ts := tx.table.opts.Now().UnixMilli()
	tx.txns[appID] = &Txn{AppID: appID, Version: version, LastUpdated: &ts}
}

// UpdateMetadata replaces the table's metaData in this commit.
func (tx *Transaction) UpdateMetadata(md *Metadata) { tx.md = md }

// UpdateProtocol replaces the table's protocol in this commit.
func (tx *Transaction) UpdateProtocol(p *Protocol) { tx.proto = p }

// AddActions adds actions of any kind; commitInfo actions are ignored (Commit writes its
// own).
func (tx *Transaction) AddActions(actions ...Action) {
	for _, a := range actions {
		switch {
		case a.Add != nil:
			tx.AddFiles(a.Add)
		case a.Remove != nil:
			tx.RemoveFiles(a.Remove)
		case a.CDC != nil:
			tx.AddCDC(a.CDC)
		case a.Txn != nil:
			tx.txns[a.Txn.AppID] = a.Txn
		case a.MetaData != nil:
			tx.md = a.MetaData
		case a.Protocol != nil:
			tx.proto = a.Protocol
		case a.DomainMetadata != nil:
			tx.domains[a.DomainMetadata.Domain] = true
			tx.actions = append(tx.actions, a)
		}
	}
}

// setSystemDomain writes a system-controlled metadata domain in the commit; a concurrent
// commit of the same domain conflicts.
func (tx *Transaction) setSystemDomain(d *DomainMetadata) {
	tx.sysDomains = append(tx.sysDomains, d)
	tx.domains[d.Domain] = true
}

// SetOperationMetrics sets the commit's operationMetrics (for a transaction whose
// figures are known only after it was made, e.g. once its files are written).
func (tx *Transaction) SetOperationMetrics(m map[string]int64) { tx.opts.OperationMetrics = m }

// ReadWholeTable declares that the transaction depends on the whole table (an overwrite, a
// DELETE without partition filter): any concurrent add or remove conflicts.
func (tx *Transaction) ReadWholeTable() { tx.readWhole = true }

// ReadFiles declares that the transaction read these files (add paths): a concurrent
// remove of one conflicts.
func (tx *Transaction) ReadFiles(paths ...string) {
	for _, p := range paths {
		tx.readFiles[p] = true
	}
}

// ReadPartitions declares that the transaction read the partitions pred accepts: a
// concurrent add or remove of a file there conflicts.
func (tx *Transaction) ReadPartitions(pred PartitionPredicate) {
	tx.readPredicates = append(tx.readPredicates, pred)
}

// PartitionEquals is a PartitionPredicate accepting files whose partition values equal
// values on every listed column (nil matches null).
func PartitionEquals(values map[string]*string) PartitionPredicate {
	return func(pv map[string]*string) bool {
		for k, want := range values {
			got, ok := pv[k]
			if !ok {
				return false
			}
			if (got == nil) != (want == nil) || (got != nil && *got != *want) {
				return false
			}
		}
		return true
	}
}

// Version returns the committed version, or -1 before a successful Commit.
func (tx *Transaction) Version() int64 { return tx.version }

// CheckpointError returns the error of the checkpoint written after the commit, if that
// failed. The commit itself stands; the next checkpoint will cover it.
func (tx *Transaction) CheckpointError() error { return tx.checkpointErr }

func (tx *Transaction) dependsOnFiles() bool {
	return tx.readWhole || len(tx.readFiles) > 0 || len(tx.readPredicates) > 0
}

// ictOn says whether the commit writes an in-commit timestamp: the table's metadata after
// the commit enables them (DELTA.md §6).
func (tx *Transaction) ictOn() bool {
	md := tx.md
	if md == nil && tx.snap != nil {
		md = tx.snap.Metadata()
	}
	return md != nil && strings.EqualFold(md.Configuration[PropEnableInCommitTimestamps], "true")
}

// isBlindAppend: only adds (no removes, no cdc files) and nothing read.
func (tx *Transaction) isBlindAppend() bool {
	if tx.dependsOnFiles() {
		return false
	}
	for i := range tx.actions {
		if tx.actions[i].Remove != nil || tx.actions[i].CDC != nil {
			return false
		}
	}
	return true
}

// changesData says whether any action changes data (dataChange=true) or the metadata.
func (tx *Transaction) changesData() bool {
	if tx.md != nil || tx.proto != nil {
		return true
	}
	for i := range tx.actions {
		a := &tx.actions[i]
		if (a.Add != nil && a.Add.DataChange) || (a.Remove != nil && a.Remove.DataChange) || a.CDC != nil {
			return true
		}
	}
	return false
}

// validate runs the writer gate and the per-commit rules before anything is written.
func (tx *Transaction) validate() error {
	proto, md := tx.proto, tx.md
	if tx.snap != nil {
		if err := checkWrite(tx.snap.Protocol(), tx.snap.Metadata()); err != nil {
			return err
		}
		if proto == nil {
			proto = tx.snap.Protocol()
		}
		if md == nil {
			md = tx.snap.Metadata()
		}
	}
	if proto == nil || md == nil {
		return errors.New("a new table needs a protocol and a metaData action")
	}
	if err := checkWrite(proto, md); err != nil {
		return err
	}
	schema, err := md.Schema()
	if err != nil {
		return err
	}
	if tx.md != nil || tx.proto != nil {
		if err := checkSchemaFeatures(proto, md, schema); err != nil {
			return err
		}
	}
	appendOnly := strings.EqualFold(md.Configuration[PropAppendOnly], "true")
	if tx.snap != nil && tx.snap.AppendOnly() {
		appendOnly = true
	}
	var clustering []string
	if tx.snap != nil && proto.HasWriterFeature(FeatureClustering) {
		if clustering, err = tx.snap.ClusteringColumns(); err != nil {
			return err
		}
	}
	for i := range tx.actions {
		a := &tx.actions[i]
		switch {
		case a.Add != nil:
			if a.Add.Path == "" {
				return errors.New("add action without a path")
			}
			for _, c := range md.PartitionColumns {
				key := c
				if f := schema.Field(c); f != nil {
					key = physicalName(f) // column mapping: partitionValues name it physically
				}
				if _, ok := a.Add.PartitionValues[key]; !ok {
					return fmt.Errorf("add %s: partitionValues lacks partition column %q", a.Add.Path, c)
				}
			}
			if a.Add.DataChange {
				if err := checkClusteringStats(a.Add, clustering); err != nil {
					return err
				}
			}
		case a.Remove != nil:
			if appendOnly && a.Remove.DataChange {
				return fmt.Errorf("table is append-only (delta.appendOnly=true): cannot remove %s", a.Remove.Path)
			}
		case a.CDC != nil:
			if !strings.EqualFold(md.Configuration[PropEnableChangeDataFeed], "true") {
				return fmt.Errorf("cdc file %s: the table does not enable the change data feed (%s)", a.CDC.Path, PropEnableChangeDataFeed)
			}
		case a.DomainMetadata != nil:
			// Domains are kept as they are; this package writes none of its own yet.
			return &UnsupportedFeatureError{Feature: FeatureDomainMetadata + " (writing a domain)", Write: true}
		}
	}
	_ = schema
	return nil
}

// buildCommit encodes commitInfo first, then protocol, metaData, txns and the other
// actions. On a table with in-commit timestamps enabled, commitInfo carries
// inCommitTimestamp = max(now, previous commit's + 1 ms), and the commit that turns them
// on for a table with earlier commits records its version and timestamp in the
// metadata (PROTOCOL.md, In-Commit Timestamps).
func (tx *Transaction) buildCommit(readVersion int64) ([]byte, error) {
	blind := tx.isBlindAppend()
	tx.commitTS = tx.table.opts.Now().UnixMilli()
	var ict *int64
	if tx.ictOn() {
		ts := max(tx.commitTS, tx.prevTS+1)
		tx.commitTS, ict = ts, &ts
		if tx.snap != nil && !ictEnabledAt(tx.snap.Metadata(), tx.snap.version) && tx.md != nil {
			md := *tx.md
			md.Configuration = make(map[string]string, len(tx.md.Configuration)+2)
			for k, v := range tx.md.Configuration {
				md.Configuration[k] = v
			}
			md.Configuration[PropICTEnablementVersion] = strconv.FormatInt(readVersion+1, 10)
			md.Configuration[PropICTEnablementTimestamp] = strconv.FormatInt(ts, 10)
			tx.md = &md
		}
	}
	info := &CommitInfo{
		InCommitTimestamp:   ict,
		Timestamp:           tx.commitTS,
		UserName:            tx.table.opts.UserName,
		Operation:           tx.opts.Operation,
		OperationParameters: tx.opts.OperationParameters,
		IsolationLevel:      string(tx.isolation),
		IsBlindAppend:       &blind,
		UserMetadata:        tx.opts.UserMetadata,
		EngineInfo:          tx.table.opts.EngineInfo,
		TxnID:               uuid.NewString(),
		Orchestrator:        tx.opts.Lineage,
	}
	if info.Operation == "" {
		info.Operation = "WRITE"
	}
	if info.OperationParameters == nil {
		info.OperationParameters = map[string]any{}
	}
	info.OperationMetrics = make(map[string]any, len(tx.opts.OperationMetrics))
	for k, v := range tx.opts.OperationMetrics {
		info.OperationMetrics[k] = strconv.FormatInt(v, 10)
	}
	if readVersion >= 0 {
		rv := readVersion
		info.ReadVersion = &rv
	}
	tx.built = tx.actions
	proto, md := tx.proto, tx.md
	if tx.snap != nil {
		proto, md = cmp.Or(proto, tx.snap.Protocol()), cmp.Or(md, tx.snap.Metadata())
	}
	if rowTrackingOn(proto, md) {
		if tx.rowErr != nil {
			return nil, tx.rowErr
		}
		built, dm, preserved, err := tx.assignRowIDs(readVersion+1, tx.rowHWM)
		if err != nil {
			return nil, err
		}
		if dm != nil {
			built = append(built, Action{DomainMetadata: dm})
		}
		tx.built = built
		if strings.EqualFold(md.Configuration[PropEnableRowTracking], "true") {
			info.Tags = map[string]string{commitTagRowTrackingPreserved: strconv.FormatBool(preserved)}
		}
	}
	tx.built = tx.table.canonicalCopies(tx.built)
	acts := make([]Action, 0, len(tx.built)+3+len(tx.txns))
	acts = append(acts, Action{CommitInfo: info})
	if tx.proto != nil {
		acts = append(acts, Action{Protocol: tx.proto})
	}
	if tx.md != nil {
		acts = append(acts, Action{MetaData: tx.md})
	}
	for _, id := range sortedTxnIDs(tx.txns) {
		acts = append(acts, Action{Txn: tx.txns[id]})
	}
	acts = append(acts, tx.built...)
	for _, d := range tx.sysDomains {
		acts = append(acts, Action{DomainMetadata: d})
	}
	return EncodeActions(acts)
}

func sortedTxnIDs(m map[string]*Txn) []string {
	set := make(map[string]bool, len(m))
	for k := range m {
		set[k] = true
	}
	return sortedKeys(set)
}

// Commit writes the transaction as the next version with put-if-absent. When another
// writer took that version first, Commit reads the winning commits and checks them
// against what this transaction read and wrote (DELTA.md §9): on a logical conflict it
// returns a *ConflictError, otherwise it retries at the next free version. After a
// successful commit whose version is a multiple of the checkpoint interval it writes a
// checkpoint and _last_checkpoint; a failure there is logged and kept in
// CheckpointError, never returned.
func (tx *Transaction) Commit(ctx context.Context) (int64, error) {
	if tx.committed {
		return -1, errors.New("commit: transaction already committed")
	}
	if err := tx.validate(); err != nil {
		return -1, fmt.Errorf("commit to table %s: %w", tx.table.displayRoot(), err)
	}
	t := tx.table
	version := tx.readVersion + 1
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return -1, err
		}
		body, err := tx.buildCommit(version - 1)
		if err != nil {
			return -1, fmt.Errorf("commit to table %s: %w", t.displayRoot(), err)
		}
		err = t.store.PutIfAbsent(ctx, t.commitKey(version), bytes.NewReader(body), int64(len(body)))
		if err == nil {
			break
		}
		if !errors.Is(err, objectstore.ErrExist) {
			return -1, fmt.Errorf("commit to table %s: write version %d: %w", t.displayRoot(), version, err)
		}
		if tx.snap == nil {
			return -1, fmt.Errorf("commit to table %s: version 0: %w", t.displayRoot(), err)
		}
		// Lost the race: check every winner from version on.
		for {
			acts, err := t.readCommit(ctx, version)
			if errors.Is(err, objectstore.ErrNotExist) {
				break
			}
			if err != nil {
				return -1, fmt.Errorf("commit to table %s: %w", t.displayRoot(), err)
			}
			if c := tx.checkWinner(version, acts); c != nil {
				return -1, c
			}
			for i := range acts {
				if d := acts[i].DomainMetadata; d != nil && d.Domain == rowTrackingDomain && !d.Removed {
					if hwm, err := parseRowIDHighWaterMark(d.Configuration); err == nil && hwm > tx.rowHWM {
						tx.rowHWM = hwm // a concurrent commit assigned row ids: ours follow
					}
				}
			}
			if ci := findCommitInfo(acts); ci != nil {
				switch {
				case ci.InCommitTimestamp != nil:
					tx.prevTS = *ci.InCommitTimestamp
				case ci.Timestamp > tx.prevTS:
					tx.prevTS = ci.Timestamp
				}
			}
			version++
		}
		if attempt >= tx.opts.MaxAttempts {
			return -1, &ConflictError{Kind: ConflictTooManyAttempts, ReadVersion: tx.readVersion, WinningVersion: version - 1,
				Detail: fmt.Sprintf("gave up after %d attempts", attempt)}
		}
	}
	tx.committed = true
	tx.version = version
	tx.afterCommit(ctx, version)
	return version, nil
}

// afterCommit remembers the new snapshot when it is cheap to build (its Timestamp is the
// commitInfo timestamp, the closest known value to the file's mtime), and writes a
// checkpoint when the version calls for one.
func (tx *Transaction) afterCommit(ctx context.Context, version int64) {
	t := tx.table
	var post *Snapshot
	if tx.snap != nil && version == tx.readVersion+1 {
		st := tx.snap.state.clone()
		st.setBase(tx.snap.Files())
		if tx.proto != nil {
			st.protocol = tx.proto
		}
		if tx.md != nil {
			st.metadata = tx.md
		}
		for _, x := range tx.txns {
			st.txns[x.AppID] = x
		}
		for i := range tx.built {
			st.apply(&tx.built[i])
		}
		for _, d := range tx.sysDomains {
			st.apply(&Action{DomainMetadata: d})
		}
		schema, err := tableSchema(st.metadata)
		if err == nil {
			post = &Snapshot{table: t, version: version, state: st, schema: schema,
				checkpointVersion: tx.snap.checkpointVersion, ts: time.UnixMilli(tx.commitTS)}
			t.remember(post)
		}
	}
	md := tx.md
	if md == nil && tx.snap != nil {
		md = tx.snap.Metadata()
	}
	interval := int64(DefaultCheckpointInterval)
	if md != nil {
		interval = (&Snapshot{state: &tableState{metadata: md}}).CheckpointInterval()
	}
	if version == 0 || version%interval != 0 {
		return
	}
	if post == nil {
		s, err := t.SnapshotAt(ctx, version)
		if err != nil {
			tx.checkpointErr = err
			t.opts.Logger.Warn("delta: checkpoint skipped", "table", t.displayRoot(), "version", version, "err", err)
			return
		}
		post = s
	}
	if err := t.writeCheckpoint(ctx, post); err != nil {
		tx.checkpointErr = err
		t.opts.Logger.Warn("delta: checkpoint failed (the commit stands)", "table", t.displayRoot(), "version", version, "err", err)
		return
	}
	t.cleanupAfterCheckpoint(ctx, post) // expired log files (cleanup.go)
}

// CommitWithRetry runs build on the latest snapshot and commits the transaction it
// returns; on a *ConflictError it reloads the snapshot and runs build again, up to
// attempts times (default 3 when attempts <= 0). build must derive everything it writes
// from the snapshot it is given (an overwrite removes that snapshot's files), so a retry
// never loses or doubles data; data files written by a failed attempt are left as orphans
// for VACUUM. It returns the committed version, or the last error.
func (t *Table) CommitWithRetry(ctx context.Context, attempts int, build func(snap *Snapshot) (*Transaction, error)) (int64, error) {
	if attempts <= 0 {
		attempts = 3
	}
	var lastErr error
	for i := 0; i < attempts; i++ {
		snap, err := t.Snapshot(ctx)
		if err != nil {
			return -1, err
		}
		tx, err := build(snap)
		if err != nil {
			return -1, err
		}
		v, err := tx.Commit(ctx)
		var ce *ConflictError
		if !errors.As(err, &ce) {
			return v, err
		}
		lastErr = err
	}
	return -1, lastErr
}
