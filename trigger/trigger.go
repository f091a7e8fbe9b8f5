// Package trigger parses and matches trigger patterns: the small grammar in
// which a configuration says which whole utterances fire a command.
//
// A pattern is a sequence of
//
//	word          a literal, compared after normalization ("Don't" is "dont")
//	(a|b c|d)     one of the alternatives, each a sequence
//	[optional]    a sequence that may be absent; alternatives inside need
//	              parentheses: [(a|b)]
//	{item}        the slot: one or more words whose text is resolved;
//	              {item}'s is its possessive ("open {item}'s account")
//
// with at most one slot, not inside a group. A pattern matches only a whole
// utterance. Patterns are expanded at parse time into their phrasings (a
// literal prefix, the slot, a literal suffix), so matching never backtracks:
//
//	p, _ := trigger.Parse("(switch|change) [over] to [the] {item} mode")
//	ph, start, end, ok := p.Match(strings.Fields("switch to the ddr mode"))
//	// ok, words[start:end] == ["ddr"]
package trigger

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/resolve"
)

// MaxPhrasings bounds how many concrete phrasings one pattern may expand to.
const MaxPhrasings = 1024

// Pattern is a parsed trigger.
type Pattern struct {
	Source    string     // the pattern as written
	SlotName  string     // the slot's name, "" when the pattern has no slot
	Phrasings []Phrasing // every concrete phrasing, preferred first
}

// HasSlot reports whether the pattern has a slot.
func (p *Pattern) HasSlot() bool { return p.SlotName != "" }

// Phrasing is one concrete form of a pattern: literal words, optionally
// followed by the slot and more literal words.
type Phrasing struct {
	Prefix []string
	Slot   bool
	Suffix []string
	// Possessive: the slot is written {item}'s ("open {item}'s account"):
	// the utterance's last slot word ends with the s normalization joins
	// to it ("mira holm's" is "mira holms"), which is not the item's.
	Possessive bool
}

// Match reports whether the words (normalized) are exactly this phrasing.
// With a slot, words[start:end] is the slot's text, never empty.
func (ph *Phrasing) Match(words []string) (start, end int, ok bool) {
	if !ph.Slot {
		return 0, 0, slices.Equal(words, ph.Prefix)
	}
	n := len(ph.Prefix) + len(ph.Suffix)
	if len(words) <= n {
		return 0, 0, false
	}
	if !slices.Equal(words[:len(ph.Prefix)], ph.Prefix) || !slices.Equal(words[len(words)-len(ph.Suffix):], ph.Suffix) {
		return 0, 0, false
	}
	if last := words[len(words)-len(ph.Suffix)-1]; ph.Possessive && (len(last) < 2 || last[len(last)-1] != 's') {
		return 0, 0, false
	}
	return len(ph.Prefix), len(words) - len(ph.Suffix), true
}

// Match tries the phrasings in order and returns the first that matches.
func (p *Pattern) Match(words []string) (ph *Phrasing, start, end int, ok bool) {
	for i := range p.Phrasings {
		if s, e, ok := p.Phrasings[i].Match(words); ok {
			return &p.Phrasings[i], s, e, true
		}
	}
	return nil, 0, 0, false
}

// SyntaxError is a pattern that does not parse.
type SyntaxError struct {
	Pattern string
	Col     int // 1-based byte column of the problem
	Msg     string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("trigger %q, column %d: %s", e.Pattern, e.Col, e.Msg)
}

// node is a parsed element.
type node struct {
	kind byte     // 'w' word, 'a' alternatives, 'o' optional, 's' slot
	word string   // 'w'
	alts [][]node // 'a': the alternatives; 'o': one sequence
	name string   // 's'
	poss bool     // 's': written {name}'s
	col  int
}

type parser struct {
	src  string
	pos  int
	slot string
}

// Limits of a pattern: a trigger matches a whole utterance, and a longer
// pattern only costs time to expand and match.
const (
	MaxPatternBytes = 512
	MaxPatternWords = 48
)

