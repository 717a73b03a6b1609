package delta

import (
	"fmt"
	"sort"
	"strings"
)

// Table feature names (PROTOCOL.md, Table Features).
const (
	FeatureAppendOnly          = "appendOnly"
	FeatureInvariants          = "invariants"
	FeatureCheckConstraints    = "checkConstraints"
	FeatureChangeDataFeed      = "changeDataFeed"
	FeatureGeneratedColumns    = "generatedColumns"
	FeatureColumnMapping       = "columnMapping"
	FeatureIdentityColumns     = "identityColumns"
	FeatureDeletionVectors     = "deletionVectors"
	FeatureTimestampNTZ        = "timestampNtz"
	FeatureV2Checkpoint        = "v2Checkpoint"
	FeatureVacuumProtocolCheck = "vacuumProtocolCheck"
	FeatureInCommitTimestamp   = "inCommitTimestamp"
	FeatureDomainMetadata      = "domainMetadata"
	FeatureTypeWidening        = "typeWidening"
	// FeatureTypeWideningPreview is the name Delta 3.x gave type widening before it was
	// final; its tables read the same.
	FeatureTypeWideningPreview = "typeWidening-preview"
	FeatureVariantType         = "variantType"
	FeatureCatalogManaged      = "catalogManaged"
)

// Highest protocol versions this package understands.
const (
	maxReaderVersion = 3
	maxWriterVersion = 7
)

// readerFeaturesSupported are the reader features a snapshot can be read with. Everything
// else, unknown names included, is refused.
var readerFeaturesSupported = map[string]bool{
	FeatureColumnMapping:       true,
	FeatureTypeWidening:        true,
	FeatureTypeWideningPreview: true,
	FeatureDeletionVectors:     true,
	FeatureTimestampNTZ:        true,
	FeatureVacuumProtocolCheck: true,
	FeatureV2Checkpoint:        true,
	FeatureVariantType:         true, // read; writes refused (checkWrite)
}

// writerFeaturesSupported are the writer features this package honours when it commits.
var writerFeaturesSupported = map[string]bool{
	FeatureAppendOnly:          true,
	FeatureColumnMapping:       true,
	FeatureTypeWidening:        true,
	FeatureTypeWideningPreview: true,
	FeatureInvariants:          true,
	FeatureChangeDataFeed:      true,
	FeatureDeletionVectors:     true,
	FeatureIdentityColumns:     true,
	FeatureTimestampNTZ:        true,
	FeatureVacuumProtocolCheck: true,
	FeatureV2Checkpoint:        true,
	FeatureInCommitTimestamp:   true,
	FeatureDomainMetadata:      true, // domains are kept as they are (clustering.go)
	FeatureClustering:          true,
	FeatureRowTracking:         true,
}

// UnsupportedFeatureError reports a table that needs a feature this package does not
// implement. Its message is "unsupported table feature: <name>".
type UnsupportedFeatureError struct {
	Feature string // feature name; empty when a protocol version is too high
	Write   bool   // true when only writing is refused
	// ReaderVersion or WriterVersion is set when the protocol version itself is beyond
	// what this package implements.
	ReaderVersion, WriterVersion int
}

func (e *UnsupportedFeatureError) Error() string {
	switch {
	case e.ReaderVersion > 0:
		return fmt.Sprintf("unsupported protocol: minReaderVersion %d (this reader supports up to %d)", e.ReaderVersion, maxReaderVersion)
	case e.WriterVersion > 0:
		return fmt.Sprintf("unsupported protocol: minWriterVersion %d (this writer supports up to %d)", e.WriterVersion, maxWriterVersion)
	}
	if e.Write {
		return "unsupported table feature: " + e.Feature + " (writes refused)"
	}
	return "unsupported table feature: " + e.Feature
}

// legacyWriterFeatures lists the features each legacy writer version adds.
var legacyWriterFeatures = [][]string{
	2: {FeatureAppendOnly, FeatureInvariants},
	3: {FeatureCheckConstraints},
	4: {FeatureChangeDataFeed, FeatureGeneratedColumns},
	5: {FeatureColumnMapping},
	6: {FeatureIdentityColumns},
}

// EffectiveReaderFeatures returns the reader features the protocol supports, legacy versions
// expanded (reader 2 implies columnMapping), sorted.
func (p *Protocol) EffectiveReaderFeatures() []string {
	set := map[string]bool{}
	switch {
	case p.MinReaderVersion >= 3:
		for _, f := range p.ReaderFeatures {
			set[f] = true
		}
	case p.MinReaderVersion == 2:
		set[FeatureColumnMapping] = true
	}
	return sortedKeys(set)
}

