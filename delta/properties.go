package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Table property names and their defaults (Delta table-properties documentation).
const (
	PropEnableChangeDataFeed = "delta.enableChangeDataFeed"
	// PropEnableDeletionVectors makes DELETE, UPDATE and MERGE mark the rows they remove
	// in deletion vectors instead of rewriting the rest of each file.
	PropEnableDeletionVectors      = "delta.enableDeletionVectors"
	PropCheckpointInterval         = "delta.checkpointInterval"
	PropLogRetentionDuration       = "delta.logRetentionDuration"
	PropDeletedFileRetentionDur    = "delta.deletedFileRetentionDuration"
	PropEnableExpiredLogCleanup    = "delta.enableExpiredLogCleanup"
	PropAppendOnly                 = "delta.appendOnly"
	PropCheckpointWriteStatsAsJSON = "delta.checkpoint.writeStatsAsJson"
	PropIsolationLevel             = "delta.isolationLevel"
	PropEnableInCommitTimestamps   = "delta.enableInCommitTimestamps"
	// PropICTEnablementVersion and PropICTEnablementTimestamp record when in-commit
	// timestamps were turned on for a table that had commits before (set by the commit
	// that turns them on; absent when the table was created with them).
	PropICTEnablementVersion   = "delta.inCommitTimestampEnablementVersion"
	PropICTEnablementTimestamp = "delta.inCommitTimestampEnablementTimestamp"
	// PropCheckpointPolicy is "classic" (default) or "v2": V2 spec checkpoints, which
	// need the v2Checkpoint reader-writer feature.
	PropCheckpointPolicy = "delta.checkpointPolicy"
	CheckpointPolicyV2   = "v2"

	DefaultCheckpointInterval   = 10
	DefaultLogRetention         = 30 * 24 * time.Hour
	DefaultDeletedFileRetention = 7 * 24 * time.Hour
)

// Spark session confs of Delta-Spark that a client sets for the statements it sends:
// the txn action a write commits with (appId and version; a repeat of a version at or
// below the table's is skipped), the commitInfo's userMetadata, and the check that
// refuses a VACUUM retention below the table's.
const (
	SparkConfTxnAppID             = "spark.databricks.delta.write.txnAppId"
	SparkConfTxnVersion           = "spark.databricks.delta.write.txnVersion"
	SparkConfUserMetadata         = "spark.databricks.delta.commitInfo.userMetadata"
	SparkConfRetentionDurationChk = "spark.databricks.delta.retentionDurationCheck.enabled"
)

// ChangeDataFeedEnabled says whether delta.enableChangeDataFeed is true.
func (s *Snapshot) ChangeDataFeedEnabled() bool {
	return strings.EqualFold(s.state.metadata.Configuration[PropEnableChangeDataFeed], "true")
}

// DeletionVectorsEnabled says whether DML marks deleted rows in deletion vectors:
// delta.enableDeletionVectors is true and the protocol has the feature.
func (s *Snapshot) DeletionVectorsEnabled() bool {
	return strings.EqualFold(s.state.metadata.Configuration[PropEnableDeletionVectors], "true") &&
		s.state.protocol.HasWriterFeature(FeatureDeletionVectors)
}

// AppendOnly says whether delta.appendOnly is true.
func (s *Snapshot) AppendOnly() bool {
	return strings.EqualFold(s.state.metadata.Configuration[PropAppendOnly], "true")
}

// CheckpointInterval is delta.checkpointInterval, default 10.
func (s *Snapshot) CheckpointInterval() int64 {
	if v, ok := s.state.metadata.Configuration[PropCheckpointInterval]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return DefaultCheckpointInterval
}

// LogRetention is delta.logRetentionDuration, default 30 days.
func (s *Snapshot) LogRetention() time.Duration {
	return durationProp(s.state.metadata.Configuration, PropLogRetentionDuration, DefaultLogRetention)
}

// DeletedFileRetention is delta.deletedFileRetentionDuration, default 1 week.
func (s *Snapshot) DeletedFileRetention() time.Duration {
	return durationProp(s.state.metadata.Configuration, PropDeletedFileRetentionDur, DefaultDeletedFileRetention)
}

