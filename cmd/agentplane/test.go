package main

import (
	"context"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/scenario"
	"github.com/agentplane/agentplane/tool"
)

// test runs `agentplane test [--config FILE] PATH...`: conversation test
// files against a configuration.
func (m *Main) test(ctx context.Context, args []string) error {
	fs := m.flags("test", "[--config FILE] FILE.yaml...")
	cf := m.commonFlags(fs, false)
	if err := parse(fs, args, 1, -1); err != nil {
		return err
	}
	rt, err := m.open(ctx, cf, plane.Options{})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	c := rt.Core
	// Each file gets its own demo outbox, on its own clock; the other
	// tools are shared.
	outboxed := map[string]bool{}
	for _, t := range c.Config().Tools {
		outboxed[t.Name] = t.Program == demo.Program
	}
	tools := func(now func() time.Time) (*tool.Registry, error) {
		r := tool.NewRegistry()
		send := demo.Programs(now)[demo.Program]
		for _, name := range c.Tools().Names() {
			t, _ := c.Tools().Get(name)
			if outboxed[name] {
				t = &tool.Func{S: t.Spec(), Fn: send}
			}
			if err := r.Register(t); err != nil {
				return nil, err
			}
		}
		return r, nil
	}
	failed := 0
	for _, file := range fs.Args() {
		fails, err := scenario.Run(ctx, c, file, tools)
		if err != nil {
			fmt.Fprintf(m.Stdout, "FAIL %v\n", err)
			failed++
			continue
		}
		if len(fails) == 0 {
			fmt.Fprintf(m.Stdout, "ok   %s\n", file)
			continue
		}
		failed++
		for _, f := range fails {
			fmt.Fprintf(m.Stdout, "FAIL %s\n", f)
		}
	}
	fmt.Fprintf(m.Stdout, "%d passed, %d failed\n", fs.NArg()-failed, failed)
	if failed > 0 {
		return exitCode(1)
	}
	return nil
}
