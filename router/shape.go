package router

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/trigger"
)

// A shape is an utterance reduced to what carries its intent: its item (a
// run of words naming exactly one item of the command's source) replaced
// by a slot, the politeness fillers around it, a leading request preamble
// ("i would like to", "i want", "can i") and the articles left out, the
// order of everything else kept. A command is recognised from its
// examples only when the utterance has the very shape of one of its
// examples or trigger phrasings: "I like margherita", "would I like a
// hawaiian?", "don't order a margherita", "she wants to order a
// margherita" and "still working on ticket 7" have shapes no example of
// "i want to order a margherita" or "stop working on ticket 7" has, so
// statements, questions, negations and reports never act.

// slot stands for the item in a shape.
const slot = "\x00"

// preambles are request openings that carry no intent of their own, in
// normalized words.
var preambles = [][]string{
	{"i", "would", "like", "you", "to"}, {"id", "like", "you", "to"}, {"i", "need", "you", "to"}, {"i", "want", "you", "to"},
	{"i", "would", "like", "to"}, {"i", "would", "love", "to"}, {"id", "like", "to"}, {"id", "love", "to"}, {"i", "wish", "to"},
	{"i", "would", "like"}, {"id", "like"}, {"i", "want", "to"}, {"i", "need", "to"},
	{"would", "you", "mind"}, {"do", "you", "mind"}, {"is", "it", "possible", "to"}, {"would", "it", "be", "possible", "to"},
	{"i", "would", "really", "like", "to"}, {"i", "really", "need", "to"}, {"i", "have", "to"}, {"i", "got", "to"}, {"i", "must"},
	{"i", "want"}, {"i", "wanna"}, {"i", "need"}, {"let", "me"}, {"can", "i"}, {"could", "i"}, {"may", "i"},
}

// preamblesByFirst is preambles by their first word, longest first.
var preamblesByFirst = func() map[string][][]string {
	m := map[string][][]string{}
	for _, p := range preambles {
		m[p[0]] = append(m[p[0]], p)
	}
	for _, ps := range m {
		slices.SortStableFunc(ps, func(a, b []string) int { return len(b) - len(a) })
	}
	return m
}()

// preamble returns the length of the request preamble words begin with,
// leaving at least one word; 0 for none.
func preamble(words []string) int {
	if len(words) == 0 {
		return 0
	}
	for _, p := range preamblesByFirst[words[0]] {
		if len(p) < len(words) && slices.Equal(words[:len(p)], p) {
			return len(p)
		}
	}
	return 0
}

var articles = map[string]bool{"a": true, "an": true, "the": true}

// shapeOf returns the shape of words with words[s:e] as the item (s == e:
// no item).
func shapeOf(f trigger.Fillers, words []string, s, e int) string {
	_, key := shapeKey(f, words, s, e, nil, nil)
	return string(key)
}

// shapeKey makes the shape of words with words[s:e] as the item, reusing
// the memory of toks and key, and returns them with the shape in key.
func shapeKey(f trigger.Fillers, words []string, s, e int, toks []string, key []byte) ([]string, []byte) {
	toks = append(toks[:0], words[:s]...)
	if e > s {
		toks = append(toks, slot)
	}
	toks = append(toks, words[e:]...)
	t := toks
	for changed := true; changed; {
		changed = false
		if n := preamble(t); n > 0 {
			t, changed = t[n:], true
		}
		if k := f.Strip(t); len(k) != len(t) {
			t, changed = k, true
		}
	}
	key = key[:0]
	for _, w := range t {
		if articles[w] {
			continue
		}
		if len(key) > 0 {
			key = append(key, ' ')
		}
		key = append(key, w...)
	}
	return toks, key
}

// wordSpans gives the text of runs of words of a normalized string, where
// words are separated by exactly one space, as substrings: no allocation.
type wordSpans struct {
	text  string
	start [maxItemSearchWords + 1]int // byte offset of each word; one past the end after the last
	n     int                         // words; 0 for more than maxItemSearchWords
}

func newWordSpans(norm string) *wordSpans {
	ws := &wordSpans{text: norm}
	if norm == "" {
		return ws
	}
	ws.start[0] = 0
	for i := 0; i < len(norm); i++ {
		if norm[i] == ' ' {
			if ws.n++; ws.n == maxItemSearchWords {
				ws.n = 0
				return ws
			}
			ws.start[ws.n] = i + 1
		}
	}
	ws.n++
	ws.start[ws.n] = len(norm) + 1
	return ws
}

// span returns words s..e-1.
func (ws *wordSpans) span(s, e int) string { return ws.text[ws.start[s] : ws.start[e]-1] }

