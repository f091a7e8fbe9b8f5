package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
)

// toolsCmd runs `agentplane tools list|call`.
func (m *Main) toolsCmd(ctx context.Context, args []string) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "call") {
		fmt.Fprintln(m.Stderr, "usage: agentplane tools list [--config FILE] [--mode KEY] [--roles R,R]\n       agentplane tools call [--config FILE] [--mode KEY] [--roles R,R] [--origin ORIGIN] NAME ARGS_JSON")
		return 2
	}
	fs := m.flags("tools " + args[0])
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	mode := fs.String("mode", "", "mode (default: the configuration's default mode)")
	roles := fs.String("roles", "", "the principal's roles, comma-separated")
	origin := fs.String("origin", string(gate.OriginAPI), "who asks: user, api, llm, mcp, workflow, agent_internal")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	o := gate.Origin(*origin)
	if !o.Valid() {
		fmt.Fprintf(m.Stderr, "agentplane: --origin %q: want one of user, api, llm, mcp, workflow, agent_internal\n", *origin)
		return 2
	}
	c, ok := m.load(ctx, *path, memory())
	if !ok {
		return 1
	}
	defer c.Close()
	if *mode == "" {
		*mode = c.Registry().DefaultMode()
	} else if !c.ModeOK(*mode) {
		fmt.Fprintf(m.Stderr, "agentplane: unknown mode %q\n", *mode)
		return 1
	}
	var roleList []string
	if *roles != "" {
		roleList = strings.Split(*roles, ",")
	}
	if args[0] == "list" {
		if fs.NArg() != 0 {
			fmt.Fprintf(m.Stderr, "agentplane: unexpected argument %q\n", fs.Arg(0))
			return 2
		}
		w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(w, "TOOL\tIMPACT\tRISK\tCONFIRMS\tINPUT SCHEMA\n")
		for _, t := range c.ActiveTools(*mode, roleList) {
			s := t.Spec
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Impact, s.Risk, policyText[t.Policy], s.InputSchema)
		}
		w.Flush()
		for _, srv := range c.MCPServers() {
			h := srv.Health()
			if h.Up {
				fmt.Fprintf(m.Stdout, "MCP server %s: up, %d tools\n", srv.Name(), h.ToolCount)
			} else {
				fmt.Fprintf(m.Stdout, "MCP server %s: down (%s)\n", srv.Name(), h.Error)
			}
		}
		return 0
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(m.Stderr, "usage: agentplane tools call [flags] NAME ARGS_JSON")
		return 2
	}
	sess, err := c.Start(ctx, core.Start{Mode: *mode, Principal: principal})
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	res, err := c.Execute(ctx, gate.Invocation{SessionID: sess.ID, Tool: fs.Arg(0), Args: json.RawMessage(fs.Arg(1)),
		Origin: o, Principal: principal, Roles: roleList, RequestID: "cli-1"})
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Fprintln(m.Stdout, string(b))
	if res.Status != agentplane.StatusSuccess {
		return 1
	}
	return 0
}

// policyText is how `tools list` shows a confirmation policy.
var policyText = map[gate.Policy]string{
	gate.ConfirmNever:       "no",
	gate.ConfirmAlways:      "always",
	gate.ConfirmUnlessHuman: "unless the human asks",
}
