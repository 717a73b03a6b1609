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

// RowKeys names what identifies a row of each keyed stage's target, and nothing for
// the other tables it writes (a quarantine table, a fact load's dimension).
func TestRowKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  RowKeyed
		want []string
	}{
		{"append", &IngestConfig{Target: "t"}, nil},
		{"upsert", &IngestConfig{Target: "t", Keys: []string{"id"}, QuarantineTable: "q"}, []string{"id"}},
		{"scd1", &SCD1Config{Target: "t", Keys: []string{"a", "b"}}, []string{"a", "b"}},
		{"scd2 without a surrogate key", &SCD2Config{Target: "t", Keys: []string{"id"}}, []string{"id", "valid_from"}},
		{"scd2 with its own valid_from", &SCD2Config{Target: "t", Keys: []string{"id"}, Columns: SCDColumns{ValidFrom: "start_at"}}, []string{"id", "start_at"}},
		{"scd2 with a surrogate key", &SCD2Config{Target: "t", Keys: []string{"id"}, Columns: SCDColumns{SurrogateKey: "sk"}}, []string{"sk"}},
		{"fact load", &FactLoadConfig{Target: "t", Keys: []string{"sale_id"}, Lookups: []FactLookup{{Dimension: "d"}}}, []string{"sale_id"}},
	} {
		if got := c.cfg.RowKeys("t"); !slices.Equal(got, c.want) {
			t.Errorf("%s: RowKeys %q, want %q", c.name, got, c.want)
		}
		_, writes := c.cfg.Tables()
		for _, other := range writes[1:] {
			if got := c.cfg.RowKeys(other); got != nil {
				t.Errorf("%s: RowKeys(%s) %q, want none (not its target)", c.name, other, got)
			}
		}
	}
	cfg := &SCD2Config{Keys: []string{"id"}}
	_ = cfg.RowKeys("")
	if len(cfg.Keys) != 1 {
		t.Errorf("RowKeys changed the config's keys: %q", cfg.Keys)
	}
	// A fact load writes the dimension of a lookup that adds its unknown member row or
	// inferred members, not one that fails on a miss.
	fl := &FactLoadConfig{Target: "f", Lookups: []FactLookup{{Dimension: "d1"}, {Dimension: "d2", Missing: MissingFail}, {Dimension: "d3", Missing: MissingInferred}}}
	if _, writes := fl.Tables(); !slices.Equal(writes, []string{"f", "d1", "d3"}) {
		t.Errorf("fact load writes %q, want f, d1 and d3", writes)
	}
}

func TestEventLog(t *testing.T) {
	for _, c := range []ChangeMerge{&SCD1Config{Source: "s", Target: "t"}, &SCD2Config{Source: "s", Target: "t"}} {
		if got, want := c.EventLog(), EventLogPath(c.Kind(), "t", "s"); got != want {
			t.Errorf("%s: EventLog %q, want %q", c.Kind(), got, want)
		}
	}
}
