package main

import (
	"context"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/scenario"
	"github.com/agentplane/agentplane/tool"
)

// test runs `agentplane test [--config FILE] PATH...`: conversation test
// files against a configuration.
func (m *Main) test(ctx context.Context, args []string) int {
	fs := m.flags("test")
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(m.Stderr, "usage: agentplane test [--config FILE] FILE.yaml...")
		return 2
	}
	c, ok := m.load(ctx, *path, memory())
	if !ok {
		return 1
	}
	defer c.Close()
	// Each file gets its own demo outbox, on its own clock; the other
	// tools are shared.
	var tools scenario.Tools
	if *path == "" {
		tools = func(now func() time.Time) (*tool.Registry, error) {
			r := tool.NewRegistry()
			for _, name := range c.Tools().Names() {
				if name == demo.SendTemplateTool {
					continue
				}
				t, _ := c.Tools().Get(name)
				if err := r.Register(t); err != nil {
					return nil, err
				}
			}
			return r, r.Register(demo.NewOutbox(now).Tool())
		}
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
		return 1
	}
	return 0
}