// Parse parses a trigger pattern.
func Parse(src string) (*Pattern, error) {
	if len(src) > MaxPatternBytes {
		return nil, &SyntaxError{Pattern: src[:40] + "…", Col: MaxPatternBytes + 1, Msg: fmt.Sprintf("pattern is %d bytes; the limit is %d", len(src), MaxPatternBytes)}
	}
	if n := len(strings.FieldsFunc(src, func(r rune) bool { return strings.ContainsRune(" \t()[]{}|", r) })); n > MaxPatternWords {
		return nil, &SyntaxError{Pattern: src, Col: 1, Msg: fmt.Sprintf("pattern has %d words; the limit is %d", n, MaxPatternWords)}
	}
	p := &parser{src: src}
	seq, err := p.seq(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(src) {
		return nil, p.errf(p.pos, "unexpected %q", src[p.pos])
	}
	pat := &Pattern{Source: src, SlotName: p.slot}
	out := []Phrasing{{}}
	if out, err = expand(seq, out); err != nil {
		return nil, &SyntaxError{Pattern: src, Col: 1, Msg: err.Error()}
	}
	for _, ph := range out {
		if len(ph.Prefix) == 0 && len(ph.Suffix) == 0 && !ph.Slot {
			return nil, p.errf(0, "pattern can match an empty utterance")
		}
		if ph.Slot && len(ph.Prefix) == 0 && len(ph.Suffix) == 0 {
			return nil, p.errf(0, "pattern is only a slot: it would match every utterance")
		}
	}
	pat.Phrasings = out
	return pat, nil
}

func (p *parser) errf(pos int, format string, args ...any) error {
	return &SyntaxError{Pattern: p.src, Col: pos + 1, Msg: fmt.Sprintf(format, args...)}
}

// seq parses elements until a closing bracket or '|' (depth > 0) or the end.
func (p *parser) seq(depth int) ([]node, error) {
	var out []node
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '(':
			start := p.pos
			p.pos++
			var alts [][]node
			for {
				alt, err := p.seq(depth + 1)
				if err != nil {
					return nil, err
				}
				if len(alt) == 0 {
					return nil, p.errf(p.pos, "empty alternative in group opened at column %d", start+1)
				}
				alts = append(alts, alt)
				if p.pos >= len(p.src) {
					return nil, p.errf(start, "unclosed '('")
				}
				if p.src[p.pos] == '|' {
					p.pos++
					continue
				}
				if p.src[p.pos] != ')' {
					return nil, p.errf(p.pos, "expected ')' or '|', found %q", p.src[p.pos])
				}
				p.pos++
				break
			}
			out = append(out, node{kind: 'a', alts: alts, col: start})
		case c == '[':
			start := p.pos
			p.pos++
			inner, err := p.seq(depth + 1)
			if err != nil {
				return nil, err
			}
			if p.pos < len(p.src) && p.src[p.pos] == '|' {
				return nil, p.errf(p.pos, "alternatives inside '[ ]' need '( )': write [(a|b)] for an optional choice, as in \"play [(the|a)] {item}\"")
			}
			if p.pos >= len(p.src) || p.src[p.pos] != ']' {
				return nil, p.errf(start, "unclosed '['")
			}
			p.pos++
			if len(inner) == 0 {
				return nil, p.errf(start, "empty '[]'")
			}
			out = append(out, node{kind: 'o', alts: [][]node{inner}, col: start})
		case c == '{':
			start := p.pos
			end := strings.IndexByte(p.src[p.pos:], '}')
			if end < 0 {
				return nil, p.errf(start, "unclosed '{'")
			}
			name := p.src[p.pos+1 : p.pos+end]
			if !validSlotName(name) {
				return nil, p.errf(start, "slot name %q: use letters, digits and '_'", name)
			}
			if depth > 0 {
				return nil, p.errf(start, "slot {%s} inside a group or optional part", name)
			}
			if p.slot != "" {
				return nil, p.errf(start, "second slot {%s}: a command has exactly one parameter", name)
			}
			if len(out) > 0 && out[len(out)-1].kind == 's' {
				return nil, p.errf(start, "two slots in a row")
			}
			p.slot = name
			p.pos += end + 1
			poss := false
			for _, ap := range []string{"'s", "’s"} {
				if rest := p.src[p.pos:]; strings.HasPrefix(rest, ap) && (len(rest) == len(ap) || strings.ContainsRune(" \t()[]|", rune(rest[len(ap)]))) {
					p.pos += len(ap)
					poss = true
				}
			}
			out = append(out, node{kind: 's', name: name, poss: poss, col: start})
		case c == ')' || c == '|' || c == ']':
			if depth == 0 {
				return nil, p.errf(p.pos, "unexpected %q", c)
			}
			return out, nil
		case c == '}':
			return nil, p.errf(p.pos, "unexpected '}'")
		default:
			start := p.pos
			for p.pos < len(p.src) && !strings.ContainsRune(" \t()[]{}|", rune(p.src[p.pos])) {
				p.pos++
			}
			for _, w := range resolve.Fields(nil, resolve.Normalize(p.src[start:p.pos])) {
				out = append(out, node{kind: 'w', word: w, col: start})
			}
		}
	}
	if depth > 0 {
		return out, nil // the caller reports the unclosed bracket
	}
	return out, nil
}

