package eval

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/agentplane/agentplane"
)

// Advice is the example threshold (router.example_threshold, one setting
// for every command and mode) that decides the most lines of the file as
// labelled, and every line it decides otherwise than the configured one.
type Advice struct {
	Current   float64 // the configured threshold
	Suggested float64 // Current when no threshold tried does better
	// CorrectNow and CorrectThen count the lines decided as labelled at
	// each.
	CorrectNow, CorrectThen int
	// Matched counts the lines the example model matches to a command the
	// threshold may let act: the only lines a threshold can change.
	Matched int
	// Tried are the thresholds routed with, besides the current one.
	Tried []float64
	// Changes are the lines decided otherwise at Suggested, in file
	// order: every one, right or wrong.
	Changes []Change
}

// Change is a line another threshold decides otherwise.
type Change struct {
	Case            Case
	Before, After   agentplane.Decision
	WasRight, Right bool
}

// maxTries bounds how many thresholds advise routes the file with: each
// needs a router rebuilt (its example model trained again).
const maxTries = 4

// advise finds the threshold: it estimates, from the example model's
// confidence on each line, which thresholds would let the most lines of
// their own command act and the fewest others, then routes the whole file
// with the best few (a router rebuilt for each) and keeps the one that
// decides the most lines as labelled — so every change it lists is
// measured, not estimated.
func advise(ctx context.Context, r *runner, cases []Case, now []routed) (*Advice, error) {
	cur := r.c.View().Registry().Settings().ExampleThreshold
	adv := &Advice{Current: cur, Suggested: cur}
	for i, cs := range cases {
		if ok, _, _ := r.judge(cs, now[i]); ok {
			adv.CorrectNow++
		}
	}
	adv.CorrectThen = adv.CorrectNow

	type point struct {
		conf float64
		own  bool
	}
	var pts []point
	for _, cs := range cases {
		if cs.Text == "" || cs.Selection != nil {
			continue // a pick's decision is not the example model's
		}
		_, roles := r.who(cs)
		m, ok := r.rt.MatchExamples(r.c.View().Registry().ModeOf(cs.Mode), roles, cs.Text)
		if !ok || m.Declined != "" {
			continue // no threshold makes the router act on it
		}
		own := false
		for _, a := range cs.Expect.Alternatives() {
			if a.Action == agentplane.ActionContinueLLM {
				continue
			}
			if a.CommandID == m.CommandID {
				own = true
			} else if l, ok := r.c.View().Registry().Command(a.CommandID); ok && l.Kind == agentplane.KindLauncher && l.OnSelect == m.CommandID {
				own = true
			} else if c, ok := r.c.View().Registry().Command(m.CommandID); ok && c.Kind == agentplane.KindLauncher && c.OnSelect == a.CommandID {
				own = true // a launcher's picker names its on_select command
			}
		}
		pts = append(pts, point{m.Confidence, own})
	}
	adv.Matched = len(pts)
	estimate := func(th float64) int {
		n := 0
		for _, p := range pts {
			if p.conf >= th {
				if p.own {
					n++
				} else {
					n--
				}
			}
		}
		return n
	}
	// candidates: each confidence seen (letting it act) and just above it
	// (keeping it from acting)
	var cands []float64
	for _, p := range pts {
		for _, th := range []float64{p.conf, math.Nextafter(p.conf, 2)} {
			if th > 0 && th <= 1 && th != cur {
				cands = append(cands, th)
			}
		}
	}
	slices.Sort(cands)
	cands = slices.Compact(cands)
	base := estimate(cur)
	slices.SortStableFunc(cands, func(a, b float64) int {
		ea, eb := estimate(a), estimate(b)
		if ea != eb {
			return eb - ea
		}
		return cmpFloat(math.Abs(a-cur), math.Abs(b-cur))
	})
	for _, th := range cands {
		if len(adv.Tried) == maxTries || estimate(th) <= base {
			break
		}
		adv.Tried = append(adv.Tried, th)
		then, correct, err := routeAt(ctx, r, cases, th)
		if err != nil {
			return nil, err
		}
		if correct > adv.CorrectThen {
			adv.Suggested, adv.CorrectThen = th, correct
			adv.Changes = adv.Changes[:0]
			for i, cs := range cases {
				b, a := now[i].d, then[i].d
				if sameDecision(b, a) {
					continue
				}
				wasRight, _, _ := r.judge(cs, now[i])
				right, _, _ := r.judge(cs, then[i])
				adv.Changes = append(adv.Changes, Change{Case: cs, Before: b, After: a, WasRight: wasRight, Right: right})
			}
		}
	}
	return adv, nil
}

// routeAt routes the cases with the router rebuilt at threshold th, and
// counts those decided as labelled.
func routeAt(ctx context.Context, r *runner, cases []Case, th float64) ([]routed, int, error) {
	cfg := *r.c.Config()
	cfg.Router.ExampleThreshold = th
	n, err := r.c.Rebuild(ctx, &cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("eval: threshold %.3f: %w", th, err)
	}
	defer n.Close()
	at := &runner{c: n, rt: n.Router(), opts: r.opts, now: r.now, modes: map[string]bool{}}
	out := at.routeAll(ctx, cases)
	correct := 0
	for i, cs := range cases {
		if ok, _, _ := at.judge(cs, out[i]); ok {
			correct++
		}
	}
	return out, correct, nil
}

// sameDecision compares what two decisions decide, not their traces.
func sameDecision(a, b agentplane.Decision) bool {
	return a.Action == b.Action && a.CommandID == b.CommandID && a.ResolvedID == b.ResolvedID &&
		a.TargetMode == b.TargetMode && a.CatalogID == b.CatalogID && a.ProviderID == b.ProviderID &&
		a.HighlightID == b.HighlightID && a.QuestionText == b.QuestionText && a.ReasonCode == b.ReasonCode &&
		slices.Equal(a.OptionIDs, b.OptionIDs)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
