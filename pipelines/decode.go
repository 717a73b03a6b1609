package pipelines

import (
	"encoding"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file decodes YAML nodes into Go values strictly: every key must name a field (by its
// yaml tag), and every scalar must parse as the field's type; each problem is recorded at
// the node's line and column instead of aborting, so one pass reports everything.

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	nodeType        = reflect.TypeFor[yaml.Node]()
)

// decodeInto decodes n into the value v points to. Problems name the key path below n,
// after label (e.g. "stage load") when it is not empty.
func decodeInto(ps *problems, n *yaml.Node, v any, label string) {
	decodeValue(&decoder{ps: ps, label: label}, n, reflect.ValueOf(v).Elem(), "")
}

// decoder carries the problem list and the label that prefixes its messages.
type decoder struct {
	ps    *problems
	label string
}

// at records a problem at n, prefixed with the label and the key path.
func (d *decoder) at(n *yaml.Node, path, format string, args ...any) {
	prefix := d.label
	if path != "" {
		if prefix != "" {
			prefix += ": "
		}
		prefix += path
	}
	if prefix != "" {
		format = prefix + ": " + format
	}
	d.ps.at(n, "%s", fmt.Sprintf(format, args...))
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func decodeValue(d *decoder, n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		// An explicit null leaves the zero value, unless the type tells null apart.
		if v.CanAddr() {
			if u, ok := v.Addr().Interface().(interface{ UnmarshalYAMLNull() }); ok {
				u.UnmarshalYAMLNull()
			}
		}
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		decodeValue(d, n, v.Elem(), path)
		return
	}
	if v.Type() == nodeType {
		v.Set(reflect.ValueOf(*n))
		return
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			d.at(n, path, "expected a %s, got %s", typeName(v.Type()), kindName(n))
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.at(n, path, "%v", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		decodeStruct(d, n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.at(n, path, "expected a list of %s, got %s", typeName(v.Type().Elem()), kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			decodeValue(d, item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.at(n, path, "expected a mapping, got %s", kindName(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			kv := reflect.New(v.Type().Key()).Elem()
			decodeValue(d, k, kv, path)
			ev := reflect.New(v.Type().Elem()).Elem()
			decodeValue(d, val, ev, joinPath(path, k.Value))
			m.SetMapIndex(kv, ev)
		}
		v.Set(m)
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64:
		decodeScalar(d, n, v, path)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.at(n, path, "%v", err)
			return
		}
		v.Set(reflect.ValueOf(&x).Elem())
	default:
		d.at(n, path, "internal: cannot decode into %s", v.Type())
	}
}

func decodeScalar(d *decoder, n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.at(n, path, "expected %s, got %s", typeName(v.Type()), kindName(n))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(n.Value)
	case reflect.Bool:
		if !isBoolWord(n.Value) {
			d.at(n, path, "expected true or false, got %q", n.Value)
			return
		}
		v.SetBool(strings.EqualFold(n.Value, "true"))
	case reflect.Int, reflect.Int64, reflect.Int32:
		i, err := strconv.ParseInt(n.Value, 10, v.Type().Bits())
		if err != nil {
			d.at(n, path, "expected a whole number, got %q", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			d.at(n, path, "expected a number, got %q", n.Value)
			return
		}
		v.SetFloat(f)
	}
}

func isBoolWord(s string) bool {
	switch s {
	case "true", "false", "True", "False", "TRUE", "FALSE":
		return true
	}
	return false
}

// decodeStruct decodes a mapping into a struct by yaml tags; unknown keys are problems.
func decodeStruct(d *decoder, n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.at(n, path, "expected a mapping with keys %s, got %s", strings.Join(yamlKeys(v.Type()), ", "), kindName(n))
		return
	}
	fields := fieldsByKey(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		idx, ok := fields[k.Value]
		if !ok {
			d.at(k, path, "unknown key %q; expected one of %s", k.Value, strings.Join(yamlKeys(v.Type()), ", "))
			continue
		}
		decodeValue(d, val, v.Field(idx), joinPath(path, k.Value))
	}
}

// fieldsByKey maps yaml tag names to field indexes.
func fieldsByKey(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		m[name] = i
	}
	return m
}

func yamlKeys(t reflect.Type) []string {
	var keys []string
	for k := range fieldsByKey(t) {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		if t.Name() == "Duration" {
			return "duration (e.g. 90s, 15m, 7d)"
		}
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		if t.Name() == "Duration" {
			return "duration (e.g. 90s, 15m, 7d)"
		}
		return "whole number"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "list"
	case reflect.Map, reflect.Struct:
		return "mapping"
	}
	return t.String()
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// lookup finds the node for a field path such as "csv.delimiter" or "keys[1]" below a
// mapping node; it returns the deepest node it reached (the key node for a mapping entry).
func lookup(n *yaml.Node, path string) *yaml.Node {
	cur := n
	for _, part := range strings.Split(path, ".") {
		name, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			name = part[:i]
			idx, _ = strconv.Atoi(part[i+1 : len(part)-1])
		}
		key, val := mapEntry(cur, name)
		if val == nil {
			return cur
		}
		cur = val
		if idx >= 0 {
			if val.Kind == yaml.SequenceNode && idx < len(val.Content) {
				cur = val.Content[idx]
				continue
			}
			return val
		}
		if val.Kind == yaml.ScalarNode || val.Kind == yaml.SequenceNode && len(val.Content) == 0 {
			return val
		}
		_ = key
	}
	return cur
}

// mapEntry returns the key and value nodes of key name in a mapping node.
func mapEntry(n *yaml.Node, name string) (key, val *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)

// expandEnv replaces ${VAR} and ${VAR:-default} in every scalar value below n (keys are
// left alone), noting in raw the value as written of each node it changes. An unset
// variable without a default is a problem at its node; with lenient, it leaves the value
// as written instead. Nodes in raw already are left alone.
func expandEnv(ps *problems, n *yaml.Node, getenv func(string) (string, bool), raw map[*yaml.Node]string, lenient bool) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			expandEnv(ps, c, getenv, raw, lenient)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			expandEnv(ps, n.Content[i+1], getenv, raw, lenient)
		}
	case yaml.ScalarNode:
		if !envRef.MatchString(n.Value) {
			return
		}
		if _, done := raw[n]; done {
			return // expanded already (the stages of a TablesOnly load)
		}
		raw[n] = n.Value
		unset := false
		value := envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			// As the shell does: ${VAR:-default} takes the default when VAR is unset or
			// empty; ${VAR} is the value, empty or not, and an error when unset.
			m := envRef.FindStringSubmatch(ref)
			v, ok := getenv(m[1])
			switch {
			case strings.Contains(ref, ":-") && (!ok || v == ""):
				return m[2]
			case ok:
				return v
			}
			if !lenient {
				ps.at(n, "environment variable %s is not set (write ${%s:-default} to give a default)", m[1], m[1])
			}
			unset = true
			return ""
		})
		if unset && lenient {
			return // left as written
		}
		n.Value = value
		if n.Tag == "!!null" || n.Tag == "" {
			n.Tag = "!!str"
		}
	}
}

// osLookupEnv is the default environment.
func osLookupEnv(k string) (string, bool) { return os.LookupEnv(k) }

// checkDuplicateKeys reports every mapping key written twice below n, at the second with
// the line of the first (YAML decoders would silently keep the last).
func checkDuplicateKeys(ps *problems, n *yaml.Node) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			checkDuplicateKeys(ps, c)
		}
	case yaml.MappingNode:
		first := make(map[string]*yaml.Node, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode && k.Value != "<<" {
				if prev, ok := first[k.Value]; ok {
					ps.at(k, "duplicate key %q: already set at line %d, column %d (a key may appear once in a mapping)", k.Value, prev.Line, prev.Column)
				} else {
					first[k.Value] = k
				}
			}
			checkDuplicateKeys(ps, n.Content[i+1])
		}
	}
}
