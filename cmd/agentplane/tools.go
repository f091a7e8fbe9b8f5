package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store/memstore"
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
	reg, tools, ok := m.load(*path)
	if !ok {
		return 1
	}
	defer tools.Close()
	if *mode == "" {
		*mode = reg.DefaultMode()
	} else if _, ok := reg.Mode(*mode); !ok {
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
		for _, name := range tools.Names() {
			if !reg.ToolActive(*mode, roleList, name) {
				continue
			}
			t, _ := tools.Get(name)
			s := t.Spec()
			confirm := "no"
			if s.RequiresConfirmation || s.Risk == "high" {
				confirm = "always"
			} else if s.Impact == "external" {
				confirm = "unless the human asks"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Impact, s.Risk, confirm, s.InputSchema)
		}
		w.Flush()
		for _, srv := range tools.mcp {
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
	store := memstore.New()
	g, err := gate.New(reg, store, &gate.Options{Now: m.Now, Tools: tools.Registry})
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	sess, err := g.Open(ctx, "cli", *mode)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	res, err := g.Execute(ctx, gate.Invocation{SessionID: sess.ID, Tool: fs.Arg(0), Args: json.RawMessage(fs.Arg(1)),
		Origin: gate.Origin(*origin), Roles: roleList, RequestID: "cli-1"})
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
