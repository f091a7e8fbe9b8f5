package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	labelled "github.com/agentplane/agentplane/eval"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/plane"
)

// validate is `agentplane validate`: every problem of a configuration,
// with its path and line, on standard output; what similarity alone may
// decide in each mode, and why; and the LLM endpoint, when one is
// configured: its key, its reachability, its model.
func (m *Main) validate(ctx context.Context, args []string) error {
	fs := m.flags("validate", "[--config FILE] [--roles R,...]")
	c := m.commonFlags(fs, false)
	roles := fs.String("roles", "", "say what similarity may decide for a principal with these roles, comma-separated (default: every role the toolboxes require)")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	rt, err := m.open(ctx, c, plane.Options{Core: m.routing()})
	var bad *configError
	switch {
	case errors.As(err, &bad):
		for _, p := range bad.probs {
			fmt.Fprintln(m.Stdout, p)
		}
		fmt.Fprintf(m.Stdout, "%s: %d problem(s)\n", bad.name, len(bad.probs))
		return exitCode(1)
	case err != nil:
		fmt.Fprintln(m.Stdout, err)
		return exitCode(1)
	}
	defer rt.Close(0)
	cfg := rt.Core.Config()
	fmt.Fprintf(m.Stdout, "%s: valid (%d modes, %d toolboxes, %d catalogs, %d commands, %d tools)\n",
		rt.Core.Name(), len(cfg.Modes), len(cfg.Toolboxes), len(cfg.Catalogs), len(cfg.Commands), len(cfg.Tools))
	who := splitList(*roles)
	if who == nil {
		who = labelled.AllRoles(rt.Core.Registry())
	}
	fmt.Fprintf(m.Stdout, "similarity alone (example_threshold %.4g), for roles [%s]:\n", cfg.Router.ExampleThreshold, strings.Join(who, ", "))
	for _, ms := range labelled.Similarity(rt.Core.Registry(), who) {
		fmt.Fprintf(m.Stdout, "  mode %s: %s — %s\n", ms.Mode, ms.State, ms.Why())
	}
	s, ok, err := llm.FromEnv(cfg.LLM, m.Getenv)
	if err == nil && ok {
		err = llm.NewOpenAI(s, nil).Check(ctx)
	}
	if err != nil {
		fmt.Fprintln(m.Stdout, err)
		return exitCode(1)
	}
	if ok {
		fmt.Fprintf(m.Stdout, "llm: %s serves %s\n", s.BaseURL, s.Model)
	}
	return nil
}
