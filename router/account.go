package router

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/resolve"
)

// Every word accounted for. A command acts only on an utterance each of
// whose words is accounted for: the trigger's own words (its phrasing
// matched the whole utterance), the item's name, alias or id (within the
// resolution tiers' typo tolerance), the words for the kind of item, the
// pointing words (determiners, deictics, possessives) and the politeness
// fillers and request preambles at the edges. Any other word — a second
// clause, a condition, a time, a person the command does not take —
// means the trigger does not match, and the trace names the words. This
// file holds that rule, and the clauses that never act whatever their
// words: a quoted line, a question followed by more text.

// clause says why the text, as typed, is no command whatever its words —
// a line quoted from elsewhere ("> restart web-1"), or a question
// followed by more text ("ship it by courier? the customer paid for
// standard") — or returns "".
func clause(text string) string {
	// IndexByte scans with vector instructions: most texts have none of
	// these bytes, and this runs on every turn
	quote, question, wide := strings.IndexByte(text, '>') >= 0, strings.IndexByte(text, '?'), false
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			wide = true
			break
		}
	}
	if quote {
		for line := range strings.Lines(text) {
			if strings.HasPrefix(strings.TrimLeftFunc(line, unicode.IsSpace), ">") {
				return "a line of it is quoted (\">\"): a quotation asks for nothing"
			}
		}
	}
	if wide {
		if i := strings.IndexFunc(text, func(r rune) bool { return r >= 0x80 && unicode.Is(unicode.So, r) }); i >= 0 {
			return "it has an emoji or symbol (" + string([]rune(text[i:])[:1]) + "): the words are said aside or in jest"
		}
		if i := strings.Index(text, "？"); i >= 0 && (question < 0 || i < question) {
			question = i
		}
	}
	if question >= 0 && strings.IndexFunc(text[question:], func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
		return "a question mark is followed by more text: a question and another clause ask for no command"
	}
	return ""
}

// asksOnly reports whether the text ends with a question mark: a bare
// command said as a question ("restart web-1?") is asked about, never
// run.
func asksOnly(text string) bool {
	text = strings.TrimRightFunc(text, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) && r != '?' && r != '？' })
	return strings.HasSuffix(text, "?") || strings.HasSuffix(text, "？")
}

// nameWithin resolves, in a slot that does not name an item as it
// stands, the words left when pointing words, kind words and fillers are
// cut from its edges ("the web-1 service"): the least cut first, an exact
// resolution before any other. text is normalized (words one space
// apart); the names tried are substrings of it, and one resolved already
// in the same source is not resolved again. It returns the words
// resolved and their resolution, or ok false when no cut resolves
// anything.
func (t *turn) nameWithin(cmd *agentplane.CommandDefinition, ix *resolve.Index, text string, strictOnly bool) (name string, res resolve.Result, ok bool) {
	kinds := t.rt.slotWords[cmd]
	accounted := func(w string) bool { return kinds[w] != 0 || t.rt.droppable[w] }
	// starts[i] is the offset of word i; starts[n] is one past the end
	var startsBuf [maxSlotWords*2 + 2]int
	starts := append(startsBuf[:0], 0)
	for i := 0; i < len(text); i++ {
		if text[i] == ' ' {
			starts = append(starts, i+1)
		}
	}
	starts = append(starts, len(text)+1)
	n := len(starts) - 1
	word := func(i int) string { return text[starts[i] : starts[i+1]-1] }
	lead, trail := 0, 0
	for lead < n && accounted(word(lead)) {
		lead++
	}
	for trail < n-lead && accounted(word(n-1-trail)) {
		trail++
	}
	if lead+trail == 0 || lead+trail == n {
		return "", res, false
	}
	searched := t.searched
	if t.searchedIn != ix {
		searched = ""
	}
	limit := t.reg.Settings().MaxOptions
	var first resolve.Result
	firstName := ""
	for k := 1; k <= lead+trail; k++ {
		for i := max(0, k-trail); i <= min(k, lead); i++ {
			name := text[starts[i] : starts[n-(k-i)]-1]
			if name == searched {
				continue // resolved already at every tier, as another phrasing's slot
			}
			var r resolve.Result
			if strictOnly {
				r = ix.ResolveExact(name, limit)
			} else {
				r = ix.Resolve(name, limit)
			}
			if r.Tier == resolve.TierExact {
				return name, r, true
			}
			if r.Tier != resolve.TierNone && firstName == "" {
				first, firstName = r, name
			}
		}
	}
	return firstName, first, firstName != ""
}

