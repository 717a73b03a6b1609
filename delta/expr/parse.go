package expr

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode"
)

// Parse parses the SQL subset the CLI's --where accepts:
//
//	expr    := term { OR term }
//	term    := factor { AND factor }
//	factor  := "(" expr ")" | column cmp literal | column IS [NOT] NULL
//	         | column [NOT] IN "(" literal { "," literal } ")"
//	         | column BETWEEN literal AND literal
//	cmp     := = | == | != | <> | < | <= | > | >=
//	literal := 'text' ('' escapes a quote) | number | TRUE | FALSE
//	         | DATE 'yyyy-mm-dd' | TIMESTAMP 'yyyy-mm-dd hh:mm:ss[.f][Z]'
//	column  := name with letters, digits, _ and . (nested fields) | `any text`
//
// Literals are converted to the column's type when the predicate is bound to a schema:
// text compared with a date, timestamp, number or boolean column is parsed as one, and a
// timestamp without a zone is read as UTC (for timestamp_ntz, as the wall-clock time).
// Keywords are case-insensitive. Errors give the 1-based character position, e.g.
// `parse predicate: position 14: expected a literal, found ")"`.
func Parse(s string) (Predicate, error) {
	p := &predParser{src: s}
	if err := p.lex(); err != nil {
		return nil, err
	}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.errAt(t, "expected AND, OR or the end")
	}
	return e, nil
}

// maxExponent bounds the exponent of a number literal, well past every column type's
// range (doubles end near 1e308 and 5e-324).
const maxExponent = 1000

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokString
	tokNumber
	tokOp
	tokLParen
	tokRParen
	tokComma
)

type token struct {
	kind tokKind
	text string // identifiers and keywords as written; strings unquoted
	pos  int    // 1-based
}

type predParser struct {
	src  string
	toks []token
	i    int
}

func (p *predParser) errAt(t token, msg string) error {
	found := strconv.Quote(t.text)
	switch t.kind {
	case tokEOF:
		found = "the end"
	case tokString:
		found = "'" + t.text + "'"
	}
	return fmt.Errorf("parse predicate: position %d: %s, found %s", t.pos, msg, found)
}

func (p *predParser) lex() error {
	rs := []rune(p.src)
	for i := 0; i < len(rs); {
		r := rs[i]
		pos := i + 1
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '(':
			p.toks = append(p.toks, token{tokLParen, "(", pos})
			i++
		case r == ')':
			p.toks = append(p.toks, token{tokRParen, ")", pos})
			i++
		case r == ',':
			p.toks = append(p.toks, token{tokComma, ",", pos})
			i++
		case strings.ContainsRune("=!<>", r):
			j := i + 1
			if j < len(rs) && (rs[j] == '=' || (r == '<' && rs[j] == '>')) {
				j++
			}
			op := string(rs[i:j])
			if op == "!" {
				return fmt.Errorf("parse predicate: position %d: expected != , found \"!\"", pos)
			}
			p.toks = append(p.toks, token{tokOp, op, pos})
			i = j
		case r == '\'' || r == '`':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(rs) {
					return fmt.Errorf("parse predicate: position %d: unterminated %c", pos, r)
				}
				if rs[j] == r {
					if j+1 < len(rs) && rs[j+1] == r {
						b.WriteRune(r)
						j += 2
						continue
					}
					break
				}
				b.WriteRune(rs[j])
				j++
			}
			kind := tokString
			if r == '`' {
				kind = tokIdent
			}
			p.toks = append(p.toks, token{kind, b.String(), pos})
			i = j + 1
		case unicode.IsDigit(r) || r == '-' || r == '+' || r == '.':
			j := i + 1
			for j < len(rs) && (unicode.IsDigit(rs[j]) || rs[j] == '.' || rs[j] == 'e' || rs[j] == 'E' ||
				((rs[j] == '-' || rs[j] == '+') && (rs[j-1] == 'e' || rs[j-1] == 'E'))) {
				j++
			}
			p.toks = append(p.toks, token{tokNumber, string(rs[i:j]), pos})
			i = j
		case unicode.IsLetter(r) || r == '_':
			j := i + 1
			for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '_' || rs[j] == '.') {
				j++
			}
			p.toks = append(p.toks, token{tokIdent, string(rs[i:j]), pos})
			i = j
		default:
			return fmt.Errorf("parse predicate: position %d: unexpected character %q", pos, r)
		}
	}
	p.toks = append(p.toks, token{tokEOF, "", len(rs) + 1})
	return nil
}

func (p *predParser) peek() token { return p.toks[p.i] }
func (p *predParser) take() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

