// Package probe checks a configuration for hijacks before it ships: it
// makes, from the configuration's own items, examples and trigger
// phrasings, utterances that must not act — each command phrase put in
// what people say around commands (frames: negations, questions, reports,
// statements, conditionals, sequences, plans, questions to a colleague,
// quoted suggestions, laughter, hesitation, reminders to self, another
// world's object with the same words) and each item mentioned without a
// request — routes each in every mode, with and without UI, with nothing
// active and with the item active, as a principal holding roles, and
// reports every one the router would not hand to the LLM — an invocation,
// a confirmation, a picker or a question (a picker is a hijack of the
// conversation too, though it runs nothing) — with its frame, its kind
// and the router's trace, and what it could not cover (a catalog whose
// provider gave the principal no items, a command active in no mode for
// the roles). A clean configuration reports none.
//
//	rep, err := probe.Run(ctx, c, &probe.Options{Principal: "dana", Roles: []string{"agent"}})
//	for _, h := range rep.Hijacks { fmt.Println(h.Frame, h.Text, h.Decision.CommandID) }
//	for _, g := range rep.Gaps { fmt.Println("not covered:", g.Subject, g.Reason) }
package probe

import (
	"context"
	"fmt"
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
	// PhrasingsPerTrigger bounds how many phrasings of each trigger are
	// used; 0 means every phrasing.
	PhrasingsPerTrigger int
	// Frames are the frames the phrases are put in; nil means every frame.
	Frames []Frame
	// Principal is who the sessions belong to: what a per-person provider
	// is asked for items as. "" means agentplane.LocalPrincipal.
	Principal string
	// Roles are the principal's roles: they decide which toolboxes, and so
	// which commands and catalogs, are active.
	Roles []string
}

// Hijack is a probe utterance the router would not hand to the LLM.
type Hijack struct {
	Text    string
	Frame   Frame
	Command string // the command whose phrase or item the utterance was made from
	Mode    string
	UI      bool
	Active  string // the id of the item active in the session, or ""
	Kind    Kind
	// Decision is what the router decided, with its trace.
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

// Kinds returns the kinds of hijack, worst first.
func Kinds() []Kind { return []Kind{Invokes, Confirms, Picker, Question} }

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

// FrameCount is what one frame's utterances did.
type FrameCount struct {
	Frame      Frame
	Utterances int // distinct utterances of the frame
	Turns      int // routed: utterances × modes × UI × session states
	// Kinds counts the turns not handed to the LLM, by what they did.
	Kinds map[Kind]int
}

// Acted is how many of the frame's turns were not handed to the LLM.
func (f FrameCount) Acted() int {
	n := 0
	for _, k := range f.Kinds {
		n += k
	}
	return n
}

// Gap is something the probe could not cover, and why.
type Gap struct {
	Subject string // "catalog:tickets", "command close_ticket", "frame colleague"
	Reason  string
}

// Report is what a probe found.
type Report struct {
	Principal  string   // who the sessions belonged to
	Roles      []string // the principal's roles
	Utterances int      // distinct probe utterances
	Turns      int      // routed: utterances × modes × UI × session states
	Hijacks    []Hijack
	Frames     []FrameCount // one per frame probed, in report order
	Gaps       []Gap        // what was not covered, in the order found
}

// Count returns how many hijacks are of each kind.
func (r Report) Count() map[Kind]int {
	m := map[Kind]int{}
	for _, h := range r.Hijacks {
		m[h.Kind]++
	}
	return m
}

// utterance is one probe utterance and what it was made from.
type utterance struct {
	text   string
	frame  Frame
	item   *agentplane.ResolverItem // the item the utterance is about, or nil
	cmd    *agentplane.CommandDefinition
	srcCat string // the catalog of the item, for making it active
}

// phrase is a command phrase: the words before its item, the item's name
// and the words after it (item "" for a phrase without one).
type phrase struct {
	before, name, after string
	item                *agentplane.ResolverItem
}

func (p phrase) text() string { return join(p.before, p.name, p.after) }

// join joins the non-empty parts with spaces.
func join(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p)
	}
	return b.String()
}