// ExpiredLogCleanupEnabled is delta.enableExpiredLogCleanup, default true.
func (s *Snapshot) ExpiredLogCleanupEnabled() bool {
	v, ok := s.state.metadata.Configuration[PropEnableExpiredLogCleanup]
	return !ok || !strings.EqualFold(v, "false")
}

func durationProp(config map[string]string, key string, def time.Duration) time.Duration {
	v, ok := config[key]
	if !ok {
		return def
	}
	d, err := ParseInterval(v)
	if err != nil {
		return def
	}
	return d
}

var intervalUnits = map[string]time.Duration{
	"nanosecond":  time.Nanosecond,
	"microsecond": time.Microsecond,
	"millisecond": time.Millisecond,
	"second":      time.Second,
	"minute":      time.Minute,
	"hour":        time.Hour,
	"day":         24 * time.Hour,
	"week":        7 * 24 * time.Hour,
}

// ParseInterval parses the interval syntax of Delta's duration properties:
// "interval <n> <unit>" with unit one of nanosecond … week, singular or plural, any case
// ("interval 30 days", "interval 1 week"). The "interval" keyword may be omitted.
// Several "<n> <unit>" pairs add up ("interval 1 day 12 hours").
func ParseInterval(s string) (time.Duration, error) {
	fields := strings.Fields(strings.ToLower(s))
	if len(fields) > 0 && fields[0] == "interval" {
		fields = fields[1:]
	}
	if len(fields) == 0 || len(fields)%2 != 0 {
		return 0, fmt.Errorf("interval %q: want \"interval <n> <unit>\"", s)
	}
	var total time.Duration
	for i := 0; i < len(fields); i += 2 {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("interval %q: %q is not a whole number", s, fields[i])
		}
		unit, ok := intervalUnits[strings.TrimSuffix(fields[i+1], "s")]
		if !ok {
			return 0, fmt.Errorf("interval %q: unknown unit %q", s, fields[i+1])
		}
		total += time.Duration(n) * unit
	}
	return total, nil
}

// PropertyMatches says whether a table configuration holds the value want for key, as
// this package reads it: booleans ignoring case, durations by length ("interval 7 days"
// is "interval 1 week"), the checkpoint interval as a number; a key the configuration
// lacks counts as its default. Other keys compare as written.
func PropertyMatches(config map[string]string, key, want string) bool {
	got, ok := config[key]
	if !ok {
		def, known := propertyDefaults[key]
		if !known {
			return false
		}
		got = def
	}
	switch key {
	case PropEnableChangeDataFeed, PropEnableDeletionVectors, PropAppendOnly, PropEnableExpiredLogCleanup,
		PropCheckpointWriteStatsAsJSON, PropEnableInCommitTimestamps, PropCheckpointPolicy:
		return strings.EqualFold(strings.TrimSpace(got), strings.TrimSpace(want))
	case PropLogRetentionDuration, PropDeletedFileRetentionDur, "delta.checkpointRetentionDuration":
		a, errA := ParseInterval(got)
		b, errB := ParseInterval(want)
		if errA == nil && errB == nil {
			return a == b
		}
	case PropCheckpointInterval:
		a, errA := strconv.ParseInt(strings.TrimSpace(got), 10, 64)
		b, errB := strconv.ParseInt(strings.TrimSpace(want), 10, 64)
		if errA == nil && errB == nil {
			return a == b
		}
	}
	return got == want
}

// propertyDefaults are the values of properties a table has when it does not set them.
var propertyDefaults = map[string]string{
	PropEnableChangeDataFeed:            "false",
	PropEnableDeletionVectors:           "false",
	PropAppendOnly:                      "false",
	PropEnableExpiredLogCleanup:         "true",
	PropCheckpointWriteStatsAsJSON:      "true",
	PropEnableInCommitTimestamps:        "false",
	PropCheckpointInterval:              strconv.Itoa(DefaultCheckpointInterval),
	PropLogRetentionDuration:            "interval 30 days",
	PropCheckpointPolicy:                "classic",
	PropDeletedFileRetentionDur:         "interval 1 week",
	"delta.checkpointRetentionDuration": "interval 2 days",
}

