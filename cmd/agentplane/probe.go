package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/probe"
)

// probe runs `agentplane probe [--config FILE] [--trace]`: utterances made
// from the configuration that must not act, routed in every mode; exit 1
// when any is not handed to the LLM (an invocation, a confirmation, a
// picker or a question).
func (m *Main) probe(ctx context.Context, args []string) error {
	fs := m.flags("probe", "[--config FILE] [--trace]")
	c := m.commonFlags(fs, false)
	trace := fs.Bool("trace", false, "print the router's trace of each hijack")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	rt, err := m.open(ctx, c, plane.Options{Core: m.routing()})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	rep, err := probe.Run(ctx, rt.Core, nil)
	if err != nil {
		return err
	}
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
		fmt.Fprintf(m.Stdout, "HIJACK %q in mode %s (ui %v%s): %s\n", h.Text, h.Mode, h.UI, active, what)
		if *trace {
			fmt.Fprintf(m.Stdout, "  · %s\n", strings.Join(h.Decision.Trace, "\n  · "))
		}
	}
	n := rep.Count()
	fmt.Fprintf(m.Stdout, "%s: %d utterances, %d turns routed, %d not handed to the LLM (%d invoke, %d confirm, %d picker, %d question)\n",
		rt.Core.Name(), rep.Utterances, rep.Turns, len(rep.Hijacks), n[probe.Invokes], n[probe.Confirms], n[probe.Picker], n[probe.Question])
	if len(rep.Hijacks) > 0 {
		return exitCode(1)
	}
	return nil
}
