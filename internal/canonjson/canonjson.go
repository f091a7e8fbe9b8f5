// Package canonjson writes JSON in the canonical form of RFC 8785 (the
// JSON Canonicalization Scheme): no whitespace, object members sorted by
// the UTF-16 code units of their names, strings with the minimal escapes,
// numbers as ECMAScript prints them. Equal JSON values have equal
// canonical bytes, so hashes and digests over them do not depend on who
// encoded the value.
//
// It is also the strict reader for JSON that crosses a trust boundary
// (audit records, tool and intent arguments, input lines): a duplicate
// member name, two names that differ only in letter case, invalid UTF-8,
// a lone surrogate, a number out of range or data after the value is an
// error naming the byte offset, never silently repaired.
//
//	out, err := canonjson.Append(nil, []byte(`{"b": 1, "a": [true, 1.50]}`), nil)
//	// out == `{"a":[true,1.5],"b":1}`
package canonjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Depth limits. A value that comes from outside — arguments, payloads,
// request bodies, tool outputs, items — may nest MaxValueDepth deep: every
// door checks it with Check. A stored document — an audit record, which
// holds such values a few levels inside itself — is read up to MaxDepth
// (CheckDocument). The gap between the two is what keeps everything that
// was accepted readable back.
const (
	MaxValueDepth = 64
	MaxDepth      = 128
)

// Options adjust Append. nil means the defaults: duplicate names are
// refused, names that differ only in case are allowed, nothing is left out.
type Options struct {
	// FoldedNames refuses two member names of one object that are equal
	// under Unicode case folding ("text" and "Text"): Go's encoding/json
	// reads them as one field, other readers as two.
	FoldedNames bool
	// Omit leaves out the top-level member with this name, if any (the
	// hash of a record that carries its own hash).
	Omit string
	// Encoded gives top-level members of a struct already in canonical
	// form, as AppendValue writes their values: AppendValue writes these
	// bytes as they are instead of encoding the value again (JSON made
	// once and carried through, for a row and a record alike). A member
	// whose value is empty (omitempty) is left out whatever is given.
	// Append ignores it.
	Encoded []Member
}

// Member is a member's name and its value in canonical form.
type Member struct {
	Name string
	JSON []byte
}

// Error says what is wrong with the input and where.
type Error struct {
	Offset int    // byte offset in the input
	Path   string // the member or element being read there (payload.items[2]), "" for the top
	Msg    string
}

func (e *Error) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("JSON at byte %d (%s): %s", e.Offset, e.Path, e.Msg)
	}
	return fmt.Sprintf("JSON at byte %d: %s", e.Offset, e.Msg)
}

// located adds to err, an *Error about b, the path of what was being read
// where it is: worked out only for an error, by reading b again.
func located(err error, b []byte) error {
	if e, ok := err.(*Error); ok && e.Path == "" {
		e.Path = PathAt(b, e.Offset)
	}
	return err
}

// maxPath bounds a path in an error message.
const maxPath = 160

// PathAt returns the JSON path (a.b[2]) of the value being read at byte
// offset in b: the member or element that holds that byte, or the object
// whose members were being compared when the reader stopped after it. It
// reads b with encoding/json's tokenizer, which accepts what the strict
// reader refuses (repeated names); it stops at the first byte it cannot
// read, and returns the path it had reached.
func PathAt(b []byte, offset int) string {
	type frame struct {
		object  bool
		key     string
		index   int
		wantKey bool
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()   // a number out of float64's range is still a token
	begin := func() { // a value starts in the innermost container
		if n := len(stack); n > 0 && !stack[n-1].object {
			stack[n-1].index++
		}
	}
	end := func() { // a value ended in the innermost container
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		here := int(dec.InputOffset()) > offset // the token holds the offset (a number's end is known one byte later)
		n := len(stack)
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				begin()
				stack = append(stack, frame{object: v == '{', index: -1, wantKey: v == '{'})
			default:
				if here {
					break // the container it closes
				}
				stack = stack[:n-1]
				end()
			}
		case string:
			if n > 0 && stack[n-1].object && stack[n-1].wantKey {
				stack[n-1].key, stack[n-1].wantKey = v, false
				break
			}
			begin()
			if !here {
				end()
			}
		default:
			begin()
			if !here {
				end()
			}
		}
		if here {
			break
		}
	}
	var out strings.Builder
	for _, f := range stack {
		if f.object && f.wantKey || !f.object && f.index < 0 {
			break // between members or elements: the container itself
		}
		if f.object {
			if out.Len() > 0 {
				out.WriteByte('.')
			}
			out.WriteString(f.key)
		} else {
			fmt.Fprintf(&out, "[%d]", f.index)
		}
		if out.Len() > maxPath {
			return out.String()[:maxPath] + "…"
		}
	}
	return out.String()
}

