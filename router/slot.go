package router

import (
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/resolve"
)

// A trigger names a command; its slot may not name the item plainly. This
// file reads a slot that holds no item ("restart a service", "ack it") and
// one whose item is buried in other words ("restart the containers behind
// search indexer").

// The kinds of word that stand for an item without naming one.
const (
	wordDeterminer uint8 = 1 << iota
	wordDeictic
	wordKind
)

// determiners and deictics stand where an item would ("restart a
// service", "cancel this order") without naming one.
var (
	determiners = set("a", "an", "the", "some", "any", "one", "another")
	deictics    = set("this", "that", "it", "these", "those", "them", "same", "current")
)

// missingItem reads a slot that names no item — determiners, deictics
// and words for the kind of item only ("an incident", "the service",
// "it") — as the command asked for without its item: a deictic with an
// item of the command's own catalog active is that item; otherwise a
// picker (a question without UI), as the slash form without an argument.
// It reports false for a slot with any other word.
func (t *turn) missingItem(cmd *agentplane.CommandDefinition, ix *resolve.Index, text string) (agentplane.Decision, int, bool) {
	words := t.rt.slotWords[cmd]
	if first, _, _ := strings.Cut(text, " "); plainWord(first) && words[first] == 0 {
		return agentplane.Decision{}, 0, false // the common case, decided without normalizing
	}
	rest := resolve.Normalize(text)
	if rest == "" {
		return agentplane.Decision{}, 0, false
	}
	deictic := false
	for rest != "" {
		var w string
		w, rest, _ = strings.Cut(rest, " ")
		k := words[w]
		if k == 0 {
			return agentplane.Decision{}, 0, false
		}
		deictic = deictic || k&wordDeictic != 0
	}
	if deictic {
		if awc := t.sess.AWC; awc.Entity != nil && awc.EntityType == t.entityType(cmd.Source) {
			if item, ok := ix.Lookup(awc.Entity.ID); ok {
				t.tracep("\"", text, "\" is the active ", awc.EntityType, " ", item.Header.ID, " (", item.Header.DisplayName, ")")
				return t.invokeOrConfirm(cmd, item), qualityStrict, true
			}
		}
		t.tracep("\"", text, "\" points at an item, and no item of ", cmd.Source.String(), " is active: ", cmd.ID, " without its item")
	} else {
		t.tracep("\"", text, "\" names no item: ", cmd.ID, " without its item")
	}
	d := t.browse(cmd)
	if d.Action == agentplane.ActionContinueLLM {
		return d, qualityNone, true
	}
	return d, qualityCandidate, true
}

// plainWord reports whether w is lower-case ASCII letters and digits, as
// normalization leaves a word.
func plainWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return w != ""
}

// entityType returns the entity type of a source's items ("" for none).
func (t *turn) entityType(src agentplane.ResolverSource) string {
	if c, ok := t.reg.Catalog(src.CatalogID); ok {
		return c.EntityType
	}
	return ""
}

// kindWords returns the words that name the kind of a source's items —
// its entity type, catalog id and display name, singular and plural
// ("incident", "incidents", "order") — which name no item.
func kindWords(reg *registry.Registry, src agentplane.ResolverSource) map[string]bool {
	m := map[string]bool{}
	add := func(s string) {
		for _, w := range resolve.Fields(nil, resolve.Normalize(strings.ReplaceAll(s, "_", " "))) {
			m[w] = true
			if len(w) > 3 && strings.HasSuffix(w, "s") {
				m[w[:len(w)-1]] = true
			} else {
				m[w+"s"] = true
			}
		}
	}
	if c, ok := reg.Catalog(src.CatalogID); ok {
		add(c.EntityType)
		add(c.DisplayName)
	}
	add(src.CatalogID)
	add(src.ProviderID)
	return m
}

// subSpan finds, in a slot that does not resolve as a whole ("the pods of
// payments api"), the longest run of words naming exactly one item of the
// command's source, when the words left over do not change the meaning:
// no negation and no other item among them. The trace names the leftover.
func (t *turn) subSpan(cmd *agentplane.CommandDefinition, ix *resolve.Index, text string) (*agentplane.ResolverItem, bool) {
	if !strings.Contains(strings.TrimSpace(text), " ") {
		return nil, false // one word: the whole slot was tried
	}
	if sameButArticle(text, t.searched) {
		return nil, false // "the x y" after "x y": its runs were searched
	}
	t.searched = text
	ws := newWordSpans(resolve.Normalize(text))
	if ws.n < 2 {
		return nil, false
	}
	s, e, item, ok := strictSpanIn(ix, ws, 0, ws.n)
	if !ok || e-s == ws.n {
		return nil, false
	}
	for i := range ws.n {
		if w := ws.span(i, i+1); (i < s || i >= e) && negations[w] {
			t.tracep("\"", w, "\" beside the item ", item.Header.ID, " changes the meaning: not taking it")
			return nil, false
		}
	}
	if t.otherItem(ix, ws, s, e, item) {
		return nil, false
	}
	before, after, sep := spanOrEmpty(ws, 0, s), spanOrEmpty(ws, e, ws.n), ""
	if before != "" && after != "" {
		sep = " … "
	}
	t.tracep("\"", ws.span(s, e), "\" in the slot names ", item.Header.ID, " (", item.Header.DisplayName, "); left over: \"", before, sep, after, "\"")
	return item, true
}

// sameButArticle reports whether a and b differ only by a leading
// article of one of them.
func sameButArticle(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	if b == "" || !strings.HasSuffix(a, b) {
		return false
	}
	head := a[:len(a)-len(b)]
	return head == "the " || head == "a " || head == "an " || head == ""
}

// spanOrEmpty is ws.span(s, e), or "" for no words.
func spanOrEmpty(ws *wordSpans, s, e int) string {
	if s >= e {
		return ""
	}
	return ws.span(s, e)
}

// otherItem reports, and traces, whether the words of ws outside s..e-1
// name an item other than item.
func (t *turn) otherItem(ix *resolve.Index, ws *wordSpans, s, e int, item *agentplane.ResolverItem) bool {
	for _, r := range [2][2]int{{0, s}, {e, ws.n}} {
		if _, _, other, ok := strictSpanIn(ix, ws, r[0], r[1]); ok && other.Header.ID != item.Header.ID {
			t.tracep("the words name ", item.Header.ID, " and ", other.Header.ID, ": not choosing")
			return true
		}
	}
	return false
}
