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
	deictics    = set("this", "that", "it", "these", "those", "them", "same", "current", "my", "his", "her", "their", "our", "its", "your")
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

// browsingWords returns the words the launchers browsing a source use for
// its items, as the source's kind words: the words of their examples and
// triggers that few commands' examples have ("responders" for the on-call
// list). They name the kind, not an item.
func (r *Router) browsingWords(src agentplane.ResolverSource) map[string]bool {
	m := map[string]bool{}
	if r.detector == nil {
		return m
	}
	for i, c := range r.commands {
		if c.Kind != agentplane.KindLauncher || r.cmdLabel[i] < 0 {
			continue
		}
		if target, ok := r.reg.Command(c.OnSelect); !ok || target.Source != src {
			continue
		}
		add := func(text string) {
			for _, w := range resolve.Fields(nil, resolve.Normalize(text)) {
				if !functionWords[w] && !articles[w] && r.detector.Spread(w) == 1 {
					m[w] = true
					if len(w) > 3 && strings.HasSuffix(w, "s") {
						m[w[:len(w)-1]] = true
					}
				}
			}
		}
		for _, e := range c.Examples {
			add(e)
		}
		for _, p := range r.patterns[i] {
			for _, ph := range p.Phrasings[:min(len(p.Phrasings), maxTriggerExamples)] {
				add(strings.Join(ph.Words(), " "))
			}
		}
	}
	return m
}
