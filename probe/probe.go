// Package probe checks a configuration for hijacks before it ships: it
// makes, from the configuration's own items, examples and trigger
// phrasings, utterances that must not act — negations, questions, reports
// of what someone else wants, statements and mentions of an item, the
// item inside a long message — routes each in every mode, with and without
// UI, with nothing active and with the item active, and reports every one
// the router would not hand to the LLM — an invocation, a confirmation, a
// picker or a question (a picker is a hijack of the conversation too,
// though it runs nothing) — with its kind and the router's trace. A clean
// configuration reports none.
//
//	rep, err := probe.Run(ctx, c, nil)
//	for _, h := range rep.Hijacks { fmt.Println(h.Text, h.Decision.CommandID) }
package probe

import (
	"context"
	"slices"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/trigger"
)

// Options adjust Run. nil means defaults.
type Options struct {
	// ItemsPerSource is how many items of each source fill the templates
	// besides the items the examples name; 0 means 3.
	ItemsPerSource int
	// PhrasingsPerTrigger is how many phrasings of each trigger are used;
	// 0 means 4.
	PhrasingsPerTrigger int
}

// Hijack is a probe utterance the router would not hand to the LLM.
type Hijack struct {
	Text     string
	Mode     string
	UI       bool
	Active   string // the id of the item active in the session, or ""
	Kind     Kind
	Decision agentplane.Decision
}

// Kind is what a hijack does.
type Kind string

// The kinds of hijack, worst first.
const (
	Invokes  Kind = "invokes"  // runs a command
	Confirms Kind = "confirms" // asks to confirm running one
	Picker   Kind = "picker"   // opens a picker
	Question Kind = "question" // asks which item
)

// KindOf returns what a decision other than continue_with_llm does.
func KindOf(d agentplane.Decision) Kind {
	switch {
	case d.Action == agentplane.ActionInvokeCommand:
		return Invokes
	case d.IsConfirmationQuestion():
		return Confirms
	case d.Action == agentplane.ActionOpenPicker:
		return Picker
	}
	return Question
}

// Count returns how many hijacks are of each kind.
func (r Report) Count() map[Kind]int {
	m := map[Kind]int{}
	for _, h := range r.Hijacks {
		m[h.Kind]++
	}
	return m
}

// Report is what a probe found.
type Report struct {
	Utterances int // distinct probe utterances
	Turns      int // routed: utterances × modes × UI × session states
	Hijacks    []Hijack
}

// Run probes the core's configuration. Routing is pure: nothing is
// recorded or run.
func Run(ctx context.Context, c *core.Core, opts *Options) (Report, error) {
	if opts == nil {
		opts = &Options{}
	}
	nItems, nPhr := opts.ItemsPerSource, opts.PhrasingsPerTrigger
	if nItems <= 0 {
		nItems = 3
	}
	if nPhr <= 0 {
		nPhr = 4
	}
	reg := c.Registry()
	type probe struct {
		text   string
		active *agentplane.ResolverItem // the item the utterance is about, or nil
		cmd    *agentplane.CommandDefinition
	}
	var probes []probe
	seen := map[string]bool{}
	add := func(text string, item *agentplane.ResolverItem, cmd *agentplane.CommandDefinition) {
		if !seen[text] {
			seen[text] = true
			probes = append(probes, probe{text, item, cmd})
		}
	}
	for _, cmd := range reg.Commands() {
		var ix *resolve.Index
		if src, ok := reg.Source(cmd.SelectionSource()); ok {
			ix, _, _ = src.Index(ctx)
		}
		var items []*agentplane.ResolverItem
		if ix != nil {
			for _, i := range ix.Items(nItems) {
				items = append(items, ix.Item(i))
			}
		}
		// the command's own phrases: its examples, and its triggers'
		// phrasings with an item in the slot
		type phrase struct {
			words []string
			item  *agentplane.ResolverItem
		}
		var phrases []phrase
		for _, ex := range cmd.Examples {
			words := resolve.Fields(nil, resolve.Normalize(ex))
			var item *agentplane.ResolverItem
			if ix != nil && cmd.Kind == agentplane.KindExecutable {
				item = namedItem(ix, words)
			}
			phrases = append(phrases, phrase{withoutPreamble(words), item})
		}
		for _, pat := range patternsOf(cmd) {
			for j, ph := range pat.Phrasings {
				if j == nPhr {
					break
				}
				if !ph.Slot {
					phrases = append(phrases, phrase{ph.Words(), nil})
					continue
				}
				for _, it := range items {
					name := resolve.Fields(nil, resolve.Normalize(it.Header.DisplayName))
					w := append(append(append([]string(nil), ph.Prefix...), name...), ph.Suffix...)
					phrases = append(phrases, phrase{w, it})
				}
			}
		}
		for _, p := range phrases {
			base := strings.Join(p.words, " ")
			if base == "" {
				continue
			}
			for _, tpl := range around {
				add(strings.ReplaceAll(tpl, "{}", base), p.item, cmd)
			}
		}
		for _, it := range items {
			for _, tpl := range mentions {
				add(strings.ReplaceAll(tpl, "{}", it.Header.DisplayName), it, cmd)
			}
		}
	}
	rep := Report{Utterances: len(probes)}
	rt := c.Router()
	now := c.Now()
	for _, m := range c.Config().Modes {
		for _, p := range probes {
			states := []*agentplane.Session{{ID: "probe", Mode: m.Key, Version: 1}}
			if p.active != nil && p.cmd.Source.CatalogID != "" {
				if cat, ok := reg.Catalog(p.cmd.Source.CatalogID); ok && cat.EntityType != "" {
					h := p.active.Header
					states = append(states, &agentplane.Session{ID: "probe", Mode: m.Key, Version: 1,
						AWC: agentplane.ActiveWorkContext{EntityType: cat.EntityType, Entity: &h}})
				}
			}
			for _, s := range states {
				for _, ui := range []bool{false, true} {
					rep.Turns++
					d, err := rt.Route(ctx, s, agentplane.TurnInput{Text: p.text, UI: ui, Now: now})
					if err != nil {
						continue // malformed input is refused, not acted on
					}
					if d.Action != agentplane.ActionContinueLLM {
						active := ""
						if s.AWC.Entity != nil {
							active = s.AWC.Entity.ID
						}
						rep.Hijacks = append(rep.Hijacks, Hijack{Text: p.text, Mode: m.Key, UI: ui, Active: active, Kind: KindOf(d), Decision: d})
					}
				}
			}
		}
	}
	return rep, nil
}