// Append appends the canonical form of the JSON value in b to dst.
func Append(dst, b []byte, opts *Options) ([]byte, error) {
	p := pool.Get().(*parser)
	defer pool.Put(p)
	p.reset(b, opts)
	root, err := p.parse()
	if err != nil {
		return dst, located(err, b)
	}
	w := writer{p: p, out: dst}
	if err := w.value(root, true); err != nil {
		return dst, err
	}
	return w.out, nil
}

// Check reports what is wrong with b as a strict JSON value from outside
// (with FoldedNames, nested at most MaxValueDepth deep), or nil: what
// every door checks before a value is kept.
func Check(b []byte) error { return check(b, MaxValueDepth) }

// CheckDocument reports what is wrong with b as a strict stored document
// (with FoldedNames, nested at most MaxDepth deep), or nil: what the
// reader of audit records checks.
func CheckDocument(b []byte) error { return check(b, MaxDepth) }

func check(b []byte, depth int) error {
	p := pool.Get().(*parser)
	defer pool.Put(p)
	p.reset(b, &Options{FoldedNames: true})
	p.maxDepth = depth
	_, err := p.parse()
	if err != nil {
		return located(err, b)
	}
	return nil
}

var pool = sync.Pool{New: func() any { return new(parser) }}

// Node kinds.
const (
	kindObject = iota
	kindArray
	kindString
	kindNumber
	kindLiteral
)

// node is one parsed value. Strings keep their span in the input (inside
// the quotes); a string with escapes keeps its decoded text in the
// parser's text buffer instead. Containers keep their children as a run of
// kids: values for arrays, name and value pairs for objects.
type node struct {
	kind       uint8
	decoded    bool // a string whose bytes are in p.text, not the input
	ascii      bool // a string of ASCII bytes only
	start, end int32
	first, n   int32 // children in p.kids[first : first+n]
}

type parser struct {
	in    []byte
	i     int
	opts  Options
	nodes []node
	kids  []int32
	stack []int32
	text  []byte   // decoded strings with escapes
	names [][]byte // scratch: one object's member names while sorting
	depth int
	// maxDepth is the deepest nesting accepted
	maxDepth int
}

func (p *parser) reset(b []byte, opts *Options) {
	p.in, p.i, p.depth, p.maxDepth = b, 0, 0, MaxDepth
	p.opts = Options{}
	if opts != nil {
		p.opts = *opts
	}
	p.nodes, p.kids, p.stack, p.text = p.nodes[:0], p.kids[:0], p.stack[:0], p.text[:0]
}

