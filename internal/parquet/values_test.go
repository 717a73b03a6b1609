package parquet

import "testing"

// TestSortKey16 checks that a key below another's is a value below the other's
// bytewise, on short, long, zero-padded and 0xFF values.
func TestSortKey16(t *testing.T) {
	vals := []string{"", "\x00", "a", "a\x00", "ab", "abcdefg", "abcdefgh", "abcdefgh\x00", "abcdefghi", "abcdefghijklmno",
		"abcdefghijklmnop", "abcdefghijklmnopq", "abcdefghijklmnoq", "\xff", "\xff\xff\xff\xff\xff\xff\xff\xff\xff", "TX-000000001", "TX-000000010"}
	for _, x := range vals {
		for _, y := range vals {
			xh, xl := SortKey16([]byte(x))
			yh, yl := SortKey16([]byte(y))
			if (xh < yh || xh == yh && xl < yl) && !(x < y) {
				t.Errorf("key(%q) < key(%q) but %q >= %q", x, y, x, y)
			}
		}
	}
}
