package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	labelled "github.com/agentplane/agentplane/eval"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/plane"
)

// validate is `agentplane validate`: every problem of a configuration,
// with its path and line, on standard output; what similarity alone may
// decide in each mode, and why; every secret variable the
// environment does not set (a warning: the file is checked without its
// secrets; with --env an error, as serve makes it); and the LLM endpoint,
// when one is configured and its key is set: its reachability, its
// model.
func (m *Main) validate(ctx context.Context, args []string) error {
	fs := m.flags("validate", "[--config FILE] [--env] [--roles R,...]")
	c := m.commonFlags(fs, false)
	roles := fs.String("roles", "", "say what similarity may decide for a principal with these roles, comma-separated (default: every role the toolboxes require)")
	env := fs.Bool("env", false, "check the environment too, as serve will: a secret variable that is not set is an error, not a warning")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	opts := m.routing()
	m.programs(&opts)
	cfg, err := core.Load(source(c.config), &opts)
	var probs config.Problems
	switch {
	case errors.As(err, &probs):
		for _, p := range probs {
			fmt.Fprintln(m.Stdout, p)
		}
		fmt.Fprintf(m.Stdout, "%s: %d problem(s)\n", source(c.config), len(probs))
		return exitCode(1)
	case err != nil:
		fmt.Fprintln(m.Stdout, err)
		return exitCode(1)
	}
	missing := plane.MissingSecrets(cfg, m.Getenv, true)
	absent := map[string]bool{}
	for _, v := range cfg.SecretVars() {
		if m.Getenv(v.Name) == "" {
			absent[v.Name] = true
		}
	}
	for _, line := range missing {
		if *env {
			fmt.Fprintln(m.Stdout, line)
		} else {
			fmt.Fprintf(m.Stdout, "warning: %s (serve needs it)\n", line)
		}
	}
	if *env && len(missing) > 0 {
		fmt.Fprintf(m.Stdout, "%s: %d environment variable(s) not set\n", source(c.config), len(missing))
		return exitCode(1)
	}
	// the rest of the check runs with a stand-in for each secret that is
	// not set; nothing is called with it (no MCP server is connected, no
	// tool runs)
	getenv := func(k string) string {
		if v := m.Getenv(k); v != "" || !absent[k] {
			return v
		}
		return "validate-stand-in-for-" + k
	}
	rt, err := m.open(ctx, c, plane.Options{Core: opts, Getenv: getenv})
	if err != nil {
		fmt.Fprintln(m.Stdout, err)
		return exitCode(1)
	}
	defer rt.Close(0)
	cfg = rt.Core.Config()
	fmt.Fprintf(m.Stdout, "%s: valid (%d modes, %d toolboxes, %d catalogs, %d commands, %d tools)\n",
		rt.Core.Name(), len(cfg.Modes), len(cfg.Toolboxes), len(cfg.Catalogs), len(cfg.Commands), len(cfg.Tools))
	who := splitList(*roles)
	if who == nil {
		who = labelled.AllRoles(rt.Core.View().Registry())
	}
	fmt.Fprintf(m.Stdout, "similarity alone (example_threshold %.4g), for roles [%s]:\n", cfg.Router.ExampleThreshold, strings.Join(who, ", "))
	for _, ms := range labelled.Similarity(rt.Core.View().Registry(), who) {
		fmt.Fprintf(m.Stdout, "  mode %s: %s — %s\n", ms.Mode, ms.State, ms.Why())
	}
	if cfg.LLM != nil && absent[cfg.LLM.APIKeyEnv] && m.Getenv("AGENTPLANE_LLM_API_KEY") == "" {
		fmt.Fprintln(m.Stdout, "llm: not checked: its key is not set")
		return nil
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
