package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/probe"
)

// probe runs `agentplane probe [--config FILE] [--principal ID] [--roles
// R,...] [--frames F,...] [--phrasings N] [--max N] [--summary]
// [--trace]`: utterances made from the configuration that must not act,
// put in what people say around commands and routed in every mode as the
// principal; exit 1 when more than --max of them are not handed to the
// LLM (an invocation, a confirmation, a picker or a question).
func (m *Main) probe(ctx context.Context, args []string) error {
	fs := m.flags("probe", "[--config FILE] [--principal ID] [--roles R,...] [--frames F,...] [--phrasings N] [--max N] [--summary] [--trace]")
	c := m.commonFlags(fs, false)
	trace := fs.Bool("trace", false, "print the router's trace of each hijack")
	summary := fs.Bool("summary", false, "print the counts and what was not covered, not each hijack")
	principal := fs.String("principal", "", "the user the sessions belong to, as a per-person provider is asked for items (default: the local principal)")
	roles := fs.String("roles", "", "the principal's roles, comma-separated: they decide which toolboxes are active")
	frames := fs.String("frames", "all", "the frames to put the phrases in, comma-separated: all, "+frameNames())
	phrasings := fs.Int("phrasings", 0, "use at most this many phrasings of each trigger (0: every one)")
	maxActs := fs.Int("max", 0, "exit 1 when more than this many turns are not handed to the LLM")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	fr, err := probe.ParseFrames(*frames)
	if err != nil {
		return usagef("--frames: %v", err)
	}
	if *maxActs < 0 || *phrasings < 0 {
		return usagef("--max and --phrasings must not be negative")
	}
	rt, err := m.open(ctx, c, plane.Options{Core: m.routing()})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	rep, err := probe.Run(ctx, rt.Core, &probe.Options{Frames: fr, Principal: *principal, Roles: splitList(*roles), PhrasingsPerTrigger: *phrasings})
	if err != nil {
		return err
	}
	w := m.Stdout
	if !*summary {
		for _, h := range rep.Sorted() {
			var what string
			switch d := h.Decision; h.Kind {
			case probe.Invokes:
				what = "invokes " + d.CommandID + "(" + d.ResolvedID + ")"
			case probe.Confirms:
				what = "asks to confirm " + d.CommandID + "(" + d.ResolvedID + ")"
			case probe.Picker:
				what = "opens a picker on " + d.Source().String() + " for " + d.CommandID
			default:
				what = "asks \"" + d.QuestionText + "\" for " + d.CommandID
			}
			active := ""
			if h.Active != "" {
				active = ", " + h.Active + " active"
			}
			fmt.Fprintf(w, "HIJACK %s %q in mode %s (ui %v%s): %s\n", h.Frame, h.Text, h.Mode, h.UI, active, what)
			if *trace {
				fmt.Fprintf(w, "  · %s\n", strings.Join(h.Decision.Trace, "\n  · "))
			}
		}
	}
	fmt.Fprintf(w, "%s as %s (roles [%s]):\n", rt.Core.Name(), rep.Principal, strings.Join(rep.Roles, ", "))
	fmt.Fprintf(w, "  %-12s %10s %8s %7s %8s %7s %9s\n", "frame", "utterances", "turns", "invoke", "confirm", "picker", "question")
	for _, f := range rep.Frames {
		fmt.Fprintf(w, "  %-12s %10d %8d %7d %8d %7d %9d\n", f.Frame, f.Utterances, f.Turns,
			f.Kinds[probe.Invokes], f.Kinds[probe.Confirms], f.Kinds[probe.Picker], f.Kinds[probe.Question])
	}
	n := rep.Count()
	fmt.Fprintf(w, "%s: %d utterances, %d turns routed, %d not handed to the LLM (%d invoke, %d confirm, %d picker, %d question)\n",
		rt.Core.Name(), rep.Utterances, rep.Turns, len(rep.Hijacks), n[probe.Invokes], n[probe.Confirms], n[probe.Picker], n[probe.Question])
	for _, g := range rep.Gaps {
		fmt.Fprintf(w, "not covered: %s: %s\n", g.Subject, g.Reason)
	}
	if len(rep.Hijacks) > *maxActs {
		return exitCode(1)
	}
	return nil
}

// frameNames lists the probe's frames for the usage text.
func frameNames() string {
	var s []string
	for _, f := range probe.AllFrames() {
		s = append(s, string(f))
	}
	return strings.Join(s, ", ")
}

// splitList splits a comma-separated flag value, dropping empty parts.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
