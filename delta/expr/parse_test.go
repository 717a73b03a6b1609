package expr

import (
	"strings"
	"testing"
)

// TestParse reads the SQL subset back as the text String prints, and reports where a
// predicate that does not parse goes wrong.
func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"country = 'US' AND amount > 10", "country = 'US' AND amount > 10"},
		{"a <> 1 or b == 'x''y'", "a != 1 OR b = 'x''y'"},
		{"x IS NOT NULL AND (y IN (1, 2.5) OR z IS NULL)", "x IS NOT NULL AND (y IN (1, 2.5) OR z IS NULL)"},
		{"d BETWEEN DATE '2024-01-01' AND '2024-12-31'", "d >= '2024-01-01' AND d <= '2024-12-31'"},
		{"`odd name` NOT IN ('a', 'b')", "`odd name` != 'a' AND `odd name` != 'b'"},
		{"flag = true AND s.inner >= -3", "flag = true AND s.inner >= -3"},
	} {
		p, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := p.String(); got != tc.want {
			t.Errorf("Parse(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, wantErr string }{
		{"country = ", `position 11: expected a literal, found the end`},
		{"country = 'US' AND", `position 19: expected a column name, found the end`},
		{"(a = 1", `position 7: expected ")", found the end`},
		{"a = 1 b", `position 7: expected AND, OR or the end, found "b"`},
		{"a IN (1 2)", `position 9: expected "," or ")", found "2"`},
		{"a = 'open", `position 5: unterminated '`},
		{"a ~ 1", `position 3: unexpected character '~'`},
		{"a = NULL", `position 5: NULL cannot be compared (use IS NULL)`},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Parse(%q) error %v, want %q", tc.in, err, tc.wantErr)
		}
	}
}
