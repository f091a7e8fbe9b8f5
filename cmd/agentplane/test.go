package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/scenario"
	"github.com/agentplane/agentplane/tool"
)

// test runs `agentplane test [--config FILE] [--principal ID] [--roles
// R,...] PATH...`: conversation test files against a configuration, then
// what they covered and what they did not: the commands no turn decided,
// the tools that ran for real and those the files stubbed.
func (m *Main) test(ctx context.Context, args []string) error {
	fs := m.flags("test", "[--config FILE] [--principal ID] [--roles R,...] FILE.yaml...")
	cf := m.commonFlags(fs, false)
	principal := fs.String("principal", "", "who speaks in files that name nobody (default: "+scenario.DefaultPrincipal+")")
	roles := fs.String("roles", "", "the roles of files that give none, comma-separated")
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
	// tools are the core's the file runs on.
	outboxed := map[string]bool{}
	for _, t := range c.Config().Tools {
		outboxed[t.Name] = t.Program == demo.Program
	}
	tools := func(v core.View, now func() time.Time) ([]tool.Tool, error) {
		var out []tool.Tool
		send := demo.Programs(now)[demo.Program]
		for _, t := range v.Tools() {
			if outboxed[t.Spec.Name] {
				out = append(out, &tool.Func{S: t.Spec, Fn: send})
			}
		}
		return out, nil
	}
	opts := &scenario.Options{Tools: tools, Principal: *principal, Roles: splitList(*roles)}
	failed := 0
	decided := map[string]bool{}
	real := map[string]int{}         // tool -> calls that reached the real tool
	stubbed := map[string][]string{} // "tool x" / "catalog y" -> files
	external := map[string]bool{}    // tools the configuration reaches over HTTP
	for _, t := range c.Config().Tools {
		external[t.Name] = t.HTTP != nil
	}
	for _, file := range fs.Args() {
		res, err := scenario.Run(ctx, c, file, opts)
		if err != nil {
			fmt.Fprintf(m.Stdout, "FAIL %v\n", err)
			failed++
			continue
		}
		for _, id := range res.Decided {
			decided[id] = true
		}
		for _, s := range res.Stubbed {
			stubbed[s] = append(stubbed[s], file)
		}
		for name, n := range res.Calls {
			if !slices.Contains(res.Stubbed, "tool "+name) {
				real[name] += n
			}
		}
		if len(res.Failures) == 0 {
			fmt.Fprintf(m.Stdout, "ok   %s (as %s)\n", file, res.Principal)
			continue
		}
		failed++
		for _, f := range res.Failures {
			fmt.Fprintf(m.Stdout, "FAIL %s\n", f)
		}
	}
	fmt.Fprintf(m.Stdout, "%d passed, %d failed\n", fs.NArg()-failed, failed)
	var missing []string
	for _, cmd := range c.View().Registry().Commands() {
		if !decided[cmd.ID] {
			missing = append(missing, cmd.ID)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(m.Stdout, "not covered: no turn decided %s\n", strings.Join(missing, ", "))
	}
	var names []string
	for name := range stubbed {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(m.Stdout, "stubbed: %s (%s)\n", name, strings.Join(stubbed[name], ", "))
	}
	names = names[:0]
	for name := range real {
		if external[name] {
			names = append(names, fmt.Sprintf("%s (%d calls)", name, real[name]))
		}
	}
	slices.Sort(names)
	if len(names) > 0 {
		fmt.Fprintf(m.Stdout, "ran against the real service: %s\n", strings.Join(names, ", "))
	}
	if failed > 0 {
		return exitCode(1)
	}
	return nil
}