// source is what the probe got of one resolver source.
type source struct {
	ix    *resolve.Index             // an index it served (for finding the items examples name)
	items []*agentplane.ResolverItem // the first items of each mode it is active in, each once
	err   error                      // the last failure, when it served nothing
	modes int                        // how many modes it is active in for the roles
}

// Run probes the core's configuration. Routing is pure: nothing is
// recorded or run; providers are asked for items as the principal.
func Run(ctx context.Context, c *core.Core, opts *Options) (Report, error) {
	if opts == nil {
		opts = &Options{}
	}
	nItems := opts.ItemsPerSource
	if nItems <= 0 {
		nItems = 3
	}
	frames := opts.Frames
	if frames == nil {
		frames = AllFrames()
	}
	principal := opts.Principal
	if principal == "" {
		principal = agentplane.LocalPrincipal
	}
	reg := c.View().Registry()
	modes := c.Config().Modes
	rep := Report{Principal: principal, Roles: slices.Clone(opts.Roles)}
	gap := func(subject, format string, args ...any) {
		rep.Gaps = append(rep.Gaps, Gap{Subject: subject, Reason: fmt.Sprintf(format, args...)})
	}

	// the items of each source, as the principal is given them in each
	// mode the source is active in
	sources := map[agentplane.ResolverSource]*source{}
	var order []agentplane.ResolverSource
	for _, cmd := range reg.Commands() {
		id := cmd.SelectionSource()
		if id.IsZero() || sources[id] != nil {
			continue
		}
		s := &source{}
		sources[id], order = s, append(order, id)
		src, ok := reg.Source(id)
		if !ok {
			continue
		}
		seen := map[string]bool{}
		for _, m := range modes {
			if !reg.SourceActive(m.Key, opts.Roles, id) {
				continue
			}
			s.modes++
			cctx := resolve.WithCaller(ctx, resolve.Caller{UserID: principal, Roles: opts.Roles, Mode: m.Key})
			ix, _, err := src.Index(cctx)
			if err != nil {
				s.err = err
				continue
			}
			if s.ix == nil {
				s.ix = ix
			}
			for _, i := range ix.Items(nItems) {
				if it := ix.Item(i); !seen[it.Header.ID] {
					seen[it.Header.ID] = true
					s.items = append(s.items, it)
				}
			}
		}
	}
	for _, id := range order {
		s := sources[id]
		var users []string
		for _, cmd := range reg.Commands() {
			if cmd.SelectionSource() == id {
				users = append(users, cmd.ID)
			}
		}
		switch {
		case s.modes == 0:
			gap(id.String(), "active in no mode for roles [%s]: %s not probed with its items", strings.Join(opts.Roles, ", "), strings.Join(users, ", "))
		case len(s.items) == 0 && s.err != nil:
			gap(id.String(), "no items for %s (roles [%s]): %v; the item phrasings of %s were not probed", principal, strings.Join(opts.Roles, ", "), s.err, strings.Join(users, ", "))
		case len(s.items) == 0:
			gap(id.String(), "no items for %s (roles [%s]); the item phrasings of %s were not probed", principal, strings.Join(opts.Roles, ", "), strings.Join(users, ", "))
		}
	}
	for _, cmd := range reg.Commands() {
		active := false
		for _, m := range modes {
			active = active || reg.CommandActive(m.Key, opts.Roles, cmd.ID)
		}
		if !active {
			gap("command "+cmd.ID, "active in no mode for roles [%s]: its phrases were routed, but it could not act on them", strings.Join(opts.Roles, ", "))
		}
	}

	vocab := vocabulary(c, sources)
	names := foreign(colleagues, vocab, 2)
	objects, places := foreign(otherObjects, vocab, len(otherObjects)), foreign(otherPlaces, vocab, len(otherPlaces))
	wanted := map[Frame]bool{}
	for _, f := range frames {
		wanted[f] = true
	}
	if wanted[FrameColleague] && len(names) == 0 {
		gap("frame "+string(FrameColleague), "every colleague's name (%s) is a word of the configuration", strings.Join(colleagues, ", "))
	}
	if wanted[FrameOtherWorld] && len(objects)+len(places) == 0 {
		gap("frame "+string(FrameOtherWorld), "every other world's word is a word of the configuration")
	}

	var probes []utterance
	seen := map[string]bool{}
	add := func(u utterance) {
		if !seen[u.text] {
			seen[u.text] = true
			probes = append(probes, u)
		}
	}
	for _, cmd := range reg.Commands() {
		src := sources[cmd.SelectionSource()]
		var items []*agentplane.ResolverItem
		var ix *resolve.Index
		if src != nil {
			items, ix = src.items, src.ix
		}
		for _, p := range phrases(cmd, items, ix, opts.PhrasingsPerTrigger) {
			base := p.text()
			if base == "" {
				continue
			}
			for _, f := range frames {
				u := utterance{frame: f, item: p.item, cmd: cmd, srcCat: cmd.Source.CatalogID}
				switch f {
				case FrameMention:
					continue
				case FrameOtherWorld:
					if p.name != "" {
						for _, o := range objects {
							u.text = join(p.before, p.name, o, p.after)
							add(u)
						}
					} else {
						for _, pl := range places {
							u.text = join(base, pl)
							add(u)
						}
					}
					continue
				}
				for _, tpl := range frameTemplates[f] {
					text := strings.ReplaceAll(tpl, "{}", base)
					if strings.Contains(text, "{name}") {
						if len(names) == 0 {
							continue
						}
						for _, n := range names {
							u.text = strings.ReplaceAll(text, "{name}", n)
							add(u)
						}
						continue
					}
					u.text = text
					add(u)
				}
			}
		}
		if wanted[FrameMention] {
			for _, it := range items {
				for _, tpl := range mentions {
					add(utterance{text: strings.ReplaceAll(tpl, "{}", it.Header.DisplayName), frame: FrameMention, item: it, cmd: cmd, srcCat: cmd.Source.CatalogID})
				}
			}
		}
	}

	counts := map[Frame]*FrameCount{}
	for _, f := range frames {
		rep.Frames = append(rep.Frames, FrameCount{Frame: f, Kinds: map[Kind]int{}})
	}
	for i := range rep.Frames {
		counts[rep.Frames[i].Frame] = &rep.Frames[i]
	}
	for _, p := range probes {
		counts[p.frame].Utterances++
	}
	rep.Utterances = len(probes)
	rt := c.Router()
	now := c.Now()
	for _, m := range modes {
		for _, p := range probes {
			fc := counts[p.frame]
			states := []*agentplane.Session{{ID: "probe", Mode: m.Key, Version: 1, Owner: principal}}
			if p.item != nil && p.srcCat != "" {
				if cat, ok := reg.Catalog(p.srcCat); ok && cat.EntityType != "" {
					h := p.item.Header
					states = append(states, &agentplane.Session{ID: "probe", Mode: m.Key, Version: 1, Owner: principal,
						AWC: agentplane.ActiveWorkContext{EntityType: cat.EntityType, Entity: &h}})
				}
			}
			for _, s := range states {
				for _, ui := range []bool{false, true} {
					rep.Turns++
					fc.Turns++
					d, err := rt.Route(ctx, s, agentplane.TurnInput{Text: p.text, UI: ui, Roles: opts.Roles, Now: now})
					if err != nil || d.Action == agentplane.ActionContinueLLM {
						continue // malformed input is refused, not acted on
					}
					active := ""
					if s.AWC.Entity != nil {
						active = s.AWC.Entity.ID
					}
					k := KindOf(d)
					fc.Kinds[k]++
					rep.Hijacks = append(rep.Hijacks, Hijack{Text: p.text, Frame: p.frame, Command: p.cmd.ID, Mode: m.Key, UI: ui,
						Active: active, Kind: k, Decision: d})
				}
			}
		}
	}
	return rep, nil
}

