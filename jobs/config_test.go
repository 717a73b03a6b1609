package jobs

import (
	"slices"
	"testing"
)

func TestSCDColumnsWithDefaults(t *testing.T) {
	got := SCDColumns{ValidTo: "end_at", SurrogateKey: "sk"}.WithDefaults()
	want := SCDColumns{SurrogateKey: "sk", ValidFrom: "valid_from", ValidTo: "end_at", IsCurrent: "is_current"}
	if got != want {
		t.Errorf("WithDefaults %+v, want %+v", got, want)
	}
}

// RowKeys names what identifies a row of each keyed stage's target.
func TestRowKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  RowKeyed
		want []string
	}{
		{"append", &IngestConfig{}, nil},
		{"upsert", &IngestConfig{Keys: []string{"id"}}, []string{"id"}},
		{"scd1", &SCD1Config{Keys: []string{"a", "b"}}, []string{"a", "b"}},
		{"scd2 without a surrogate key", &SCD2Config{Keys: []string{"id"}}, []string{"id", "valid_from"}},
		{"scd2 with its own valid_from", &SCD2Config{Keys: []string{"id"}, Columns: SCDColumns{ValidFrom: "start_at"}}, []string{"id", "start_at"}},
		{"scd2 with a surrogate key", &SCD2Config{Keys: []string{"id"}, Columns: SCDColumns{SurrogateKey: "sk"}}, []string{"sk"}},
	} {
		if got := c.cfg.RowKeys(); !slices.Equal(got, c.want) {
			t.Errorf("%s: RowKeys %q, want %q", c.name, got, c.want)
		}
	}
	cfg := &SCD2Config{Keys: []string{"id"}}
	_ = cfg.RowKeys()
	if len(cfg.Keys) != 1 {
		t.Errorf("RowKeys changed the config's keys: %q", cfg.Keys)
	}
}

func TestEventLog(t *testing.T) {
	for _, c := range []ChangeMerge{&SCD1Config{Source: "s", Target: "t"}, &SCD2Config{Source: "s", Target: "t"}} {
		if got, want := c.EventLog(), EventLogPath(c.Kind(), "t", "s"); got != want {
			t.Errorf("%s: EventLog %q, want %q", c.Kind(), got, want)
		}
	}
}