func (p *parser) fail(format string, args ...any) error {
	return &Error{Offset: p.i, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) space() {
	for p.i < len(p.in) {
		switch p.in[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) parse() (int32, error) {
	p.space()
	root, err := p.value()
	if err != nil {
		return 0, err
	}
	p.space()
	if p.i != len(p.in) {
		return 0, p.fail("data after the JSON value")
	}
	return root, nil
}

func (p *parser) add(n node) int32 {
	p.nodes = append(p.nodes, n)
	return int32(len(p.nodes) - 1)
}

func (p *parser) value() (int32, error) {
	if p.i >= len(p.in) {
		if len(p.in) == 0 {
			return 0, p.fail("empty input")
		}
		return 0, p.fail("unexpected end of input")
	}
	switch c := p.in[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	default:
		return 0, p.fail("unexpected character %q", c)
	}
}

func (p *parser) literal(word string) (int32, error) {
	if len(p.in)-p.i < len(word) || string(p.in[p.i:p.i+len(word)]) != word {
		return 0, p.fail("invalid literal")
	}
	start := p.i
	p.i += len(word)
	return p.add(node{kind: kindLiteral, start: int32(start), end: int32(p.i)}), nil
}

func (p *parser) enter() error {
	if p.depth++; p.depth > p.maxDepth {
		return p.fail("nested deeper than %d", p.maxDepth)
	}
	return nil
}

// children moves the children pushed since mark from the stack to kids.
func (p *parser) children(mark int) (first, n int32) {
	first = int32(len(p.kids))
	p.kids = append(p.kids, p.stack[mark:]...)
	n = int32(len(p.stack) - mark)
	p.stack = p.stack[:mark]
	return first, n
}

func (p *parser) array() (int32, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	p.i++ // [
	mark := len(p.stack)
	p.space()
	if p.i < len(p.in) && p.in[p.i] == ']' {
		p.i++
	} else {
		for {
			p.space()
			v, err := p.value()
			if err != nil {
				return 0, err
			}
			p.stack = append(p.stack, v)
			p.space()
			if p.i >= len(p.in) {
				return 0, p.fail("unexpected end of input in an array")
			}
			if c := p.in[p.i]; c == ']' {
				p.i++
				break
			} else if c != ',' {
				return 0, p.fail("expected , or ] in an array, found %q", c)
			}
			p.i++
		}
	}
	p.depth--
	first, n := p.children(mark)
	return p.add(node{kind: kindArray, first: first, n: n}), nil
}

func (p *parser) object() (int32, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	p.i++ // {
	mark := len(p.stack)
	p.space()
	if p.i < len(p.in) && p.in[p.i] == '}' {
		p.i++
	} else {
		for {
			p.space()
			if p.i >= len(p.in) || p.in[p.i] != '"' {
				return 0, p.fail("expected a member name in an object")
			}
			k, err := p.str()
			if err != nil {
				return 0, err
			}
			p.space()
			if p.i >= len(p.in) || p.in[p.i] != ':' {
				return 0, p.fail("expected : after a member name")
			}
			p.i++
			p.space()
			v, err := p.value()
			if err != nil {
				return 0, err
			}
			p.stack = append(p.stack, k, v)
			p.space()
			if p.i >= len(p.in) {
				return 0, p.fail("unexpected end of input in an object")
			}
			if c := p.in[p.i]; c == '}' {
				p.i++
				break
			} else if c != ',' {
				return 0, p.fail("expected , or } in an object, found %q", c)
			}
			p.i++
		}
	}
	p.depth--
	at := p.i
	first, n := p.children(mark)
	if err := p.sortMembers(first, n/2); err != nil {
		p.i = at
		return 0, err
	}
	return p.add(node{kind: kindObject, first: first, n: n}), nil
}

// str parses a string. It decodes escapes into p.text and checks UTF-8.
func (p *parser) str() (int32, error) {
	p.i++ // "
	start := p.i
	ascii := true
	in := p.in
	for p.i < len(in) {
		i := p.i
		for i < len(in) && plainByte[in[i]] {
			i++
		}
		if p.i = i; i == len(in) {
			break
		}
		c := in[i]
		switch {
		case c == '"':
			n := node{kind: kindString, ascii: ascii, start: int32(start), end: int32(p.i)}
			if !ascii && !utf8.Valid(p.in[start:p.i]) {
				return 0, p.fail("invalid UTF-8 in a string")
			}
			p.i++
			return p.add(n), nil
		case c == '\\':
			return p.escaped(start, ascii)
		case c < 0x20:
			return 0, p.fail("control character %#02x in a string", c)
		case c >= 0x80:
			ascii = false
		}
		p.i++
	}
	return 0, p.fail("unterminated string")
}

// plainByte marks the bytes a string's scan passes over without a look:
// printable ASCII but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escaped finishes a string that has escapes, from its start, decoding it
// into p.text; ascii says whether the bytes before the first escape were.
func (p *parser) escaped(start int, ascii bool) (int32, error) {
	from := len(p.text)
	p.text = append(p.text, p.in[start:p.i]...)
	for p.i < len(p.in) {
		c := p.in[p.i]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(p.text[from:]) {
				return 0, p.fail("invalid UTF-8 in a string")
			}
			p.i++
			return p.add(node{kind: kindString, decoded: true, ascii: ascii, start: int32(from), end: int32(len(p.text))}), nil
		case c < 0x20:
			return 0, p.fail("control character %#02x in a string", c)
		case c != '\\':
			if c >= 0x80 {
				ascii = false
			}
			p.text = append(p.text, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.in) {
			return 0, p.fail("unterminated escape")
		}
		e := p.in[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			p.text = append(p.text, e)
		case 'b':
			p.text = append(p.text, '\b')
		case 'f':
			p.text = append(p.text, '\f')
		case 'n':
			p.text = append(p.text, '\n')
		case 'r':
			p.text = append(p.text, '\r')
		case 't':
			p.text = append(p.text, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return 0, err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || p.i+1 >= len(p.in) || p.in[p.i] != '\\' || p.in[p.i+1] != 'u' {
					return 0, p.fail("lone surrogate \\u%04x", r)
				}
				p.i += 2
				r2, err := p.hex4()
				if err != nil {
					return 0, err
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return 0, p.fail("lone surrogate in a \\u pair")
				}
			}
			if r >= 0x80 {
				ascii = false
			}
			p.text = utf8.AppendRune(p.text, r)
		default:
			return 0, p.fail("invalid escape \\%c", e)
		}
	}
	return 0, p.fail("unterminated string")
}

func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.in) {
		return 0, p.fail("short \\u escape")
	}
	var r rune
	for _, c := range p.in[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, p.fail("invalid \\u escape")
		}
	}
	p.i += 4
	return r, nil
}

