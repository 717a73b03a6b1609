package delta

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Protocol is the protocol action: the reader and writer versions a table needs and, at
// reader 3 / writer 7, the named table features.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Format names the data file format; always parquet.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action. SchemaString holds the Spark StructType as JSON text;
// Schema() parses it.
type Metadata struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// Schema parses SchemaString. A metaData without one (some hand-made test logs) has an
// empty schema, as Delta-Spark reads it.
func (m *Metadata) Schema() (*StructType, error) {
	if m.SchemaString == "" {
		return &StructType{}, nil
	}
	return ParseSchema(m.SchemaString)
}

// DeletionVector describes the rows of a file that are deleted (deletionVectors feature).
type DeletionVector struct {
	StorageType    string `json:"storageType"`
	PathOrInlineDv string `json:"pathOrInlineDv"`
	Offset         *int32 `json:"offset,omitempty"`
	SizeInBytes    int32  `json:"sizeInBytes"`
	Cardinality    int64  `json:"cardinality"`
}

// UniqueID is the deletion vector's part of a file's identity in log replay.
func (dv *DeletionVector) UniqueID() string {
	if dv == nil {
		return ""
	}
	if dv.Offset != nil {
		return fmt.Sprintf("%s%s@%d", dv.StorageType, dv.PathOrInlineDv, *dv.Offset)
	}
	return dv.StorageType + dv.PathOrInlineDv
}

// Add is the add action: a data file that is part of the table. Path is a URI relative to
// the table root (URL-encoded); PartitionValues maps every partition column to its
// serialized value, nil meaning null.
type Add struct {
	Path                    string             `json:"path"`
	PartitionValues         map[string]*string `json:"partitionValues"`
	Size                    int64              `json:"size"`
	ModificationTime        int64              `json:"modificationTime"`
	DataChange              bool               `json:"dataChange"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          *DeletionVector    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
	// ClusteringProvider names the clustering implementation that clustered the file
	// (clustered tables); kept as found.
	ClusteringProvider string `json:"clusteringProvider,omitempty"`

	// dvChange, set only on the adds a change-feed read plans, makes a scan return the
	// rows one deletion vector deletes and another does not (DeletionVector is ignored).
	dvChange *dvChange
}

// dvChange selects the rows deleted by in and not by notIn (nil: no row deleted).
type dvChange struct{ in, notIn *DeletionVector }

// Remove is the remove action: a logical delete of a data file (a tombstone kept for VACUUM).
// Writers always fill the extended fields so that change data feed readers can read it.
type Remove struct {
	Path                 string             `json:"path"`
	DeletionTimestamp    *int64             `json:"deletionTimestamp,omitempty"`
	DataChange           bool               `json:"dataChange"`
	ExtendedFileMetadata bool               `json:"extendedFileMetadata,omitempty"`
	PartitionValues      map[string]*string `json:"partitionValues,omitempty"`
	Size                 *int64             `json:"size,omitempty"`
	Stats                string             `json:"stats,omitempty"`
	Tags                 map[string]string  `json:"tags,omitempty"`
	DeletionVector       *DeletionVector    `json:"deletionVector,omitempty"`
	// BaseRowID and DefaultRowCommitVersion are those of the add the remove deletes (row
	// tracking).
	BaseRowID               *int64 `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64 `json:"defaultRowCommitVersion,omitempty"`
}

// CDC is the cdc action: a file under _change_data/ holding change rows with _change_type.
type CDC struct {
	Path            string             `json:"path"`
	PartitionValues map[string]*string `json:"partitionValues"`
	Size            int64              `json:"size"`
	DataChange      bool               `json:"dataChange"`
	Tags            map[string]string  `json:"tags,omitempty"`
}

// Txn is the txn (SetTransaction) action: the last version an idempotent writer, named by
// AppID, has committed. The newest Version per AppID wins.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// DomainMetadata is the domainMetadata action (domainMetadata feature).
type DomainMetadata struct {
	Domain        string `json:"domain"`
	Configuration string `json:"configuration"`
	Removed       bool   `json:"removed"`
}

// CheckpointMetadata is the checkpointMetadata action of a V2 spec checkpoint: the
// version the checkpoint holds. It appears in checkpoints only, never in commits.
type CheckpointMetadata struct {
	Version int64             `json:"version"`
	Tags    map[string]string `json:"tags,omitempty"`
}

