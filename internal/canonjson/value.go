package canonjson

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// AppendValue appends the canonical form of v to dst: the bytes Append
// would make of json.Marshal(v), made directly from v. Struct fields are
// written in name order from a plan made once per type; values the plan
// does not know (other json.Marshalers, non-string map keys, the ",string"
// option, embedded structs) go through encoding/json and Append. What it
// writes, Check accepts: embedded JSON (json.RawMessage, what encoding/json
// writes) and map keys are held to Check's rules, so member names that
// differ only in letter case are an error, not a record no reader takes.
// Options are as for Append (Omit applies to a top-level struct or map).
func AppendValue(dst []byte, v any, opts *Options) ([]byte, error) {
	if opts == nil {
		return appendValue(dst, reflect.ValueOf(v), "", nil)
	}
	return appendValue(dst, reflect.ValueOf(v), opts.Omit, opts.Encoded)
}

// strict is how AppendValue reads the JSON it embeds: as Check does, so
// that nothing is written that the strict reader would refuse.
var strict = &Options{FoldedNames: true}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
	marshal  = reflect.TypeFor[json.Marshaler]()
)

// appendValue appends v; omit and encoded apply to its members when it is
// a struct or a map (the top level), not to what it holds.
func appendValue(dst []byte, v reflect.Value, omit string, encoded []Member) ([]byte, error) {
	if !v.IsValid() {
		return append(dst, "null"...), nil
	}
	t := v.Type()
	switch {
	case t == timeType:
		tm := v.Interface().(time.Time)
		if y := tm.Year(); y < 0 || y >= 10000 {
			return dst, fmt.Errorf("canonjson: time %v: year outside [0,9999]", tm)
		}
		dst = append(dst, '"')
		return append(AppendTime(dst, tm), '"'), nil
	case t == rawType:
		raw := v.Bytes()
		if len(raw) == 0 {
			return append(dst, "null"...), nil
		}
		return Append(dst, raw, strict)
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		if t.Kind() == reflect.Pointer && t.Implements(marshal) && !t.Elem().Implements(marshal) {
			return viaJSON(dst, v)
		}
		return appendValue(dst, v.Elem(), omit, encoded)
	case reflect.Struct:
		if t.Implements(marshal) {
			return viaJSON(dst, v)
		}
		p, err := planOf(t)
		if err != nil {
			return viaJSON(dst, v)
		}
		dst = append(dst, '{')
		first := true
		for _, f := range p.fields {
			if omit != "" && f.name == omit {
				continue
			}
			fv := v.Field(f.index)
			if f.omitEmpty && isEmpty(fv) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, f.quoted...)
			if given, ok := member(encoded, f.name); ok {
				dst = append(dst, given...)
				continue
			}
			if dst, err = appendValue(dst, fv, "", nil); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case reflect.Map:
		if t.Implements(marshal) || t.Key().Kind() != reflect.String {
			return viaJSON(dst, v)
		}
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		type member struct {
			name string // as encoding/json writes it: invalid UTF-8 coerced
			key  reflect.Value
		}
		var ms []member
		for it := v.MapRange(); it.Next(); {
			ms = append(ms, member{coerce(it.Key().String()), it.Key()})
		}
		slices.SortFunc(ms, func(a, b member) int { return compareNames([]byte(a.name), []byte(b.name)) })
		if len(ms) > 1 {
			folded := make(map[string]string, len(ms))
			for _, m := range ms {
				f := fold(m.name)
				if prev, ok := folded[f]; ok && prev != m.name {
					return dst, fmt.Errorf("canonjson: map keys %q and %q differ only in letter case", prev, m.name)
				}
				folded[f] = m.name
			}
		}
		dst = append(dst, '{')
		first := true
		var err error
		for i, m := range ms {
			if i > 0 && m.name == ms[i-1].name {
				return dst, fmt.Errorf("canonjson: map keys %q and %q are one name in JSON", ms[i-1].key.String(), m.key.String())
			}
			if omit != "" && m.name == omit {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendString(dst, m.name)
			dst = append(dst, ':')
			if dst, err = appendValue(dst, v.MapIndex(m.key), "", nil); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case reflect.Slice, reflect.Array:
		if t.Implements(marshal) || t.Elem().Kind() == reflect.Uint8 {
			return viaJSON(dst, v) // []byte is base64 in encoding/json
		}
		if t.Kind() == reflect.Slice && v.IsNil() {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		var err error
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendValue(dst, v.Index(i), "", nil); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case reflect.String:
		if t.Implements(marshal) {
			return viaJSON(dst, v)
		}
		return appendValidString(dst, v.String()), nil
	case reflect.Bool:
		if v.Bool() {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := v.Int()
		if n > -1e15 && n < 1e15 {
			return strconv.AppendInt(dst, n, 10), nil
		}
		return AppendNumber(dst, float64(n)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n := v.Uint()
		if n < 1e15 {
			return strconv.AppendUint(dst, n, 10), nil
		}
		return AppendNumber(dst, float64(n)), nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return dst, fmt.Errorf("canonjson: unsupported value %v", f)
		}
		if t.Kind() == reflect.Float32 {
			return viaJSON(dst, v) // encoding/json prints float32 with 32-bit precision
		}
		return AppendNumber(dst, f), nil
	}
	return viaJSON(dst, v)
}

// member returns the encoded value given for the member name, if any.
func member(encoded []Member, name string) ([]byte, bool) {
	for _, m := range encoded {
		if m.Name == name && m.JSON != nil {
			return m.JSON, true
		}
	}
	return nil, false
}

// viaJSON encodes what the plan does not know with encoding/json, then
// canonicalizes it.
func viaJSON(dst []byte, v reflect.Value) ([]byte, error) {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return dst, err
	}
	return Append(dst, b, strict)
}

// appendValidString writes s as encoding/json does: each byte of invalid
// UTF-8 as U+FFFD.
func appendValidString(dst []byte, s string) []byte { return appendString(dst, coerce(s)) }

// coerce replaces each byte of invalid UTF-8 in s with U+FFFD.
func coerce(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// plan is how a struct type is written: its JSON fields in name order.
type plan struct {
	fields []field
}

type field struct {
	name      string
	quoted    []byte // "name":
	index     int
	omitEmpty bool
}

var plans sync.Map // reflect.Type -> *plan, or error

func planOf(t reflect.Type) (*plan, error) {
	if p, ok := plans.Load(t); ok {
		if err, bad := p.(error); bad {
			return nil, err
		}
		return p.(*plan), nil
	}
	p, err := makePlan(t)
	if err != nil {
		plans.Store(t, err)
		return nil, err
	}
	plans.Store(t, p)
	return p, nil
}

func makePlan(t reflect.Type) (*plan, error) {
	p := &plan{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous {
			return nil, fmt.Errorf("canonjson: %s embeds %s", t, sf.Type)
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		f := field{name: name, index: i}
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "omitempty":
				f.omitEmpty = true
			case "string", "omitzero":
				return nil, fmt.Errorf("canonjson: %s.%s uses ,%s", t, sf.Name, o)
			}
		}
		f.quoted = append(appendString(nil, name), ':')
		p.fields = append(p.fields, f)
	}
	slices.SortFunc(p.fields, func(a, b field) int { return compareNames([]byte(a.name), []byte(b.name)) })
	for i := 1; i < len(p.fields); i++ {
		if p.fields[i].name == p.fields[i-1].name {
			return nil, fmt.Errorf("canonjson: %s has two fields named %q", t, p.fields[i].name)
		}
	}
	return p, nil
}