// validateProperties checks the delta.* properties this package interprets.
func validateProperties(config map[string]string) error {
	var problems []string
	for k, v := range config {
		switch k {
		case PropCheckpointInterval:
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil || n <= 0 {
				problems = append(problems, fmt.Sprintf("%s=%q: want a positive integer", k, v))
			}
		case PropLogRetentionDuration, PropDeletedFileRetentionDur, "delta.checkpointRetentionDuration":
			if _, err := ParseInterval(v); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", k, err))
			}
		case PropEnableChangeDataFeed, PropEnableDeletionVectors, PropAppendOnly, PropEnableExpiredLogCleanup, PropCheckpointWriteStatsAsJSON:
			if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
				problems = append(problems, fmt.Sprintf("%s=%q: want true or false", k, v))
			}
		case PropEnableInCommitTimestamps:
			if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
				problems = append(problems, fmt.Sprintf("%s=%q: want true or false", k, v))
			}
		case PropEnableRowTracking, PropRowTrackingSuspended:
			if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
				problems = append(problems, fmt.Sprintf("%s=%q: want true or false", k, v))
			}
		case PropMaterializedRowIDColumn, PropMaterializedRowCommitVersionColumn:
			problems = append(problems, fmt.Sprintf("%s: named by the engine that enables row tracking, not by hand", k))
		case PropCheckpointPolicy:
			if !strings.EqualFold(v, "classic") && !strings.EqualFold(v, CheckpointPolicyV2) {
				problems = append(problems, fmt.Sprintf("%s=%q: want classic or v2", k, v))
			}
		case PropICTEnablementVersion, PropICTEnablementTimestamp:
			problems = append(problems, fmt.Sprintf("%s: set by the commit that enables in-commit timestamps, not by hand", k))
		case propColumnMappingMode:
			switch strings.ToLower(v) {
			case "none", "name", "id":
			default:
				problems = append(problems, fmt.Sprintf("%s=%q: want none, name or id", k, v))
			}
		case propColumnMappingMaxID:
			problems = append(problems, fmt.Sprintf("%s: kept by the writer that assigns column ids, not by hand", k))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("invalid table properties: %s", strings.Join(problems, "; "))
	}
	return nil
}

