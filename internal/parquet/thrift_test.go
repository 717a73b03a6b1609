package parquet

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// goldenFooters returns the footer bytes of every data and checkpoint file of the golden
// tables (written by Spark, delta-rs and delta-kernel).
func goldenFooters(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(testenv.GoldenDir(t), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if len(data) < 12 || string(data[len(data)-4:]) != "PAR1" {
			t.Fatalf("%s is not a parquet file", p)
		}
		n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
		out[p] = data[len(data)-8-n : len(data)-8]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("only %d golden parquet files", len(out))
	}
	return out
}

// Decoding a footer and encoding it again gives the same bytes, for the footers of every
// writer the golden tables come from: a splice changes only the fields it moves.
func TestThriftFooterRoundTrip(t *testing.T) {
	for p, foot := range goldenFooters(t) {
		v, err := decodeThriftStruct(foot)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if got := encodeThrift(nil, &v); !bytes.Equal(got, foot) {
			t.Errorf("%s: footer of %d bytes encodes again as %d different bytes", p, len(foot), len(got))
		}
		if v.field(fmRowGroups) == nil || v.field(fmSchema) == nil {
			t.Errorf("%s: no schema or row groups in the decoded footer", p)
		}
	}
}

// A truncated or corrupted footer is an error, never a panic or a runaway allocation.
func TestThriftFooterCorrupt(t *testing.T) {
	var foot []byte // the one nearest 2 KiB: every byte of it is tried
	for _, f := range goldenFooters(t) {
		if foot == nil || abs(len(f)-2048) < abs(len(foot)-2048) {
			foot = f
		}
	}
	for n := range len(foot) {
		if _, err := decodeThriftStruct(foot[:n]); err == nil {
			t.Fatalf("a footer cut to %d of %d bytes decoded", n, len(foot))
		}
	}
	bad := bytes.Clone(foot)
	for i := range bad {
		for _, b := range []byte{0x00, 0xff, 0x19, 0xfc} {
			old := bad[i]
			bad[i] = b
			decodeThriftStruct(bad) // must return, whatever it says
			bad[i] = old
		}
	}
}

// setInt replaces a field in place or inserts it in id order, and drop removes fields;
// the encoding stays decodable and carries the edits.
func TestThriftEdits(t *testing.T) {
	v := tValue{typ: tStruct, fields: []tField{{id: 1, v: tValue{typ: tI32, i: 7}}, {id: 40, v: tValue{typ: tBinary, b: []byte("x")}}}}
	v.setInt(20, tI64, -5)
	v.setInt(1, tI32, 9)
	v.fields = append(v.fields, tField{id: 41, v: tValue{typ: tBoolTrue, i: 0}})
	back, err := decodeThriftStruct(encodeThrift(nil, &v))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int16]int64{1: 9, 20: -5, 41: 0} {
		if got, ok := back.int(id); !ok || got != want {
			t.Errorf("field %d = %d, %v; want %d", id, got, ok, want)
		}
	}
	if f := back.field(40); f == nil || string(f.b) != "x" {
		t.Errorf("field 40 = %v, want x", f)
	}
	back.drop(20, 40)
	if len(back.fields) != 2 || back.fields[0].id != 1 || back.fields[1].id != 41 {
		t.Errorf("after drop: %+v", back.fields)
	}
}

func abs(x int) int { return max(x, -x) }