func validSlotName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// expand appends the phrasings of seq to each partial phrasing in acc.
func expand(seq []node, acc []Phrasing) ([]Phrasing, error) {
	for _, n := range seq {
		switch n.kind {
		case 'w':
			for i := range acc {
				acc[i] = acc[i].with(n.word)
			}
		case 's':
			for i := range acc {
				acc[i].Slot, acc[i].Possessive = true, n.poss
			}
		case 'a', 'o':
			var next []Phrasing
			for _, alt := range n.alts {
				part, err := expand(alt, clonePhrasings(acc))
				if err != nil {
					return nil, err
				}
				next = append(next, part...)
			}
			if n.kind == 'o' {
				next = append(next, acc...) // absent, after present: present is preferred
			}
			if len(next) > MaxPhrasings {
				return nil, fmt.Errorf("pattern expands to more than %d phrasings", MaxPhrasings)
			}
			acc = next
		}
	}
	return acc, nil
}

func (ph Phrasing) with(w string) Phrasing {
	if ph.Slot {
		ph.Suffix = append(ph.Suffix[:len(ph.Suffix):len(ph.Suffix)], w)
	} else {
		ph.Prefix = append(ph.Prefix[:len(ph.Prefix):len(ph.Prefix)], w)
	}
	return ph
}

func clonePhrasings(in []Phrasing) []Phrasing {
	return append([]Phrasing(nil), in...)
}

// Words returns the phrasing's literal words with the slot left out, as
// an example utterance for similarity matching.
func (ph *Phrasing) Words() []string {
	return append(append(make([]string, 0, len(ph.Prefix)+len(ph.Suffix)), ph.Prefix...), ph.Suffix...)
}

// Example is the pattern's preferred phrasing as an utterance a person
// could type ("[i want to] work on [the] templates" gives "i want to work
// on the templates"); ok is false for a pattern with a slot, whose
// example would need an item.
func (p *Pattern) Example() (text string, ok bool) {
	if p.HasSlot() || len(p.Phrasings) == 0 {
		return "", false
	}
	return strings.Join(p.Phrasings[0].Prefix, " "), true
}

// CommandExample is something a person could type to run the command: its
// first example, else its first trigger when that needs no item ("" when
// neither).
func CommandExample(c *agentplane.CommandDefinition) string {
	if len(c.Examples) > 0 {
		return c.Examples[0]
	}
	if len(c.Triggers) == 0 {
		return ""
	}
	p, err := Parse(c.Triggers[0]) // checked when the configuration loaded
	if err != nil {
		return ""
	}
	text, _ := p.Example()
	return text
}
