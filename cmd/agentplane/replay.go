package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentplane/agentplane/replay"
)

// replay runs `agentplane replay [--config FILE] LOG`.
func (m *Main) replay(ctx context.Context, args []string) int {
	fs := m.flags("replay")
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(m.Stderr, "usage: agentplane replay [--config FILE] LOG.jsonl")
		return 2
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	defer f.Close()
	c, ok := m.load(ctx, *path, memory())
	if !ok {
		return 1
	}
	defer c.Close()
	n, err := replay.Run(ctx, c, f, m.Stdout)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	if n > 0 {
		fmt.Fprintf(m.Stdout, "%d divergence(s)\n", n)
		return 1
	}
	fmt.Fprintf(m.Stdout, "%s: replayed without divergence\n", fs.Arg(0))
	return 0
}