// EffectiveWriterFeatures returns the writer features the protocol supports, legacy
// versions expanded (DELTA.md §1), sorted.
func (p *Protocol) EffectiveWriterFeatures() []string {
	set := map[string]bool{}
	if p.MinWriterVersion >= 7 {
		for _, f := range p.WriterFeatures {
			set[f] = true
		}
	} else {
		for v := 2; v <= p.MinWriterVersion && v < len(legacyWriterFeatures); v++ {
			for _, f := range legacyWriterFeatures[v] {
				set[f] = true
			}
		}
	}
	return sortedKeys(set)
}

// HasWriterFeature says whether the protocol supports the named writer feature (legacy
// versions expanded).
func (p *Protocol) HasWriterFeature(name string) bool {
	for _, f := range p.EffectiveWriterFeatures() {
		if f == name {
			return true
		}
	}
	return false
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkRead is the reader gate of DELTA.md §1.
func checkRead(p *Protocol, md *Metadata) error {
	if p.MinReaderVersion > maxReaderVersion {
		return &UnsupportedFeatureError{ReaderVersion: p.MinReaderVersion}
	}
	switch p.MinReaderVersion {
	case 2:
		switch columnMappingMode(md) {
		case "none", "name", "id":
		default:
			return &UnsupportedFeatureError{Feature: FeatureColumnMapping + " (mode " + columnMappingMode(md) + ")"}
		}
	case 3:
		for _, f := range p.ReaderFeatures {
			if !readerFeaturesSupported[f] {
				return &UnsupportedFeatureError{Feature: f}
			}
		}
	}
	return nil
}

// checkWrite is the writer gate: the reader gate, then every writer feature the table
// needs must be implemented. At writer 7 every listed feature counts; for legacy versions
// only the features that are active do (a (1,4) table without generated columns or CHECK
// constraints is writable), as Spark decides.
func checkWrite(p *Protocol, md *Metadata) error {
	if err := checkRead(p, md); err != nil {
		return err
	}
	if p.MinWriterVersion > maxWriterVersion {
		return &UnsupportedFeatureError{WriterVersion: p.MinWriterVersion, Write: true}
	}
	if p.MinWriterVersion == 7 {
		for _, f := range p.WriterFeatures {
			if !writerFeaturesSupported[f] {
				return &UnsupportedFeatureError{Feature: f, Write: true}
			}
		}
	} else {
		for _, f := range p.EffectiveWriterFeatures() {
			if !writerFeaturesSupported[f] && featureActive(f, md) {
				return &UnsupportedFeatureError{Feature: f, Write: true}
			}
		}
	}
	if md != nil {
		if s, err := md.Schema(); err == nil {
			if hasType(s, TypeVariant) {
				return &UnsupportedFeatureError{Feature: FeatureVariantType, Write: true}
			}
			if name := fieldWithMetadata(s, "delta.invariants"); name != "" {
				return &UnsupportedFeatureError{Feature: FeatureInvariants + " (column " + name + " has delta.invariants)", Write: true}
			}
			if p.MinWriterVersion == 7 || featureActive(FeatureGeneratedColumns, md) {
				if name := fieldWithMetadata(s, "delta.generationExpression"); name != "" {
					return &UnsupportedFeatureError{Feature: FeatureGeneratedColumns, Write: true}
				}
			}
		}
		for k := range md.Configuration {
			if strings.HasPrefix(k, "delta.constraints.") {
				return &UnsupportedFeatureError{Feature: FeatureCheckConstraints, Write: true}
			}
		}
	}
	return nil
}

// featureActive says whether a legacy-implied feature is in use by the table.
func featureActive(f string, md *Metadata) bool {
	if md == nil {
		return true
	}
	switch f {
	case FeatureCheckConstraints:
		for k := range md.Configuration {
			if strings.HasPrefix(k, "delta.constraints.") {
				return true
			}
		}
		return false
	case FeatureGeneratedColumns:
		s, err := md.Schema()
		return err != nil || fieldWithMetadata(s, "delta.generationExpression") != ""
	case FeatureColumnMapping:
		return columnMappingMode(md) != "none"
	default:
		return true
	}
}

// columnMappingMode is delta.columnMapping.mode, "none" when absent.
func columnMappingMode(md *Metadata) string {
	if md == nil {
		return "none"
	}
	if m, ok := md.Configuration["delta.columnMapping.mode"]; ok && m != "" {
		return strings.ToLower(m)
	}
	return "none"
}

// fieldWithMetadata returns the dotted name of the first field (nested included) whose
// metadata has key, or "".
func fieldWithMetadata(s *StructType, key string) string {
	var walk func(prefix string, t DataType) string
	walk = func(prefix string, t DataType) string {
		switch v := t.(type) {
		case *StructType:
			for _, f := range v.Fields {
				name := prefix + f.Name
				if _, ok := f.Metadata[key]; ok {
					return name
				}
				if n := walk(name+".", f.Type); n != "" {
					return n
				}
			}
		case *ArrayType:
			return walk(prefix, v.ElementType)
		case *MapType:
			if n := walk(prefix, v.KeyType); n != "" {
				return n
			}
			return walk(prefix, v.ValueType)
		}
		return ""
	}
	return walk("", s)
}

// hasTimestampNTZ says whether the schema has a timestamp_ntz anywhere.
func hasTimestampNTZ(t DataType) bool { return hasType(t, TypeTimestampNTZ) }

// hasType says whether a primitive type of the name occurs anywhere in t.
func hasType(t DataType, name string) bool {
	switch v := t.(type) {
	case *PrimitiveType:
		return v.Name == name
	case *StructType:
		for _, f := range v.Fields {
			if hasType(f.Type, name) {
				return true
			}
		}
	case *ArrayType:
		return hasType(v.ElementType, name)
	case *MapType:
		return hasType(v.KeyType, name) || hasType(v.ValueType, name)
	}
	return false
}

// newTableProtocol chooses the protocol of a new table (DELTA.md §1): (1,2) unless the
// table uses change data feed, deletion vectors, identity columns, timestamp_ntz,
// in-commit timestamps, row tracking or V2 checkpoints, which take table features at (1,7), or (3,7)
// with the reader-writer features deletionVectors, timestampNtz and v2Checkpoint.
func newTableProtocol(schema *StructType, config map[string]string) *Protocol {
	cdf := strings.EqualFold(config["delta.enableChangeDataFeed"], "true")
	dv := strings.EqualFold(config[PropEnableDeletionVectors], "true")
	identity := fieldWithMetadata(schema, "delta.identity.start") != ""
	ntz := hasTimestampNTZ(schema)
	ict := strings.EqualFold(config[PropEnableInCommitTimestamps], "true")
	v2cp := strings.EqualFold(config[PropCheckpointPolicy], CheckpointPolicyV2)
	rows := strings.EqualFold(config[PropEnableRowTracking], "true")
	cm := columnMappingOn(config)
	if !cdf && !dv && !identity && !ntz && !ict && !v2cp && !rows && !cm {
		return &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	}
	p := &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{FeatureAppendOnly, FeatureInvariants}}
	if cdf {
		p.WriterFeatures = append(p.WriterFeatures, FeatureChangeDataFeed)
	}
	if identity {
		p.WriterFeatures = append(p.WriterFeatures, FeatureIdentityColumns)
	}
	if ict {
		p.WriterFeatures = append(p.WriterFeatures, FeatureInCommitTimestamp)
	}
	if rows {
		p.WriterFeatures = append(p.WriterFeatures, FeatureDomainMetadata, FeatureRowTracking)
	}
	if v2cp {
		p.MinReaderVersion = 3
		p.ReaderFeatures = append(p.ReaderFeatures, FeatureV2Checkpoint)
		p.WriterFeatures = append(p.WriterFeatures, FeatureV2Checkpoint)
	}
	if dv {
		p.MinReaderVersion = 3
		p.ReaderFeatures = append(p.ReaderFeatures, FeatureDeletionVectors)
		p.WriterFeatures = append(p.WriterFeatures, FeatureDeletionVectors)
	}
	if ntz {
		p.MinReaderVersion = 3
		p.ReaderFeatures = append(p.ReaderFeatures, FeatureTimestampNTZ)
		p.WriterFeatures = append(p.WriterFeatures, FeatureTimestampNTZ)
	}
	if cm {
		// Reader version 2 implies column mapping; version 3 names it.
		p.WriterFeatures = append(p.WriterFeatures, FeatureColumnMapping)
		if p.MinReaderVersion == 3 {
			p.ReaderFeatures = append(p.ReaderFeatures, FeatureColumnMapping)
		} else {
			p.MinReaderVersion = 2
		}
	}
	if p.MinReaderVersion == 3 && p.ReaderFeatures == nil {
		p.ReaderFeatures = []string{}
	}
	return p
}

// columnMappingOn reports whether a table's configuration turns column mapping on.
func columnMappingOn(config map[string]string) bool {
	m := strings.ToLower(config[propColumnMappingMode])
	return m == "name" || m == "id"
}
