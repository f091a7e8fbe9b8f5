package trigger

import (
	"slices"

	"github.com/agentplane/agentplane/resolve"
)

// Set matches an utterance against many patterns at once. Phrasings are
// indexed by their first word, so a turn only looks at the phrasings that
// can match it. Build it once; Match is safe for concurrent use.
type Set struct {
	patterns  []*Pattern
	owners    []int
	byFirst   map[string][]ref
	slotFirst []ref // phrasings that start with the slot
}

type ref struct{ pat, ph int32 }

func (r ref) less(o ref) bool { return r.pat < o.pat || r.pat == o.pat && r.ph < o.ph }

// Hit is a pattern that matched.
type Hit struct {
	Owner      int      // the owner given to Add, e.g. a command's index
	Pattern    *Pattern // the pattern
	Start, End int      // the slot's words are words[Start:End]; both 0 without a slot
	// Possessive: the phrasing's slot is {item}'s, and the last slot
	// word ends with the possessive s (see Phrasing.Possessive)
	Possessive bool
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{byFirst: make(map[string][]ref)} }

// Add adds a pattern on behalf of owner. Hits come out in the order
// patterns were added.
func (s *Set) Add(owner int, p *Pattern) {
	pi := int32(len(s.patterns))
	s.patterns = append(s.patterns, p)
	s.owners = append(s.owners, owner)
	for i := range p.Phrasings {
		ph := &p.Phrasings[i]
		r := ref{pi, int32(i)}
		if len(ph.Prefix) == 0 {
			s.slotFirst = append(s.slotFirst, r)
		} else {
			s.byFirst[ph.Prefix[0]] = append(s.byFirst[ph.Prefix[0]], r)
		}
	}
}

// Len returns the number of patterns.
func (s *Set) Len() int { return len(s.patterns) }

// Match appends to dst a hit for every phrasing that matches the words
// (normalized, whole utterance), in the order the patterns were added and,
// within a pattern, preferred phrasing first. A pattern yields one hit per
// distinct slot span: "send it to the q1 pilot list" against
// "send it to [the] {item} [list]" yields both "q1 pilot" and "q1 pilot list".
func (s *Set) Match(words []string, dst []Hit) []Hit {
	if len(words) == 0 {
		return dst
	}
	a, b := s.byFirst[words[0]], s.slotFirst
	first := len(dst) // hits of the current pattern start here
	for len(a) > 0 || len(b) > 0 {
		var r ref
		if len(b) == 0 || len(a) > 0 && a[0].less(b[0]) {
			r, a = a[0], a[1:]
		} else {
			r, b = b[0], b[1:]
		}
		ph := &s.patterns[r.pat].Phrasings[r.ph]
		start, end, ok := ph.Match(words)
		if !ok {
			continue
		}
		p := s.patterns[r.pat]
		if len(dst) == 0 || dst[len(dst)-1].Pattern != p {
			first = len(dst)
		}
		dup := false
		for _, h := range dst[first:] {
			if h.Start == start && h.End == end {
				dup = true
				break
			}
		}
		if !dup {
			dst = append(dst, Hit{Owner: s.owners[r.pat], Pattern: p, Start: start, End: end, Possessive: ph.Possessive})
		}
	}
	return dst
}

// DefaultFillers are the politeness words that may surround a trigger.
var DefaultFillers = []string{
	"please", "pls", "plz", "kindly", "now", "right now", "thanks", "thank you", "ok", "okay",
	"hey", "hi", "hello", "can you", "could you", "would you", "will you", "for me",
}

// Fillers strips politeness phrases from the start and end of an utterance.
type Fillers struct {
	phrases [][]string
	first   map[string]bool // the first word of each phrase
}

// NewFillers normalizes the phrases. Longer phrases are tried first.
func NewFillers(phrases []string) Fillers {
	f := Fillers{first: map[string]bool{}}
	for _, p := range phrases {
		if w := resolve.Fields(nil, resolve.Normalize(p)); len(w) > 0 {
			f.phrases = append(f.phrases, w)
			f.first[w[0]] = true
		}
	}
	// longest first, stable
	for i := 1; i < len(f.phrases); i++ {
		for j := i; j > 0 && len(f.phrases[j]) > len(f.phrases[j-1]); j-- {
			f.phrases[j], f.phrases[j-1] = f.phrases[j-1], f.phrases[j]
		}
	}
	return f
}

// Strip returns words without leading and trailing filler phrases. It
// returns a subslice of words.
func (f Fillers) Strip(words []string) []string {
	for changed := true; changed && len(words) > 0; {
		changed = false
		for _, p := range f.phrases {
			if len(p) < len(words) && slices.Equal(words[:len(p)], p) {
				words, changed = words[len(p):], true
			}
			if len(p) < len(words) && slices.Equal(words[len(words)-len(p):], p) {
				words, changed = words[:len(words)-len(p)], true
			}
		}
	}
	return words
}

// Remove appends to dst the words without any filler phrase, wherever
// it stands: what is left is what carries an utterance's meaning, for
// measuring similarity ("put milk on my list please" is no nearer to a
// command whose examples say "please").
func (f Fillers) Remove(words, dst []string) []string {
	for i := 0; i < len(words); {
		n := 0
		for _, p := range f.phrases {
			if !f.first[words[i]] {
				break
			}
			if len(p) <= len(words)-i && slices.Equal(words[i:i+len(p)], p) {
				n = len(p)
				break
			}
		}
		if n == 0 {
			dst = append(dst, words[i])
			n = 1
		}
		i += n
	}
	return dst
}

// Variants appends to dst words and the words left by stripping leading
// and trailing filler phrases, one phrase at a time: every combination of
// a leading and a trailing cut, the least stripped first (and, at equal
// amounts, fewer leading phrases first). Each variant is a subslice of
// words and never empty. A caller takes the first variant that serves
// best, so a filler is stripped only when what is left serves better:
// "play apocalypse now please" is tried as itself, then without "please",
// before "now" is taken off the title.
func (f Fillers) Variants(words []string, dst [][]string) [][]string {
	var leadBuf, trailBuf [8]int
	lead := append(leadBuf[:0], 0)
	for rest := words; ; {
		p := f.leading(rest)
		if p == 0 || len(lead) == cap(leadBuf) {
			break
		}
		rest = rest[p:]
		lead = append(lead, lead[len(lead)-1]+p)
	}
	trail := append(trailBuf[:0], 0)
	for rest := words; ; {
		p := f.trailing(rest)
		if p == 0 || len(trail) == cap(trailBuf) {
			break
		}
		rest = rest[:len(rest)-p]
		trail = append(trail, trail[len(trail)-1]+p)
	}
	for n := 0; n < len(lead)+len(trail)-1; n++ {
		for i := 0; i <= n && i < len(lead); i++ {
			j := n - i
			if j >= len(trail) {
				continue
			}
			if lo, hi := lead[i], len(words)-trail[j]; lo < hi {
				dst = append(dst, words[lo:hi])
			}
		}
	}
	return dst
}

// leading returns the length of the longest filler phrase words start
// with, leaving at least one word; 0 when none.
func (f Fillers) leading(words []string) int {
	for _, p := range f.phrases {
		if len(p) < len(words) && slices.Equal(words[:len(p)], p) {
			return len(p)
		}
	}
	return 0
}

// trailing returns the length of the longest filler phrase words end
// with, leaving at least one word; 0 when none.
func (f Fillers) trailing(words []string) int {
	for _, p := range f.phrases {
		if len(p) < len(words) && slices.Equal(words[len(words)-len(p):], p) {
			return len(p)
		}
	}
	return 0
}