// Sidecar is the sidecar action of a V2 spec checkpoint: a Parquet file under
// _delta_log/_sidecars/ that holds some of the checkpoint's add and remove actions.
// Path is URI-encoded, usually the bare file name.
type Sidecar struct {
	Path             string            `json:"path"`
	SizeInBytes      int64             `json:"sizeInBytes"`
	ModificationTime int64             `json:"modificationTime"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// Lineage is what orchestrator records about who changed a table: the pipeline, stage, run
// and attempt, and the source files the commit loaded. It is written inside commitInfo under
// the "orchestrator" key, which other engines ignore.
type Lineage struct {
	Pipeline    string   `json:"pipeline,omitempty"`
	Stage       string   `json:"stage,omitempty"`
	RunID       string   `json:"runId,omitempty"`
	Attempt     int      `json:"attempt,omitempty"`
	SourceFiles []string `json:"sourceFiles,omitempty"`
	// Expectations are the counts of the stage's row checks over the rows this commit
	// writes (expectations.go).
	Expectations []ExpectationMetrics `json:"expectations,omitempty"`
	// Lookups are a fact_load's counts per lookup (lookups.go).
	Lookups []LookupMetrics `json:"lookups,omitempty"`
}

// CommitInfo is the free-form commitInfo action, with the fields Spark and delta-rs write.
// OperationParameters and OperationMetrics are decoded as any: Spark writes JSON-encoded
// strings, delta-rs plain numbers; writers here use decimal strings as Spark does.
type CommitInfo struct {
	Timestamp           int64          `json:"timestamp"`
	InCommitTimestamp   *int64         `json:"inCommitTimestamp,omitempty"`
	UserName            string         `json:"userName,omitempty"`
	Operation           string         `json:"operation,omitempty"`
	OperationParameters map[string]any `json:"operationParameters,omitempty"`
	ReadVersion         *int64         `json:"readVersion,omitempty"`
	IsolationLevel      string         `json:"isolationLevel,omitempty"`
	IsBlindAppend       *bool          `json:"isBlindAppend,omitempty"`
	OperationMetrics    map[string]any `json:"operationMetrics,omitempty"`
	UserMetadata        string         `json:"userMetadata,omitempty"`
	EngineInfo          string         `json:"engineInfo,omitempty"`
	TxnID               string         `json:"txnId,omitempty"`
	// Tags are Delta's commit tags (e.g. delta.rowTracking.preserved).
	Tags         map[string]string `json:"tags,omitempty"`
	Orchestrator *Lineage          `json:"orchestrator,omitempty"`
}

// Action is one line of a commit file: exactly one field is set. Unknown action kinds
// decode to an Action with no field set and are ignored by replay, as are
// checkpointMetadata and sidecar, which only a V2 checkpoint's reader interprets.
type Action struct {
	CommitInfo     *CommitInfo     `json:"commitInfo,omitempty"`
	Protocol       *Protocol       `json:"protocol,omitempty"`
	MetaData       *Metadata       `json:"metaData,omitempty"`
	Add            *Add            `json:"add,omitempty"`
	Remove         *Remove         `json:"remove,omitempty"`
	CDC            *CDC            `json:"cdc,omitempty"`
	Txn            *Txn            `json:"txn,omitempty"`
	DomainMetadata *DomainMetadata `json:"domainMetadata,omitempty"`

	CheckpointMetadata *CheckpointMetadata `json:"checkpointMetadata,omitempty"`
	Sidecar            *Sidecar            `json:"sidecar,omitempty"`
}

// DecodeActions parses a commit file (newline-delimited JSON, one action per line). Blank
// lines are skipped. A line that is not one JSON object (malformed, truncated, or with
// anything after the object) is an error naming its line number.
func DecodeActions(r io.Reader) ([]Action, error) {
	var out []Action
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 256*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if b[0] != '{' {
			return nil, fmt.Errorf("line %d: not a JSON object (starts with %q)", line, b[:1])
		}
		var a Action
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&a); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if dec.InputOffset() != int64(len(b)) {
			return nil, fmt.Errorf("line %d: unexpected data after the JSON object at column %d", line, dec.InputOffset()+1)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// EncodeActions writes actions as newline-delimited JSON, one per line.
func EncodeActions(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	for i := range actions {
		b, err := json.Marshal(&actions[i])
		if err != nil {
			return nil, fmt.Errorf("encode action %d: %w", i, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}