// strictSpanIn returns the longest, then earliest, run of at most
// maxSlotWords of the words lo..hi-1 of ws that names exactly one item of
// ix (the exact tier), or ok false. A run is looked up only when each of
// its words is a word of some item's names or has a digit (as ids mostly
// do): the others name nothing exactly.
func strictSpanIn(ix *resolve.Index, ws *wordSpans, lo, hi int) (s, e int, item *agentplane.ResolverItem, ok bool) {
	var named [maxItemSearchWords]bool
	for i := lo; i < hi; i++ {
		w := ws.span(i, i+1)
		named[i] = ix.HasWord(w) || strings.ContainsAny(w, "0123456789")
	}
	for n := min(hi-lo, maxSlotWords); n > 0; n-- {
	spans:
		for s := lo; s+n <= hi; s++ {
			for i := s; i < s+n; i++ {
				if !named[i] {
					continue spans
				}
			}
			if res := ix.ResolveExact(ws.span(s, s+n), 2); res.Strict() {
				return s, s + n, ix.Item(res.Items[0]), true
			}
		}
	}
	return 0, 0, nil, false
}

// origin is where a shape comes from: a command and the example or
// trigger phrasing that has it.
type origin struct {
	cmd  int
	text string
}

// shapes is the shapes of every command's examples and trigger phrasings.
// Examples are shaped with their item found in the command's source, so
// the shapes of commands with a provider-backed source are made again when
// the provider's index changes.
type shapes struct {
	byShape map[string][]origin
	words   map[string]bool                              // every word of every shape
	indexes map[agentplane.ResolverSource]*resolve.Index // the indexes the examples were shaped with
	// provided are the sources of indexes a provider answered (a turn
	// matched against the shapes read them: Decision.Sources); none for
	// static catalogs
	provided []agentplane.ResolverSource
}

// shapeCache holds the router's current shapes.
type shapeCache struct {
	mu  sync.Mutex // held while making shapes
	cur atomic.Pointer[shapes]
}

// sourcesAtHand reports whether every source the examples are shaped
// with has its index without a fetch (static catalogs; a provider not yet
// asked has none).
func (r *Router) sourcesAtHand() bool {
	for _, c := range r.commands {
		if len(c.Examples) == 0 || c.Kind != agentplane.KindExecutable {
			continue
		}
		if src, ok := r.reg.Source(c.Source); ok && src.Current(context.Background()) == nil {
			return false
		}
	}
	return true
}

// shapes returns the shapes for the sources' current indexes, making them
// again when a source's index has changed since (a provider refreshed).
// Checking costs no allocation and fetches nothing.
func (r *Router) shapes(ctx context.Context) *shapes {
	if cur := r.shapeCache.cur.Load(); cur != nil && r.fresh(ctx, cur) {
		return cur
	}
	r.shapeCache.mu.Lock()
	defer r.shapeCache.mu.Unlock()
	if cur := r.shapeCache.cur.Load(); cur != nil && r.fresh(ctx, cur) {
		return cur
	}
	idx := map[agentplane.ResolverSource]*resolve.Index{}
	for _, c := range r.commands {
		if len(c.Examples) == 0 || c.Kind != agentplane.KindExecutable {
			continue
		}
		if _, done := idx[c.Source]; done {
			continue
		}
		var ix *resolve.Index
		if src, ok := r.reg.Source(c.Source); ok {
			if ix = src.Current(ctx); ix == nil {
				ix, _, _ = src.Index(ctx) // first use: fetch (failures back off)
			}
		}
		idx[c.Source] = ix
	}
	sh := &shapes{byShape: map[string][]origin{}, words: map[string]bool{}, indexes: idx}
	for id, ix := range idx {
		if ix != nil && ix.Version() != "" {
			sh.provided = append(sh.provided, id)
		}
	}
	add := func(shape string, o origin) {
		if shape == "" || shape == slot {
			return // nothing of its own: a bare item (or nothing) asks for no command
		}
		for _, w := range strings.Fields(shape) {
			sh.words[w] = true
		}
		for _, have := range sh.byShape[shape] {
			if have.cmd == o.cmd {
				return
			}
		}
		sh.byShape[shape] = append(sh.byShape[shape], o)
	}
	for i, c := range r.commands {
		for _, p := range r.patterns[i] {
			for _, ph := range p.Phrasings {
				words := ph.Words()
				s, e := len(ph.Prefix), len(ph.Prefix)
				if ph.Slot {
					words = append(append(append([]string(nil), ph.Prefix...), slot), ph.Suffix...)
					e = s + 1
				}
				add(shapeOf(r.fillers, words, s, e), origin{i, p.Source})
			}
		}
		for _, ex := range c.Examples {
			norm := resolve.Normalize(ex)
			words := resolve.Fields(nil, norm)
			s, e := 0, 0
			if c.Kind == agentplane.KindExecutable {
				ix := idx[c.Source]
				if ix == nil {
					continue // its source is unavailable: shaped when it comes back
				}
				ws := newWordSpans(norm)
				var ok bool
				if s, e, _, ok = strictSpanIn(ix, ws, 0, ws.n); !ok {
					continue // no item: it could only match an utterance without one
				}
			}
			add(shapeOf(r.fillers, words, s, e), origin{i, ex})
		}
	}
	if !resolve.IsPinned(ctx) { // replay's pinned answers are not the live router's
		r.shapeCache.cur.Store(sh)
	}
	return sh
}