func (p *parser) number() (int32, error) {
	start := p.i
	if p.in[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.in) && p.in[p.i] >= '0' && p.in[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if n := digits(); n == 0 {
		return 0, p.fail("invalid number")
	} else if n > 1 && p.in[intStart] == '0' {
		return 0, p.fail("number with a leading zero")
	}
	if p.i < len(p.in) && p.in[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return 0, p.fail("invalid number")
		}
	}
	if p.i < len(p.in) && (p.in[p.i] == 'e' || p.in[p.i] == 'E') {
		p.i++
		if p.i < len(p.in) && (p.in[p.i] == '+' || p.in[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return 0, p.fail("invalid number")
		}
	}
	if t := p.in[start:p.i]; !plainInteger(t) {
		if f, err := strconv.ParseFloat(string(t), 64); err != nil || math.IsInf(f, 0) {
			p.i = start
			return 0, p.fail("number %s is out of range", t)
		}
	}
	return p.add(node{kind: kindNumber, start: int32(start), end: int32(p.i)}), nil
}

// name returns a member name's decoded bytes.
func (p *parser) name(k int32) []byte {
	n := &p.nodes[k]
	if n.decoded {
		return p.text[n.start:n.end]
	}
	return p.in[n.start:n.end]
}

// sortMembers sorts an object's name/value pairs by name in UTF-16 code
// unit order and refuses duplicate (and, with FoldedNames, case-folded
// duplicate) names.
func (p *parser) sortMembers(first, pairs int32) error {
	kids := p.kids[first : first+2*pairs]
	n := int(pairs)
	names := p.names[:0]
	for i := 0; i < n; i++ {
		names = append(names, p.name(kids[2*i]))
	}
	p.names = names
	swap := func(a, b int) {
		names[a], names[b] = names[b], names[a]
		kids[2*a], kids[2*b] = kids[2*b], kids[2*a]
		kids[2*a+1], kids[2*b+1] = kids[2*b+1], kids[2*a+1]
	}
	if n <= 16 {
		for i := 1; i < n; i++ {
			for j := i; j > 0 && compareNames(names[j], names[j-1]) < 0; j-- {
				swap(j, j-1)
			}
		}
	} else {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return compareNames(names[a], names[b]) })
		sorted := make([]int32, 0, len(kids))
		sortedNames := make([][]byte, 0, n)
		for _, i := range idx {
			sorted = append(sorted, kids[2*i], kids[2*i+1])
			sortedNames = append(sortedNames, names[i])
		}
		copy(kids, sorted)
		copy(names, sortedNames)
	}
	for i := 1; i < n; i++ {
		if string(names[i]) == string(names[i-1]) {
			return &Error{Offset: p.i - 1, Msg: fmt.Sprintf("duplicate member name %q", names[i])} // at the object's }
		}
	}
	if p.opts.FoldedNames {
		return p.foldedNames(kids, names)
	}
	return nil
}

// foldedNames refuses two names equal under case folding. Names of
// lower-case ASCII letters, digits and punctuation cannot collide once
// exact duplicates are gone, so most objects need no folding at all.
func (p *parser) foldedNames(kids []int32, names [][]byte) error {
	plain := true
	for i, name := range names {
		if !p.nodes[kids[2*i]].ascii {
			plain = false
			break
		}
		for _, c := range name {
			if c >= 'A' && c <= 'Z' {
				plain = false
				break
			}
		}
	}
	if plain {
		return nil
	}
	seen := make(map[string]string, len(names))
	for _, b := range names {
		name := string(b)
		f := fold(name)
		if other, dup := seen[f]; dup {
			return &Error{Offset: p.i - 1, Msg: fmt.Sprintf("member names %q and %q differ only in letter case", other, name)} // at the object's }
		}
		seen[f] = name
	}
	return nil
}

