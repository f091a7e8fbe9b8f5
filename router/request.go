package router

import (
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/trigger"
)

// What makes an utterance a request for a command recognised by
// similarity: its evidence (fillers and preambles aside), how it begins,
// and whether it negates, reports or states — read against the register
// of the command's own examples.

// evidence appends to dst the words that carry an utterance's meaning for
// the example model: without politeness fillers, wherever they stand, and
// without a leading request preamble ("i would like to"). They are no
// evidence for any command: every command can be asked for politely.
// Words made of fillers only ("thank you", "hello") are their own
// evidence.
func evidence(f trigger.Fillers, words, dst []string) []string {
	w := words
	for changed := true; changed; {
		changed = false
		if n := preamble(w); n > 0 {
			w, changed = w[n:], true
		}
		if k := f.Strip(w); len(k) != len(w) {
			w, changed = k, true
		}
	}
	if dst = f.Remove(w, dst); len(dst) == 0 {
		return append(dst, words...)
	}
	return dst
}

// head returns the word a request begins with, its evidence's first word
// that is not an article ("" for none): "could you please show me the
// alerts" begins with "show", "the alerts page is down" with "alerts". A
// "what", "which" or "where" followed by an auxiliary is a question and
// its head is both words ("what do", "where is"); followed by anything
// else it may be a request ("which hosts are there"), and the head is the
// one word.
func head(f trigger.Fillers, words []string) string {
	var buf [32]string
	return headOf(evidence(f, words, buf[:0]))
}

// headOf is head of words that are evidence already.
func headOf(ev []string) string {
	for i, w := range ev {
		if articles[w] {
			continue
		}
		if wh[w] && i+1 < len(ev) && auxiliaries[ev[i+1]] {
			return w + " " + ev[i+1]
		}
		return w
	}
	return ""
}

var (
	wh          = set("what", "which", "where", "whats", "wheres")
	auxiliaries = set("do", "does", "did", "is", "are", "was", "were", "can", "could", "should", "would", "will", "have", "has", "am", "shall", "might", "must")
)

// own reports whether w is a word of the label's own: its examples have
// it (or its plural or singular) and at most one in eight of the labels'
// do (at least two), so it says what the command is about rather than how
// every command is asked for.
func (r *Router) own(label int, w string) bool {
	return r.knows(label, w) && r.few(w)
}

// few reports whether at most one in eight of the labels' examples (at
// least two) have w.
func (r *Router) few(w string) bool { return r.detector.Spread(w) <= max(2, r.detector.Labels()/8) }

// stem returns w without an -ing ending ("giving" -> "giv"), or w.
func stem(w string) string {
	if len(w) > 5 && strings.HasSuffix(w, "ing") {
		return w[:len(w)-3]
	}
	return w
}

// negations are the words that turn a request around ("don't show me
// the alerts", "no need for the runbooks"), in normalized form.
var negations = set("no", "not", "dont", "doesnt", "didnt", "never", "cant", "cannot", "wont", "wouldnt", "shouldnt",
	"isnt", "arent", "wasnt", "werent", "hasnt", "havent", "nothing", "nobody", "none", "without", "neither", "nor")

// reportWords are the auxiliaries and copulas of statements and reports
// ("the alerts page is down", "someone has moved the runbooks").
var reportWords = set("is", "was", "were", "are", "am", "be", "been", "being", "has", "had", "have", "did", "does",
	"got", "gets", "keeps", "kept", "seems", "seem", "went", "goes", "says", "said", "thinks", "thought", "told")

// reports says whether w states or reports rather than asks: an
// auxiliary or copula, or a verb in the past tense ("deleted", "crashed").
func reports(w string) bool {
	return reportWords[w] || len(w) >= 5 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed")
}