// phrases are the command's own phrases: its examples (request preambles
// stripped), and its triggers' phrasings with each item's name in the
// slot (at most limit phrasings of each trigger; 0 means all).
func phrases(cmd *agentplane.CommandDefinition, items []*agentplane.ResolverItem, ix *resolve.Index, limit int) []phrase {
	var out []phrase
	for _, ex := range cmd.Examples {
		words := withoutPreamble(resolve.Fields(nil, resolve.Normalize(ex)))
		p := phrase{before: strings.Join(words, " ")}
		if ix != nil && cmd.Kind == agentplane.KindExecutable {
			if it, s, e := namedItem(ix, words); it != nil {
				p = phrase{before: strings.Join(words[:s], " "), name: strings.Join(words[s:e], " "), after: strings.Join(words[e:], " "), item: it}
			}
		}
		out = append(out, p)
	}
	for _, pat := range patternsOf(cmd) {
		for j, ph := range pat.Phrasings {
			if limit > 0 && j == limit {
				break
			}
			before, after := strings.Join(ph.Prefix, " "), strings.Join(ph.Suffix, " ")
			if !ph.Slot {
				out = append(out, phrase{before: before})
				continue
			}
			for _, it := range items {
				out = append(out, phrase{before: before, name: it.Header.DisplayName, after: after, item: it})
			}
		}
	}
	return out
}

