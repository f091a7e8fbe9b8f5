package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decoder decodes a YAML node tree into Go values strictly: unknown keys,
// duplicate keys and values of the wrong shape are problems, reported with
// their path, and decoding goes on so that every problem is found.
type decoder struct {
	probs *Problems
	lines map[string]int // path -> line, for every key seen
	// budget is how many more nodes may be decoded; aliases are expanded,
	// so a small document of aliases to aliases (an alias bomb) would
	// otherwise grow without bound. Below zero, decoding has stopped.
	budget int
}

// minBudget is the node budget of a small document: ten times its own
// nodes, or this, whichever is more.
const minBudget = 100_000

func (d *decoder) add(path string, line int, format string, args ...any) {
	*d.probs = append(*d.probs, Problem{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.add(path, n.Line, "the document expands, through its aliases, to more nodes than it could mean (an alias bomb?): decoding stopped")
		}
		return
	}
	for n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	d.lines[path] = n.Line
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // "key:" with nothing: leave the zero value
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.add(path, n.Line, "expected a mapping, found %s", describe(n))
			return
		}
		fields := fieldsOf(v.Type())
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			key := k.Value
			kp := join(path, key)
			if seen[key] {
				d.add(kp, k.Line, "duplicate key %q", key)
				continue
			}
			seen[key] = true
			idx, ok := fields[key]
			if !ok {
				d.add(kp, k.Line, "unknown field %q%s", key, suggest(key, fields))
				continue
			}
			d.lines[kp] = k.Line
			d.decode(val, v.Field(idx), kp)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.add(path, n.Line, "expected a list, found %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.add(path, n.Line, "expected a mapping, found %s", describe(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, ev, join(path, k.Value))
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), ev)
		}
		v.Set(m)
	case reflect.Interface:
		if !d.spend(n) {
			return
		}
		var x any
		if err := n.Decode(&x); err != nil {
			d.add(path, n.Line, "%v", cleanYAMLError(err))
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		if n.Kind != yaml.ScalarNode {
			d.add(path, n.Line, "expected %s, found %s", kindName(v.Kind()), describe(n))
			return
		}
		if v.Kind() == reflect.String {
			v.SetString(n.Value) // any scalar reads as text: id: 123 is "123"
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.add(path, n.Line, "expected %s, found %q", kindName(v.Kind()), n.Value)
		}
	}
}

// spend charges the budget for every node under n, aliases expanded, as
// decoding n into a Go value will create them; it reports false, having
// added the problem, when the budget runs out.
func (d *decoder) spend(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for _, c := range n.Content {
		if d.budget--; d.budget < 0 {
			if d.budget == -1 {
				d.add("", c.Line, "the document expands, through its aliases, to more nodes than it could mean (an alias bomb?): decoding stopped")
			}
			return false
		}
		if !d.spend(c) {
			return false
		}
	}
	return true
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "something else"
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	}
	return k.String()
}

func cleanYAMLError(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// fieldsOf maps YAML keys to field indexes from the yaml struct tags.
func fieldsOf(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		m[name] = i
	}
	return m
}

// suggest returns ` (did you mean "x"?)` for the known key closest to key.
func suggest(key string, fields map[string]int) string {
	best, bestD := "", 3
	for k := range fields {
		if d := levenshtein(key, k); d < bestD || d == bestD && best != "" && k < best {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
