package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/probe"
)

// probe runs `agentplane probe [--config FILE] [--trace]`: utterances made
// from the configuration that must not act, routed in every mode; exit 1
// when any would.
func (m *Main) probe(ctx context.Context, args []string) int {
	fs := m.flags("probe")
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	trace := fs.Bool("trace", false, "print the router's trace of each hijack")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	c, ok := m.routeCore(ctx, *path)
	if !ok {
		return 1
	}
	defer c.Close()
	rep, err := probe.Run(ctx, c, nil)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	for _, h := range rep.Sorted() {
		what := "invokes " + h.Decision.CommandID + "(" + h.Decision.ResolvedID + ")"
		if h.Decision.IsConfirmationQuestion() {
			what = "asks to confirm " + h.Decision.CommandID + "(" + h.Decision.ResolvedID + ")"
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
	fmt.Fprintf(m.Stdout, "%s: %d utterances, %d turns routed, %d would act\n", source(*path), rep.Utterances, rep.Turns, len(rep.Hijacks))
	if len(rep.Hijacks) > 0 {
		return 1
	}
	return 0
}