// fold maps a name to its case-folded form (simple folding, rune by rune,
// to the smallest rune of its folding orbit).
func fold(s string) string {
	b := make([]rune, 0, len(s))
	for _, r := range s {
		b = append(b, foldRune(r))
	}
	return string(b)
}

func foldRune(r rune) rune {
	min := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < min {
			min = f
		}
	}
	return min
}

// compareNames orders names by their UTF-16 code units, as RFC 8785
// requires. UTF-8 byte order agrees with it except between runes above
// U+FFFF (surrogate pairs in UTF-16) and runes U+E000..U+FFFF.
func compareNames(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		if a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf {
			if a[0] != b[0] {
				return int(a[0]) - int(b[0])
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			return int(utf16Unit(ra)) - int(utf16Unit(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Unit is the first UTF-16 code unit of r.
func utf16Unit(r rune) rune {
	if r >= 0x10000 {
		return 0xd800 + (r-0x10000)>>10
	}
	return r
}

type writer struct {
	p   *parser
	out []byte
}

func (w *writer) value(k int32, top bool) error {
	n := &w.p.nodes[k]
	switch n.kind {
	case kindLiteral:
		w.out = append(w.out, w.p.in[n.start:n.end]...)
	case kindNumber:
		return w.number(n)
	case kindString:
		w.string(k)
	case kindArray:
		w.out = append(w.out, '[')
		for i := int32(0); i < n.n; i++ {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			if err := w.value(w.p.kids[n.first+i], false); err != nil {
				return err
			}
		}
		w.out = append(w.out, ']')
	case kindObject:
		w.out = append(w.out, '{')
		comma := false
		for i := int32(0); i < n.n; i += 2 {
			name := w.p.kids[n.first+i]
			if top && w.p.opts.Omit != "" && string(w.p.name(name)) == w.p.opts.Omit {
				continue
			}
			if comma {
				w.out = append(w.out, ',')
			}
			comma = true
			w.string(name)
			w.out = append(w.out, ':')
			if err := w.value(w.p.kids[n.first+i+1], false); err != nil {
				return err
			}
		}
		w.out = append(w.out, '}')
	}
	return nil
}

// string writes a parsed string canonically.
func (w *writer) string(k int32) {
	s := w.p.name(k)
	if !w.p.nodes[k].decoded {
		// no escapes in the input: no control characters, quotes or
		// backslashes either, so the bytes are canonical as they are
		w.out = append(w.out, '"')
		w.out = append(w.out, s...)
		w.out = append(w.out, '"')
		return
	}
	w.out = appendString(w.out, s)
}

// AppendString appends s as a canonical JSON string. Invalid UTF-8 is
// written as it is: check s first where it may hold any bytes.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// appendString writes a string with the escapes of RFC 8785: \" \\ \b \f
// \n \r \t, \u00xx for other control characters, every other rune as it is.
// Runs of bytes that need no escape are copied whole.
func appendString[S ~string | ~[]byte](out []byte, s S) []byte {
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !escaped[c] {
			continue
		}
		out = append(out, s[start:i]...)
		start = i + 1
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// escaped marks the bytes a JSON string escapes: control characters, the
// quote and the backslash.
var escaped = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// number writes a number as ECMAScript's Number.prototype.toString does:
// integers of up to 15 digits as they are, anything else through float64.
func (w *writer) number(n *node) error {
	t := w.p.in[n.start:n.end]
	if plainInteger(t) {
		if string(t) == "-0" {
			t = t[1:]
		}
		w.out = append(w.out, t...)
		return nil
	}
	f, err := strconv.ParseFloat(string(t), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return &Error{Offset: int(n.start), Msg: fmt.Sprintf("number %s is out of range", t)}
	}
	w.out = AppendNumber(w.out, f)
	return nil
}

func plainInteger(t []byte) bool {
	d := t
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// AppendNumber appends f as ECMAScript prints a number (RFC 8785 §3.2.2.3):
// shortest round-trip digits; plain notation from 1e-6 up to 1e21,
// exponential (1e+21, 1.5e-7) outside it; -0 as 0. f must be finite.
func AppendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	if f >= 1e-6 && f < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go writes e+07 / e-07; ECMAScript writes e+7 / e-7
	for i := start; i < len(dst); i++ {
		if dst[i] == 'e' && i+3 < len(dst) && dst[i+2] == '0' {
			return append(dst[:i+2], dst[i+3:]...)
		}
	}
	return dst
}
