package jobs

import (
	"fmt"
	"testing"
)

// BenchmarkFoldKey folds one key's stored versions with a batch of its events, the
// per-key step of every scd2_merge: "append" adds newer versions after the stored ones,
// "late" places events between them (stored versions are updated and split), "tombstone"
// closes and reopens the key with deletes kept as tombstones.
func BenchmarkFoldKey(b *testing.B) {
	row := func(city string, seg int) []any { return []any{"C00000042", city, fmt.Sprint("seg", seg)} }
	stored := func() []scdVersion {
		return []scdVersion{
			{SK: 1, From: 10, To: 20, Row: row("Seattle", 1)},
			{SK: 2, From: 20, To: 30, Row: row("Portland", 1)},
			{SK: 3, From: 30, To: SeqMax, Current: true, Row: row("Boise", 1)},
		}
	}
	cases := []struct {
		name    string
		deletes string
		events  []scdEvent
	}{
		{"append", "close", []scdEvent{{seq: 40, row: row("Reno", 2)}, {seq: 50, row: row("Reno", 3)}, {seq: 60, row: row("Eugene", 3)}}},
		{"late", "close", []scdEvent{{seq: 15, row: row("Tacoma", 2)}, {seq: 20, row: row("Salem", 2)}, {seq: 35, row: row("Boise", 3)}}},
		{"tombstone", "tombstone", []scdEvent{{seq: 40, delete: true}, {seq: 50, row: row("Reno", 2)}, {seq: 60, delete: true}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			spec := testSCDSpec
			spec.deletes = c.deletes
			existing := stored()
			var sk int64 = 100
			next := func() int64 { sk++; return sk }
			b.ReportAllocs()
			for b.Loop() {
				if len(foldKey(&spec, existing, c.events, false, next)) == 0 {
					b.Fatal("no changes")
				}
			}
		})
	}
}
