package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/replay"
)

// replay runs `agentplane replay [--config FILE] LOG`.
func (m *Main) replay(ctx context.Context, args []string) error {
	fs := m.flags("replay", "[--config FILE] LOG.jsonl")
	c := m.commonFlags(fs, false)
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	rt, err := m.open(ctx, c, plane.Options{})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	n, err := replay.Run(ctx, rt.Core, f, m.Stdout)
	if err != nil {
		return err
	}
	if n > 0 {
		fmt.Fprintf(m.Stdout, "%d divergence(s)\n", n)
		return exitCode(1)
	}
	fmt.Fprintf(m.Stdout, "%s: replayed without divergence\n", fs.Arg(0))
	return nil
}