// unaccounted traces, for a slot whose words name no item as a whole,
// the words not accounted for: those that are no pointing or kind word
// and no word of any item's name. The trigger does not match. named
// reports whether some word of the slot is a word of an item's name (an
// item with words left over, rather than a slot naming nothing).
func (t *turn) unaccounted(cmd *agentplane.CommandDefinition, ix *resolve.Index, text string) (named bool) {
	kinds := t.rt.slotWords[cmd]
	mark := len(t.buf)
	t.buf = append(t.buf, "not accounted for: "...)
	n := 0
	for rest := text; rest != ""; {
		var w string
		w, rest, _ = strings.Cut(rest, " ")
		switch {
		case kinds[w] != 0 || t.rt.droppable[w]:
		case ix.HasWord(w):
			named = true
		default:
			if n++; n > 1 {
				t.buf = append(t.buf, ", "...)
			}
			t.buf = append(append(append(t.buf, '"'), w...), '"')
		}
	}
	if !named || n == 0 {
		t.buf = t.buf[:mark]
		return false
	}
	t.tracep(" (beside words of ", cmd.Source.String(), "'s items, no word for their kind): the trigger of ", cmd.ID, " does not match")
	return true
}

// clauseWords open another clause — a condition, a time, a sequence, a
// report — and are never a paraphrase's.
var clauseWords = set("if", "when", "whenever", "then", "unless", "once", "after", "before", "until", "till", "while", "since",
	"because", "but", "though", "although", "later", "tomorrow", "yesterday", "tonight", "already", "again", "happens", "happened",
	"lol", "haha", "maybe", "not", "dont", "never")

// maxParaphraseWords is how many words of its own a paraphrase of a
// command with many examples may have inside it (calibrated on CLINC150's
// validation split: with none, 73 % of its in-scope utterances were
// recognised against 97 % without the rule; with two, 79 %, and no more
// out-of-scope ones).
const maxParaphraseWords = 2

var functionWords = set(
	"i", "me", "my", "mine", "you", "your", "yours", "we", "us", "our", "it", "its", "they", "them", "their", "he", "him", "his", "she", "her",
	"to", "of", "in", "on", "at", "for", "with", "from", "by", "about", "up", "down", "out", "into", "over", "off", "onto", "through",
	"do", "does", "can", "could", "would", "will", "should", "shall", "may", "might", "must", "is", "are", "am", "be",
	"and", "or", "a", "an", "the", "this", "that", "these", "those", "some", "any", "all", "every", "each", "one",
	"please", "just", "so", "too", "also", "here", "there", "what", "which", "where", "who", "how", "whats",
	"im", "id", "ill", "ive", "lets", "let", "get", "give", "go", "want", "need", "like", "see", "have", "has", "know",
)

// foreignWords returns the content words of the utterance that none of
// the command's examples, triggers, kind words or item names use — words
// that say the utterance is about something else ("book a flight to
// Oslo" against a command whose examples book rooms). src is the source
// of the items it takes (a launcher's target catalog). An utterance with
// such a word is not the command's, however similar — except that, for a
// launcher with many examples among many commands (many), up to
// maxParaphraseWords such words inside the utterance (neither its first
// nor its last) are a paraphrase's: they are reported in tolerated, and
// foreign is empty.
func (t *turn) foreignWords(label int, cmd *agentplane.CommandDefinition, src agentplane.ResolverSource, words []string, many bool) (foreign []string, tolerated string) {
	var ix *resolve.Index
	if t.reg.SourceActive(t.runMode(), t.in.Roles, src) {
		if s, ok := t.reg.Source(src); ok {
			ix = s.Current(t.ctx)
			t.read(src, ix)
		}
	}
	var evBuf [32]string
	words = evidence(t.rt.fillers, words, evBuf[:0])
	kinds := t.rt.slotWords[cmd]
	firstAt, lastAt := -1, -1
	for i, w := range words {
		switch {
		case functionWords[w] || t.rt.droppable[w] || kinds[w] != 0 || t.rt.knows(label, w):
		case ix != nil && ix.HasWord(w):
		case t.rt.knows(label, stem(w)) || t.rt.knows(label, stem(w)+"e"):
		default:
			foreign = append(foreign, w)
			if firstAt < 0 {
				firstAt = i
			}
			lastAt = i
		}
	}
	if many && len(foreign) <= maxParaphraseWords && firstAt > 0 && lastAt < len(words)-1 && !slices.ContainsFunc(foreign, func(w string) bool { return clauseWords[w] }) {
		return nil, strings.Join(foreign, "\", \"")
	}
	return foreign, ""
}

// edged reports whether the slot text (normalized words, one space
// apart) begins or ends with a pointing word, a kind word or a filler: a
// check that allocates nothing, made before cutting them.
func (t *turn) edged(cmd *agentplane.CommandDefinition, text string) bool {
	kinds := t.rt.slotWords[cmd]
	first, _, _ := strings.Cut(text, " ")
	last := text[strings.LastIndexByte(text, ' ')+1:]
	return kinds[first] != 0 || t.rt.droppable[first] || kinds[last] != 0 || t.rt.droppable[last]
}
