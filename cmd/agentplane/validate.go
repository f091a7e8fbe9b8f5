package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/plane"
)

// validate is `agentplane validate`: every problem of a configuration,
// with its path and line, on standard output; and the LLM endpoint, when
// one is configured: its key, its reachability, its model.
func (m *Main) validate(ctx context.Context, args []string) error {
	fs := m.flags("validate", "[--config FILE]")
	c := m.commonFlags(fs, false)
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
