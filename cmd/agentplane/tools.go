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
	"github.com/agentplane/agentplane/plane"
)

// toolsCmd runs `agentplane tools list|call`.
func (m *Main) toolsCmd(ctx context.Context, args []string) error {
	const use = "list|call [--config FILE] [--mode KEY] [--roles R,R] [--origin ORIGIN] [NAME ARGS_JSON]"
	if len(args) == 0 || (args[0] != "list" && args[0] != "call") {
		return usagef("tools %s", use)
	}
	verb := args[0]
	fs := m.flags("tools "+verb, map[string]string{"list": "[--config FILE] [--mode KEY] [--roles R,R]",
		"call": "[--config FILE] [--mode KEY] [--roles R,R] [--origin ORIGIN] NAME ARGS_JSON"}[verb])
	c := m.commonFlags(fs, false)
	mode := fs.String("mode", "", "mode (default: the configuration's default mode)")
	roles := fs.String("roles", "", "the principal's roles, comma-separated")
	origin := fs.String("origin", string(gate.OriginAPI), "who asks: user, api, llm, mcp, workflow, agent_internal")
	want := 0
	if verb == "call" {
		want = 2
	}
	if err := parse(fs, args[1:], want, want); err != nil {
		return err
	}
	o := gate.Origin(*origin)
	if !o.Valid() {
		return usagef("--origin %q: want one of user, api, llm, mcp, workflow, agent_internal", *origin)
	}
	rt, err := m.open(ctx, c, plane.Options{})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	cc := rt.Core
	if *mode == "" {
		*mode = cc.View().Registry().DefaultMode()
	} else if !cc.ModeOK(*mode) {
		return fmt.Errorf("unknown mode %q", *mode)
	}
	var roleList []string
	if *roles != "" {
		roleList = strings.Split(*roles, ",")
	}
	if verb == "list" {
		w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(w, "TOOL\tIMPACT\tRISK\tCONFIRMS\tINPUT SCHEMA\n")
		for _, t := range cc.ActiveTools(*mode, roleList) {
			s := t.Spec
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Impact, s.Risk, policyText[t.Policy], s.InputSchema)
		}
		w.Flush()
		for _, h := range cc.MCPHealth() {
			if h.Up {
				fmt.Fprintf(m.Stdout, "MCP server %s: up, %d tools\n", h.Name, h.ToolCount)
			} else {
				fmt.Fprintf(m.Stdout, "MCP server %s: down (%s)\n", h.Name, h.Error)
			}
		}
		return nil
	}
	sess, err := cc.Start(ctx, core.Start{Mode: *mode, Principal: principal})
	if err != nil {
		return err
	}
	res, err := cc.Execute(ctx, gate.Invocation{SessionID: sess.ID, Tool: fs.Arg(0), Args: json.RawMessage(fs.Arg(1)),
		Origin: o, Principal: principal, Roles: roleList, RequestID: "cli-1"})
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Fprintln(m.Stdout, string(b))
	if res.Status != agentplane.StatusSuccess {
		return exitCode(1) // the result says why
	}
	return nil
}

// policyText is how `tools list` shows a confirmation policy.
var policyText = map[gate.Policy]string{
	gate.ConfirmNever:       "no",
	gate.ConfirmAlways:      "always",
	gate.ConfirmUnlessHuman: "unless the human asks",
}
