package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentplane/agentplane/workflow"
)

// workflowCmd is `agentplane workflow validate [--config FILE] FILE`:
// every problem of a workflow definition, with its line, against the
// configuration's tools.
func (m *Main) workflowCmd(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] != "validate" {
		fmt.Fprintln(m.Stderr, "Usage: agentplane workflow validate [--config FILE] FILE")
		return 2
	}
	fs := m.flags("workflow validate")
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(m.Stderr, "Usage: agentplane workflow validate [--config FILE] FILE")
		return 2
	}
	file := fs.Arg(0)
	opts := m.options(*path, memory())
	opts.SkipMCP = true
	c, ok := m.loadWith(ctx, *path, opts)
	if !ok {
		return 1
	}
	defer c.Close()
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	known := func(name string) bool { _, ok := c.Tools().Get(name); return ok }
	def, err := workflow.Parse(data, file, known)
	var probs workflow.Problems
	switch {
	case errors.As(err, &probs):
		for _, p := range probs {
			fmt.Fprintln(m.Stdout, p)
		}
		fmt.Fprintf(m.Stdout, "%s: %d problem(s)\n", file, len(probs))
		return 1
	case err != nil:
		fmt.Fprintf(m.Stdout, "%v\n", err)
		return 1
	}
	layers, _ := def.Layers()
	fmt.Fprintf(m.Stdout, "%s: valid (%d tasks in %d layers)\n", file, len(def.Tasks), len(layers))
	return 0
}