// keyword reports (and consumes) an identifier token equal to kw ignoring case.
func (p *predParser) keyword(kw string) bool {
	t := p.peek()
	if t.kind == tokIdent && strings.EqualFold(t.text, kw) && !p.quotedIdent(t) {
		p.i++
		return true
	}
	return false
}

func (p *predParser) quotedIdent(t token) bool {
	rs := []rune(p.src)
	return t.pos-1 < len(rs) && rs[t.pos-1] == '`'
}

func (p *predParser) expr() (Predicate, error) {
	var terms []Predicate
	for {
		t, err := p.term()
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
		if !p.keyword("OR") {
			break
		}
	}
	if len(terms) == 1 {
		return terms[0], nil
	}
	return Or(terms...), nil
}

func (p *predParser) term() (Predicate, error) {
	var fs []Predicate
	for {
		f, err := p.factor()
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
		if !p.keyword("AND") {
			break
		}
	}
	if len(fs) == 1 {
		return fs[0], nil
	}
	return And(fs...), nil
}

func (p *predParser) factor() (Predicate, error) {
	t := p.peek()
	if t.kind == tokLParen {
		p.take()
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		if c := p.take(); c.kind != tokRParen {
			return nil, p.errAt(c, `expected ")"`)
		}
		return e, nil
	}
	if t.kind != tokIdent {
		return nil, p.errAt(t, "expected a column name")
	}
	p.take()
	col := t.text
	switch {
	case p.keyword("IS"):
		not := p.keyword("NOT")
		if !p.keyword("NULL") {
			return nil, p.errAt(p.peek(), "expected NULL")
		}
		return &NullCheck{Column: col, Not: not}, nil
	case p.keyword("NOT"):
		if !p.keyword("IN") {
			return nil, p.errAt(p.peek(), "expected IN after NOT")
		}
		vals, err := p.list()
		if err != nil {
			return nil, err
		}
		ne := make([]Predicate, len(vals))
		for i, v := range vals {
			ne[i] = Ne(col, v)
		}
		return And(ne...), nil
	case p.keyword("IN"):
		vals, err := p.list()
		if err != nil {
			return nil, err
		}
		return In(col, vals...), nil
	case p.keyword("BETWEEN"):
		lo, err := p.literal()
		if err != nil {
			return nil, err
		}
		if !p.keyword("AND") {
			return nil, p.errAt(p.peek(), "expected AND in BETWEEN")
		}
		hi, err := p.literal()
		if err != nil {
			return nil, err
		}
		return And(Ge(col, lo), Le(col, hi)), nil
	}
	op := p.take()
	if op.kind != tokOp {
		return nil, p.errAt(op, "expected an operator (=, !=, <, <=, >, >=, IS, IN, BETWEEN)")
	}
	o := Op(op.text)
	switch op.text {
	case "==":
		o = OpEq
	case "<>":
		o = OpNe
	}
	v, err := p.literal()
	if err != nil {
		return nil, err
	}
	return &Comparison{Column: col, Op: o, Value: v}, nil
}

func (p *predParser) list() ([]any, error) {
	if t := p.take(); t.kind != tokLParen {
		return nil, p.errAt(t, `expected "("`)
	}
	var vals []any
	for {
		v, err := p.literal()
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		t := p.take()
		if t.kind == tokRParen {
			return vals, nil
		}
		if t.kind != tokComma {
			return nil, p.errAt(t, `expected "," or ")"`)
		}
	}
}

func (p *predParser) literal() (any, error) {
	t := p.take()
	switch t.kind {
	case tokString:
		return t.text, nil
	case tokNumber:
		if i, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return i, nil
		}
		if _, exp, ok := strings.Cut(strings.ToLower(t.text), "e"); ok {
			// big.Rat would hold 10^exp exactly: a huge exponent is a huge number.
			e, err := strconv.Atoi(exp)
			if err != nil {
				return nil, p.errAt(t, "expected a number")
			}
			if e > maxExponent || e < -maxExponent {
				return nil, p.errAt(t, fmt.Sprintf("number out of range (exponent beyond ±%d)", maxExponent))
			}
		}
		r, ok := new(big.Rat).SetString(t.text)
		if !ok {
			return nil, p.errAt(t, "expected a number")
		}
		return r, nil
	case tokIdent:
		switch strings.ToUpper(t.text) {
		case "TRUE":
			return true, nil
		case "FALSE":
			return false, nil
		case "DATE", "TIMESTAMP", "TIMESTAMP_NTZ":
			s := p.take()
			if s.kind != tokString {
				return nil, p.errAt(s, "expected a quoted "+strings.ToLower(t.text))
			}
			return s.text, nil
		case "NULL":
			return nil, p.errAt(t, "NULL cannot be compared (use IS NULL)")
		}
	}
	return nil, p.errAt(t, "expected a literal")
}