// fresh reports whether the shapes were made with the indexes the sources
// hold now (or ctx pins).
func (r *Router) fresh(ctx context.Context, sh *shapes) bool {
	for id, ix := range sh.indexes {
		if src, ok := r.reg.Source(id); ok && src.Current(ctx) != ix {
			return false
		}
	}
	return true
}

// shapeMatch recognises an active command whose example or trigger
// phrasing has the utterance's shape: a launcher without an item, an
// executable command with its item named (the longest, then earliest,
// run of words naming exactly one item of its source; never guessed).
// Commands are tried in configuration order.
func (t *turn) shapeMatch() (agentplane.Decision, bool) {
	words := t.normalizedWords()
	if len(words) > maxItemSearchWords {
		t.tracep("examples: ", strconv.Itoa(len(words)), " words are too many for a command")
		return agentplane.Decision{}, false
	}
	sh := t.rt.shapes(t.ctx)
	for _, id := range sh.provided {
		t.read(id, sh.indexes[id])
	}
	var toksBuf [16]string
	var keyBuf [128]byte
	toks, key := shapeKey(t.rt.fillers, words, 0, 0, toksBuf[:0], keyBuf[:0])
	if os, ok := sh.byShape[string(key)]; ok {
		var found *origin
		for i := range os {
			o := &os[i]
			cmd := t.rt.commands[o.cmd]
			if cmd.Kind != agentplane.KindLauncher || !t.reg.CommandActive(t.mode, t.in.Roles, cmd.ID) {
				continue
			}
			if found != nil {
				// two commands' examples have this shape: it says which
				// of them no better than similarity does
				t.tracep("examples: the utterance has the shape of \"", found.text, "\" of ", t.rt.commands[found.cmd].ID,
					" and of \"", o.text, "\" of ", cmd.ID, ": the shape does not decide")
				found = nil
				break
			}
			found = o
		}
		if found != nil {
			cmd := t.rt.commands[found.cmd]
			t.tracep("examples: the utterance has the shape of \"", found.text, "\" of ", cmd.ID)
			return t.browse(cmd), true
		}
	}
	// The item must cover every word no shape has (fillers, preambles and
	// articles aside, which shapes drop): the words outside it are the
	// shape's own. Usually that leaves few spans, or none.
	lo, hi := len(words), -1
	for i, w := range words {
		if !sh.words[w] && !t.rt.droppable[w] {
			lo, hi = min(lo, i), i
		}
	}
	for n := min(len(words), maxSlotWords); n > 0; n-- {
		for s := 0; s+n <= len(words); s++ {
			if hi >= 0 && (s > lo || s+n <= hi) {
				continue
			}
			toks, key = shapeKey(t.rt.fillers, words, s, s+n, toks, key)
			os, ok := sh.byShape[string(key)]
			if !ok {
				continue
			}
			var found *origin
			var item *agentplane.ResolverItem
			span := t.slotText(words, s, s+n)
			for i := range os {
				o := &os[i]
				cmd := t.rt.commands[o.cmd]
				if cmd.Kind != agentplane.KindExecutable || !t.reg.CommandActive(t.mode, t.in.Roles, cmd.ID) ||
					!t.reg.SourceActive(t.mode, t.in.Roles, cmd.Source) {
					continue
				}
				ix, err := t.index(cmd.Source)
				if err != nil {
					continue
				}
				res := ix.ResolveExact(span, 2)
				if !res.Strict() {
					continue
				}
				if found != nil {
					// two commands take this item in this shape: acting
					// on either would be a guess
					t.tracep("examples: the utterance has the shape of \"", found.text, "\" of ", t.rt.commands[found.cmd].ID,
						" and of \"", o.text, "\" of ", cmd.ID, ", both taking \"", span, "\": not guessing which")
					return agentplane.Decision{Action: agentplane.ActionContinueLLM, ReasonCode: agentplane.ReasonNoControlIntent}, true
				}
				found, item = o, ix.Item(res.Items[0])
			}
			if found != nil {
				cmd := t.rt.commands[found.cmd]
				k, id := kindOf(cmd.Source)
				t.tracep("examples: the utterance has the shape of \"", found.text, "\" of ", cmd.ID, ", with \"", span, "\" as its item: ",
					item.Header.ID, " in ", k, id)
				return t.invokeOrConfirm(cmd, item), true
			}
		}
	}
	return agentplane.Decision{}, false
}

// droppableWords returns the words a shape may leave out: articles and
// the words of fillers and preambles (a conservative set: such a word may
// or may not be left out where it stands).
func droppableWords(fillers []string) map[string]bool {
	m := map[string]bool{}
	for w := range articles {
		m[w] = true
	}
	for _, p := range preambles {
		for _, w := range p {
			m[w] = true
		}
	}
	for _, f := range fillers {
		for _, w := range resolve.Fields(nil, resolve.Normalize(f)) {
			m[w] = true
		}
	}
	return m
}