// SetProperties changes table properties: keys in set are added or replaced, keys in
// unset removed. It commits a new metaData with operation "SET TBLPROPERTIES" (or
// "UNSET TBLPROPERTIES" when only unsetting), as ALTER TABLE does, and returns the new
// version. Turning on change data feed, deletion vectors, in-commit timestamps or V2
// checkpoints upgrades the protocol when needed.
func (t *Table) SetProperties(ctx context.Context, set map[string]string, unset []string) (int64, error) {
	if len(set) == 0 && len(unset) == 0 {
		return -1, fmt.Errorf("set properties of table %s: nothing to change", t.displayRoot())
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return -1, fmt.Errorf("set properties of table %s: %w", t.displayRoot(), err)
	}
	md := *snap.Metadata()
	config := make(map[string]string, len(md.Configuration)+len(set))
	for k, v := range md.Configuration {
		config[k] = v
	}
	for _, k := range unset {
		delete(config, k)
	}
	for k, v := range set {
		config[k] = v
	}
	if err := validateProperties(set); err != nil {
		return -1, fmt.Errorf("set properties of table %s: %w", t.displayRoot(), err)
	}
	md.Configuration = config
	op := "SET TBLPROPERTIES"
	params := map[string]any{}
	if len(set) > 0 {
		b, _ := json.Marshal(set)
		params["properties"] = string(b)
	} else {
		op = "UNSET TBLPROPERTIES"
		b, _ := json.Marshal(unset)
		params["propKeys"] = string(b)
		params["ifExists"] = "true"
	}
	tx := t.NewTransaction(snap, TxOptions{Operation: op, OperationParameters: params})
	tx.UpdateMetadata(&md)
	proto := snap.Protocol()
	if strings.EqualFold(config[PropEnableChangeDataFeed], "true") && !proto.HasWriterFeature(FeatureChangeDataFeed) {
		proto = withWriterFeature(proto, FeatureChangeDataFeed)
	}
	if strings.EqualFold(config[PropEnableDeletionVectors], "true") && !proto.HasWriterFeature(FeatureDeletionVectors) {
		proto = withReaderWriterFeature(proto, FeatureDeletionVectors)
	}
	if strings.EqualFold(config[PropEnableInCommitTimestamps], "true") && !proto.HasWriterFeature(FeatureInCommitTimestamp) {
		proto = withWriterFeature(proto, FeatureInCommitTimestamp)
	}
	if strings.EqualFold(config[PropCheckpointPolicy], CheckpointPolicyV2) && !proto.HasWriterFeature(FeatureV2Checkpoint) {
		proto = withReaderWriterFeature(proto, FeatureV2Checkpoint)
	}
	if strings.EqualFold(config[PropEnableRowTracking], "true") && !strings.EqualFold(snap.Metadata().Configuration[PropEnableRowTracking], "true") {
		// Enabling needs every live file to have row ids already: a table that
		// supported row tracking from its creation, or has no file yet.
		for _, a := range snap.Files() {
			if a.BaseRowID == nil || a.DefaultRowCommitVersion == nil {
				return -1, fmt.Errorf("set properties of table %s: %s: file %s has no row ids (row tracking can be turned on for a table created with it, or with no files)", t.displayRoot(), PropEnableRowTracking, a.Path)
			}
		}
		newRowTrackingConfig(config)
		if !proto.HasWriterFeature(FeatureRowTracking) {
			proto = withWriterFeature(withWriterFeature(proto, FeatureDomainMetadata), FeatureRowTracking)
		}
	}
	if mode, ok := set[propColumnMappingMode]; ok {
		was := columnMappingMode(snap.Metadata())
		switch now := strings.ToLower(mode); {
		case now == was:
		case was != "none":
			return -1, fmt.Errorf("set properties of table %s: %s is %s and cannot change to %s", t.displayRoot(), propColumnMappingMode, was, now)
		case now == "name":
			// The columns keep their names as physical names (the files name them so);
			// each gets an id.
			st, err := cloneSchema(snap.Schema())
			if err != nil {
				return -1, err
			}
			maxID := assignColumnMapping(st, maxColumnID(snap.Metadata(), st), true)
			if md.SchemaString, err = st.SchemaString(); err != nil {
				return -1, err
			}
			config[propColumnMappingMaxID] = strconv.FormatInt(maxID, 10)
			proto = withColumnMapping(proto)
		default:
			return -1, fmt.Errorf("set properties of table %s: %s can be turned on for an existing table as name only (id needs the ids in every file)", t.displayRoot(), propColumnMappingMode)
		}
	}
	if proto != snap.Protocol() {
		tx.UpdateProtocol(proto)
	}
	v, err := tx.Commit(ctx)
	if err != nil {
		return -1, fmt.Errorf("set properties of table %s: %w", t.displayRoot(), err)
	}
	return v, nil
}

// withColumnMapping returns a protocol with the columnMapping feature: a legacy reader
// of version 2 implies it; version 3 lists it.
func withColumnMapping(p *Protocol) *Protocol {
	np := withWriterFeature(p, FeatureColumnMapping)
	if np.MinReaderVersion >= 3 {
		if !slices.Contains(np.ReaderFeatures, FeatureColumnMapping) {
			np.ReaderFeatures = append(np.ReaderFeatures, FeatureColumnMapping)
		}
	} else {
		np.MinReaderVersion = 2
	}
	return np
}

// withReaderWriterFeature returns a protocol at (3,7) that also supports a reader-writer
// feature.
func withReaderWriterFeature(p *Protocol, feature string) *Protocol {
	np := withWriterFeature(p, feature)
	np.ReaderFeatures = p.EffectiveReaderFeatures()
	np.MinReaderVersion = 3
	if !slices.Contains(np.ReaderFeatures, feature) {
		np.ReaderFeatures = append(np.ReaderFeatures, feature)
	}
	return np
}

// withWriterFeature returns a protocol that also supports feature, moving a legacy
// protocol to writer 7 with its implied features listed.
func withWriterFeature(p *Protocol, feature string) *Protocol {
	np := &Protocol{MinReaderVersion: p.MinReaderVersion, MinWriterVersion: 7}
	np.WriterFeatures = p.EffectiveWriterFeatures()
	if p.MinReaderVersion >= 3 {
		np.ReaderFeatures = append([]string(nil), p.ReaderFeatures...)
	}
	for _, f := range np.WriterFeatures {
		if f == feature {
			return np
		}
	}
	np.WriterFeatures = append(np.WriterFeatures, feature)
	return np
}