// subjects begin statements about someone or something ("somebody
// moved…", "my dashboards…", "there are…"); questionHeads begin questions
// to be answered rather than requests to be shown something ("why…",
// "does…"). "what", "which" and "where" begin requests as often as not.
var (
	subjects = set("i", "im", "ive", "we", "were", "weve", "you", "youre", "he", "she", "they", "theyre", "it", "its",
		"someone", "somebody", "everyone", "everybody", "nobody", "people", "my", "our", "your", "his", "her", "their",
		"this", "that", "these", "those", "there", "theres", "thats")
	questionHeads = set("why", "how", "when", "who", "whom", "whose", "is", "are", "was", "am", "does", "did",
		"has", "have", "had", "will", "would", "should", "shall", "might", "must", "isnt", "arent", "doesnt", "didnt", "wasnt")
)

// register is what a launcher's examples and trigger phrasings say about
// the ways it is asked for: the words they begin with, and whether any is
// a question ("why…", "does…"), a statement ("my card is bent", for a
// card-replacement picker) or has a negation. Similarity opens its picker
// only on an utterance of a kind its examples have.
type register struct {
	heads                         map[string]bool
	questions, statements, negate bool
}

// requests reports whether the examples are all requests: imperatives and
// names of what is wanted ("show me the alerts", "alerts please").
func (g register) requests() bool { return !g.questions && !g.statements }

// registerOf reads the register of a command from its examples and
// trigger phrasings.
func registerOf(f trigger.Fillers, c *agentplane.CommandDefinition, patterns []*trigger.Pattern) register {
	g := register{heads: map[string]bool{}}
	add := func(words []string) {
		h := head(f, words)
		g.heads[h] = true
		g.questions = g.questions || questionHeads[h] || strings.Contains(h, " ")
		g.statements = g.statements || subjects[h]
		for _, w := range words {
			g.negate = g.negate || negations[w]
		}
	}
	for _, e := range c.Examples {
		add(resolve.Fields(nil, resolve.Normalize(e)))
	}
	for _, p := range patterns {
		for _, ph := range p.Phrasings {
			add(ph.Words())
		}
	}
	return g
}

// knows reports whether the launcher's examples have w, or w with or
// without a plural s.
func (r *Router) knows(label int, w string) bool {
	return r.detector.Knows(label, w) || r.detector.Knows(label, w+"s") ||
		len(w) > 3 && strings.HasSuffix(w, "s") && r.detector.Knows(label, w[:len(w)-1])
}

// notRequest says why words do not read as a request for the launcher
// with command index ci, or returns "" when they do. A picker is a hijack
// of the conversation even though it runs nothing, so similarity opens one
// only on an utterance of a kind the launcher's examples have (its
// register): no negation, statement, report or question unless they have
// one, and, when they are all requests, an utterance that begins as some
// command's example or trigger does ("call my mom" is no request for the
// on-call list).
func (r *Router) notRequest(ci int, words []string) string {
	cmd, label, g := r.commands[ci], r.cmdLabel[ci], r.registers[ci]
	var buf [32]string
	ev := evidence(r.fillers, words, buf[:0])
	h := headOf(ev)
	own := false
	for _, w := range ev {
		switch {
		case r.knows(label, w):
			own = own || r.few(w)
		case negations[w] && !g.negate && (g.requests() || w == h):
			// a statement may say what is wrong ("my card doesn't work")
			// where a launcher is asked for with statements; a negated
			// request ("don't …") is never one
			return "\"" + w + "\" negates, and no example or trigger of " + cmd.ID + " does"
		case reports(w) && g.requests():
			return "\"" + w + "\" states or reports, and no example or trigger of " + cmd.ID + " does"
		}
	}
	switch {
	case subjects[h] && !g.statements:
		return "it begins with \"" + h + "\", a statement, and no example or trigger of " + cmd.ID + " is one"
	case (questionHeads[h] || strings.Contains(h, " ")) && !g.questions:
		return "it begins with \"" + h + "\", a question, and no example or trigger of " + cmd.ID + " is one"
	case g.requests() && !r.heads[h] && !r.heads[stem(h)] && !r.heads[stem(h)+"e"]:
		return "no example or trigger begins with \"" + h + "\", and those of " + cmd.ID + " are all requests"
	case g.requests() && !own:
		return "no word of it is one of " + cmd.ID + "'s own (its examples have it, few other commands' do)"
	}
	return ""
}