// vocabulary is every normalized word with which the configuration names
// things of its world: modes, catalogs and their kinds, commands, and the
// items the probe was given. (A trigger's or an example's own words are
// not names: a careless trigger that says "board game" is what the
// other-world frame is to find.)
func vocabulary(c *core.Core, sources map[agentplane.ResolverSource]*source) map[string]bool {
	v := map[string]bool{}
	add := func(texts ...string) {
		for _, t := range texts {
			for _, w := range resolve.Fields(nil, resolve.Normalize(t)) {
				v[w] = true
			}
		}
	}
	cfg := c.Config()
	for _, m := range cfg.Modes {
		add(m.Key, m.DisplayName)
	}
	for _, cat := range cfg.Catalogs {
		add(cat.ID, cat.DisplayName, cat.EntityType)
		for _, it := range cat.Items {
			add(it.Header.ID, it.Header.DisplayName)
			add(it.Aliases...)
			add(it.Keywords...)
		}
	}
	for _, cmd := range c.View().Registry().Commands() {
		add(cmd.DisplayName)
	}
	for _, s := range sources {
		for _, it := range s.items {
			add(it.Header.ID, it.Header.DisplayName)
			add(it.Aliases...)
			add(it.Keywords...)
		}
	}
	return v
}

// foreign returns up to n of the phrases none of whose words is in vocab.
func foreign(phrases []string, vocab map[string]bool, n int) []string {
	var out []string
	for _, p := range phrases {
		if len(out) == n {
			break
		}
		ok := true
		for _, w := range resolve.Fields(nil, resolve.Normalize(p)) {
			ok = ok && !vocab[w]
		}
		if ok {
			out = append(out, p)
		}
	}
	return out
}

// preambles are the request openings stripped from an example before it
// is framed ("i want to order x" → "don't order x").
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

// namedItem is the item the longest run of words names exactly, with the
// run's bounds, or nil.
func namedItem(ix *resolve.Index, words []string) (*agentplane.ResolverItem, int, int) {
	for n := min(len(words), 6); n > 0; n-- {
		for s := 0; s+n <= len(words); s++ {
			if res := ix.ResolveExact(strings.Join(words[s:s+n], " "), 2); res.Strict() {
				return ix.Item(res.Items[0]), s, s + n
			}
		}
	}
	return nil, 0, 0
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

// Sorted returns the hijacks ordered by frame (in report order), text,
// mode, UI and active item.
func (r Report) Sorted() []Hijack {
	rank := map[Frame]int{}
	for i, f := range AllFrames() {
		rank[f] = i
	}
	out := slices.Clone(r.Hijacks)
	slices.SortStableFunc(out, func(a, b Hijack) int {
		if a.Frame != b.Frame {
			return rank[a.Frame] - rank[b.Frame]
		}
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
