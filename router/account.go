package router

import (
	"strings"
	"unicode"

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
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimLeftFunc(line, unicode.IsSpace), ">") {
			return "a line of it is quoted (\">\"): a quotation asks for nothing"
		}
	}
	if i := strings.IndexFunc(text, func(r rune) bool { return unicode.Is(unicode.So, r) }); i >= 0 {
		return "it has an emoji or symbol (" + string([]rune(text[i:])[:1]) + "): the words are said aside or in jest"
	}
	if i := strings.IndexAny(text, "?？"); i >= 0 {
		if strings.IndexFunc(text[i:], func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
			return "a question mark is followed by more text: a question and another clause ask for no command"
		}
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
// resolution before any other. It returns the words resolved and their
// resolution, or ok false when no cut resolves anything.
func (t *turn) nameWithin(cmd *agentplane.CommandDefinition, ix *resolve.Index, words []string, strictOnly bool) (name string, res resolve.Result, ok bool) {
	kinds := t.rt.slotWords[cmd]
	accounted := func(w string) bool { return kinds[w] != 0 || t.rt.droppable[w] }
	lead, trail := 0, 0
	for lead < len(words) && accounted(words[lead]) {
		lead++
	}
	for trail < len(words)-lead && accounted(words[len(words)-1-trail]) {
		trail++
	}
	if lead+trail == 0 || lead+trail == len(words) {
		return "", res, false
	}
	limit := t.reg.Settings().MaxOptions
	var first resolve.Result
	firstName := ""
	for n := 1; n <= lead+trail; n++ {
		for i := max(0, n-trail); i <= min(n, lead); i++ {
			text := strings.Join(words[i:len(words)-(n-i)], " ")
			var r resolve.Result
			if strictOnly {
				r = ix.ResolveExact(text, limit)
			} else {
				r = ix.Resolve(text, limit)
			}
			if r.Tier == resolve.TierExact {
				return text, r, true
			}
			if r.Tier != resolve.TierNone && firstName == "" {
				first, firstName = r, text
			}
		}
	}
	return firstName, first, firstName != ""
}

// unaccounted traces, for a slot whose words name no item as a whole,
// which words are not accounted for: those outside the longest run naming
// one item, or all of them but the pointing and kind words when no run
// names one. The trigger does not match; named reports whether a run
// named an item.
func (t *turn) unaccounted(cmd *agentplane.CommandDefinition, ix *resolve.Index, text string) (named bool) {
	ws := newWordSpans(resolve.Normalize(text))
	s, e, item, ok := 0, 0, (*agentplane.ResolverItem)(nil), false
	if ws.n > 1 {
		s, e, item, ok = strictSpanIn(ix, ws, 0, ws.n)
	}
	var b strings.Builder
	kinds := t.rt.slotWords[cmd]
	for i := range ws.n {
		if w := ws.span(i, i+1); (!ok || i < s || i >= e) && kinds[w] == 0 && !t.rt.droppable[w] {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString("\"" + w + "\"")
		}
	}
	if ok {
		t.tracep("\"", ws.span(s, e), "\" names ", item.Header.ID, " (", item.Header.DisplayName, "), but not accounted for: ", b.String(),
			": the trigger of ", cmd.ID, " does not match")
		return true
	}
	if b.Len() > 0 {
		t.tracep("not accounted for: ", b.String(), " (no item of ", cmd.Source.String(), ", no word for its kind): the trigger of ", cmd.ID, " does not match")
	}
	return false
}

// functionWords are the English words that carry no content of their own —
// pronouns, prepositions, auxiliaries, conjunctions, quantifiers — and may
// stand in a request for any command. The words that open another clause
// ("if", "when", "then", "unless", "once", "after", "before") are not
// among them: they are content here.
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
			ix = s.Current()
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
	if many && len(foreign) <= maxParaphraseWords && firstAt > 0 && lastAt < len(words)-1 {
		return nil, strings.Join(foreign, "\", \"")
	}
	return foreign, ""
}
