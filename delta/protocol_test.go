package delta

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestProtocolGates(t *testing.T) {
	plain := &Metadata{SchemaString: `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}`, Configuration: map[string]string{}}
	withConfig := func(k, v string) *Metadata {
		md := *plain
		md.Configuration = map[string]string{k: v}
		return &md
	}
	generated := &Metadata{SchemaString: `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{"delta.generationExpression":"1"}}]}`, Configuration: map[string]string{}}
	tests := []struct {
		name              string
		p                 *Protocol
		md                *Metadata
		readErr, writeErr string // "" = allowed
	}{
		{"(1,1)", &Protocol{MinReaderVersion: 1, MinWriterVersion: 1}, plain, "", ""},
		{"(1,2)", &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, plain, "", ""},
		{"(1,4) without generated columns or constraints", &Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, plain, "", ""},
		{"(1,4) with a generated column", &Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, generated, "", "unsupported table feature: generatedColumns"},
		{"(1,3) with a CHECK constraint", &Protocol{MinReaderVersion: 1, MinWriterVersion: 3}, withConfig("delta.constraints.pos", "a > 0"), "", "unsupported table feature: checkConstraints"},
		{"(1,6) identity", &Protocol{MinReaderVersion: 1, MinWriterVersion: 6}, plain, "", ""},
		{"(2,5) mapping none", &Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, plain, "", ""},
		{"(2,5) mapping name", &Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, withConfig("delta.columnMapping.mode", "name"), "", ""},
		{"(2,5) mapping id", &Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, withConfig("delta.columnMapping.mode", "id"), "", ""},
		{"(2,5) mapping of an unknown mode", &Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, withConfig("delta.columnMapping.mode", "fancy"), "unsupported table feature: columnMapping (mode fancy)", "unsupported table feature: columnMapping (mode fancy)"},
		{"(3,7) type widening", &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"typeWidening"}, WriterFeatures: []string{"typeWidening"}}, plain, "", ""},
		{"reader 4", &Protocol{MinReaderVersion: 4, MinWriterVersion: 7}, plain, "unsupported protocol: minReaderVersion 4", "unsupported protocol: minReaderVersion 4"},
		{"writer 8", &Protocol{MinReaderVersion: 1, MinWriterVersion: 8}, plain, "", "unsupported protocol: minWriterVersion 8"},
		{"(3,7) timestampNtz", &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz"}}, plain, "", ""},
		{"(3,7) unknown reader feature", &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"fancyNewThing"}, WriterFeatures: []string{"fancyNewThing"}}, plain, "unsupported table feature: fancyNewThing", "unsupported table feature: fancyNewThing"},
		{"(3,7) deletion vectors", &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}, plain, "", ""},
		{"(3,7) vacuumProtocolCheck", &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"vacuumProtocolCheck"}, WriterFeatures: []string{"vacuumProtocolCheck"}}, plain, "", ""},
		{"(1,7) domainMetadata", &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"domainMetadata"}}, plain, "", ""},
		{"(1,7) clustering", &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"domainMetadata", "clustering"}}, plain, "", ""},
		{"(1,7) rowTracking", &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"domainMetadata", "rowTracking"}}, plain, "", ""},
		{"(1,7) inCommitTimestamp", &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"inCommitTimestamp"}}, plain, "", ""},
		{"(3,7) v2Checkpoint", &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"v2Checkpoint"}, WriterFeatures: []string{"v2Checkpoint"}}, plain, "", ""},
		{"(1,7) unknown writer feature", &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"fancyNewWriterThing"}}, plain, "", "unsupported table feature: fancyNewWriterThing"},
		{"(1,7) cdf identity appendOnly", &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "invariants", "changeDataFeed", "identityColumns"}}, plain, "", ""},
		{"invariants in schema", &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, &Metadata{SchemaString: `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{"delta.invariants":"{}"}}]}`}, "", "unsupported table feature: invariants"},
	}
	check := func(t *testing.T, what string, err error, want string) {
		t.Helper()
		if want == "" {
			if err != nil {
				t.Errorf("%s refused: %v", what, err)
			}
			return
		}
		var fe *UnsupportedFeatureError
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &fe) {
			t.Errorf("%s error = %v, want an *UnsupportedFeatureError containing %q", what, err, want)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check(t, "read", checkRead(tc.p, tc.md), tc.readErr)
			check(t, "write", checkWrite(tc.p, tc.md), tc.writeErr)
		})
	}
}

func TestEffectiveFeatures(t *testing.T) {
	p := &Protocol{MinReaderVersion: 2, MinWriterVersion: 6}
	if got := strings.Join(p.EffectiveReaderFeatures(), ","); got != "columnMapping" {
		t.Errorf("reader features of (2,6) = %s", got)
	}
	want := "appendOnly,changeDataFeed,checkConstraints,columnMapping,generatedColumns,identityColumns,invariants"
	if got := strings.Join(p.EffectiveWriterFeatures(), ","); got != want {
		t.Errorf("writer features of (2,6) = %s, want %s", got, want)
	}
	up := withWriterFeature(&Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, FeatureChangeDataFeed)
	if up.MinWriterVersion != 7 || strings.Join(up.WriterFeatures, ",") != "appendOnly,invariants,changeDataFeed" {
		t.Errorf("upgrade of (1,2) for CDF = %+v", up)
	}
}

func TestParseInterval(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"interval 30 days", 30 * 24 * time.Hour, false},
		{"interval 1 week", 7 * 24 * time.Hour, false},
		{"INTERVAL 2 Hours", 2 * time.Hour, false},
		{"interval 1 day 12 hours", 36 * time.Hour, false},
		{"7 days", 7 * 24 * time.Hour, false},
		{"interval 0 seconds", 0, false},
		{"interval 30", 0, true},
		{"interval x days", 0, true},
		{"interval 3 fortnights", 0, true},
		{"", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseInterval(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseInterval(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseInterval(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseLogFile(t *testing.T) {
	tests := []struct {
		name        string
		ok          bool
		kind        logFileKind
		version     int64
		part, parts int
	}{
		{"00000000000000000007.json", true, kindCommit, 7, 0, 0},
		{"00000000000000000010.checkpoint.parquet", true, kindCheckpoint, 10, 0, 0},
		{"00000000000000000010.checkpoint.0000000002.0000000003.parquet", true, kindMultiPart, 10, 2, 3},
		{"00000000000000000002.checkpoint.e8fa2696-9728-4e9c-b285-634743fdd4fb.parquet", true, kindV2Checkpoint, 2, 0, 0},
		{"00000000000000000002.checkpoint.e8fa2696-9728-4e9c-b285-634743fdd4fb.json", true, kindV2Checkpoint, 2, 0, 0},
		{"00000000000000000007.crc", false, 0, 0, 0, 0},
		{"00000000000000000004.00000000000000000006.compacted.json", false, 0, 0, 0, 0},
		{"_last_checkpoint", false, 0, 0, 0, 0},
		{"_sidecars/abc.parquet", false, 0, 0, 0, 0},
		{"0000000000000000007.json", false, 0, 0, 0, 0},
		{"00000000000000000010.checkpoint.0000000004.0000000003.parquet", false, 0, 0, 0, 0},
	}
	for _, tc := range tests {
		lf, ok := parseLogFile(tc.name)
		if ok != tc.ok || (ok && (lf.kind != tc.kind || lf.version != tc.version || lf.part != tc.part || lf.parts != tc.parts)) {
			t.Errorf("parseLogFile(%q) = %+v, %v", tc.name, lf, ok)
		}
	}
}
