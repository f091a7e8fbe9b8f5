package main

import (
	"context"
	"fmt"
	"time"

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
	reg, ok := m.registry(*path)
	if !ok {
		return 1
	}
	failed := 0
	for _, file := range fs.Args() {
		var sets []*toolSet
		fails, err := scenario.Run(ctx, reg, file, func(now func() time.Time) (*tool.Registry, error) {
			ts, err := toolRegistry(reg, now)
			if err != nil {
				return nil, err
			}
			sets = append(sets, ts)
			return ts.Registry, nil
		})
		for _, ts := range sets {
			ts.Close()
		}
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