// around are utterances around a command's phrase ({}) that must not act:
// negations, questions, reports of someone else, past and habitual
// statements, a mention in a long message.
var around = []string{
	"don't {}", "do not {}", "never {}", "please don't {}",
	"did you {}?", "should i {}?", "why would you {}?", "did she {} yesterday?",
	"she wants to {}", "he asked me to {}", "they said to {}", "my boss would {}",
	"i used to {}", "i already {}", "yesterday i had to {}", "we never {} on mondays",
	"i was wondering whether it makes sense to {} at some point next month, what do you think about the idea in general",
}

// mentions are statements and questions that name an item ({}) without
// asking for anything — the bare name among them: it says what, not what
// to do with it.
var mentions = []string{
	"{}", "the {}", "{}?",
	"i like {}", "i saw {} yesterday", "{} is my favourite", "what do you think of {}?",
	"tell me about {}", "is {} any good?", "still working on {}", "{} again?",
	"a friend of mine keeps talking about {} all the time and i do not understand why",
}

// preambles are the request openings stripped from an example before it
// is wrapped ("i want to order x" → "don't order x").
var preambles = []string{"i would like to ", "i would like ", "id like to ", "id like ", "i want to ", "i want ", "i need to ", "can you ", "could you ", "please "}

func withoutPreamble(words []string) []string {
	s := strings.Join(words, " ") + " "
	for _, p := range preambles {
		if strings.HasPrefix(s, p) {
			return strings.Fields(s[len(p):])
		}
	}
	return words
}

// namedItem is the item the longest run of words names exactly, or nil.
func namedItem(ix *resolve.Index, words []string) *agentplane.ResolverItem {
	for n := min(len(words), 6); n > 0; n-- {
		for s := 0; s+n <= len(words); s++ {
			if res := ix.ResolveExact(strings.Join(words[s:s+n], " "), 2); res.Strict() {
				return ix.Item(res.Items[0])
			}
		}
	}
	return nil
}

// patternsOf parses the command's triggers (valid: the configuration was
// validated).
func patternsOf(cmd *agentplane.CommandDefinition) []*trigger.Pattern {
	var out []*trigger.Pattern
	for _, t := range cmd.Triggers {
		if p, err := trigger.Parse(t); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// Sorted returns the hijacks ordered by text, mode, UI and active item.
func (r Report) Sorted() []Hijack {
	out := slices.Clone(r.Hijacks)
	slices.SortFunc(out, func(a, b Hijack) int {
		if c := strings.Compare(a.Text, b.Text); c != 0 {
			return c
		}
		if c := strings.Compare(a.Mode, b.Mode); c != 0 {
			return c
		}
		if a.UI != b.UI {
			if a.UI {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Active, b.Active)
	})
	return out
}
