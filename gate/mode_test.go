package gate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
)

// launcherYAML has launchers in the home mode whose selections run in the
// support mode: one plain, one that needs confirmation.
const launcherYAML = `version: 1
modes:
  - {key: home, display_name: Home, default: true, toolboxes: [core, desk]}
  - {key: support, display_name: Support, toolboxes: [core, support]}
toolboxes:
  - {id: core, catalogs: [modes], commands: [set_mode]}
  - {id: desk, commands: [browse_tickets, browse_escalations]}
  - {id: support, catalogs: [tickets], commands: [open_ticket, escalate]}
catalogs:
  - id: tickets
    entity_type: ticket
    items: [{id: T-1, display_name: Login fails}, {id: T-2, display_name: Export is slow}]
commands:
  - {id: set_mode, tool: agent_set_mode, parameter: mode, resolver: {catalog: modes}, sets_session_mode: true}
  - {id: open_ticket, tool: agent_set_active_entity, parameter: ticket, resolver: {catalog: tickets}, sets_active_context: true, active_entity_type: ticket}
  - {id: escalate, tool: agent_set_active_entity, parameter: ticket, resolver: {catalog: tickets}, sets_active_context: true, active_entity_type: ticket, requires_confirmation: true}
  - {id: browse_tickets, kind: launcher, target_catalog: tickets, on_select: open_ticket, target_mode: support}
  - {id: browse_escalations, kind: launcher, target_catalog: tickets, on_select: escalate, target_mode: support}
`

func launcherCore(t *testing.T) *core.Core {
	t.Helper()
	c, err := core.New(context.Background(), core.Source{YAML: []byte(launcherYAML), Name: "launchers.yaml"}, &core.Options{SkipMCP: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLauncherTargetMode: a command runs in another mode only as the
// selection of a launcher active in the session's mode whose target mode
// that is; it is checked there, and its success switches the session.
// Anything else is refused and changes nothing.
func TestLauncherTargetMode(t *testing.T) {
	t.Parallel()
	c := launcherCore(t)
	g, ctx := c, context.Background()
	open := func(id string) {
		t.Helper()
		if _, err := g.Open(ctx, gate.Opening{SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(inv gate.Invocation) agentplane.ExecutionResult {
		t.Helper()
		if inv.Origin == "" {
			inv.Origin = gate.OriginUser
		}
		res, err := g.Execute(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	open("a")
	res := exec(gate.Invocation{SessionID: "a", CommandID: "open_ticket", ResolvedID: "T-2", Mode: "support", RequestID: "r1"})
	if res.Status != agentplane.StatusSuccess || res.Session.Mode != "support" || res.Session.AWC.Entity.ID != "T-2" {
		t.Fatalf("launcher selection: %+v", res)
	}
	if !strings.HasPrefix(res.Message, "Mode: Support. Now working on ticket") {
		t.Fatalf("message %q", res.Message)
	}
	var modeOp bool
	for _, op := range res.StateDiff {
		modeOp = modeOp || op.Path == "/mode" && string(op.Value) == `"support"`
	}
	if !modeOp {
		t.Fatalf("the diff does not show the mode switch: %+v", res.StateDiff)
	}
	recs, _ := c.Records(ctx, "a", 0)
	if last := recs[len(recs)-1]; last.Intent == nil || last.Intent.Mode != "support" || last.State.Mode != "support" {
		t.Fatalf("the record does not hold the mode: %+v", last)
	}
	// the same request id for the command without the mode is another
	// invocation
	if res := exec(gate.Invocation{SessionID: "a", CommandID: "open_ticket", ResolvedID: "T-2", RequestID: "r1"}); res.Error == nil || res.Error.Code != agentplane.CodeRequestConflict {
		t.Fatalf("reused request id: %+v", res)
	}

	refused := []struct {
		name string
		inv  gate.Invocation
		code string
	}{
		{"NoMode", gate.Invocation{CommandID: "open_ticket", ResolvedID: "T-1"}, agentplane.CodeInactiveAction},
		{"NoLauncher", gate.Invocation{CommandID: "set_mode", ResolvedID: "support", Mode: "support"}, agentplane.CodeInactiveAction},
		{"WrongTarget", gate.Invocation{CommandID: "open_ticket", ResolvedID: "T-1", Mode: "nope"}, agentplane.CodeInvalidArgs},
		{"Tool", gate.Invocation{Tool: "agent_set_mode", Args: json.RawMessage(`{"mode":"support"}`), Mode: "support"}, agentplane.CodeInvalidArgs},
		{"NotAnItem", gate.Invocation{CommandID: "open_ticket", ResolvedID: "T-9", Mode: "support"}, agentplane.CodeInvalidArgs},
	}
	for _, tt := range refused {
		open("r-" + tt.name)
		inv := tt.inv
		inv.SessionID = "r-" + tt.name
		res := exec(inv)
		if res.Status != agentplane.StatusRejected || res.Error.Code != tt.code {
			t.Errorf("%s: %+v, want %s", tt.name, res, tt.code)
			continue
		}
		if res.Session.Mode != "home" || res.Session.Version != 1 || len(res.StateDiff) != 0 {
			t.Errorf("%s changed the session: %+v", tt.name, res.Session)
		}
	}

	// from the support mode the launcher is not active: no way back in
	// through it
	if res := exec(gate.Invocation{SessionID: "a", CommandID: "open_ticket", ResolvedID: "T-1", Mode: "home"}); res.Error == nil || res.Error.Code != agentplane.CodeInactiveAction {
		t.Fatalf("a mode no launcher targets: %+v", res)
	}
}

// TestLauncherTargetModeConfirmation: a confirmation binds the mode switch
// with the item; a token asked for one does not confirm the other.
func TestLauncherTargetModeConfirmation(t *testing.T) {
	t.Parallel()
	c := launcherCore(t)
	ctx := context.Background()
	if _, err := c.Open(ctx, gate.Opening{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	intent := func(args, mode, token, req string) agentplane.ExecutionResult {
		t.Helper()
		res, err := c.Intent(ctx, gate.IntentRequest{SessionID: "s", Principal: "ann", Intent: agentplane.Intent{
			Type: agentplane.IntentActionCall, Action: "escalate", Args: json.RawMessage(args), Mode: mode, ConfirmationToken: token, RequestID: req}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	asked := intent(`{"ticket":"T-1"}`, "support", "", "q1")
	if asked.Status != agentplane.StatusConfirmationRequired || asked.ConfirmationToken == "" {
		t.Fatalf("ask: %+v", asked)
	}
	if res := intent(`{"ticket":"T-1"}`, "", asked.ConfirmationToken, "q2"); res.Error == nil || res.Error.Code != agentplane.CodeInactiveAction {
		t.Fatalf("without the mode: %+v", res)
	}
	res := intent(`{"ticket":"T-1"}`, "support", asked.ConfirmationToken, "q3")
	if res.Status != agentplane.StatusSuccess || res.Session.Mode != "support" {
		t.Fatalf("confirmed: %+v", res)
	}

	// a token asked in the target mode itself does not switch from another
	if _, err := c.Open(ctx, gate.Opening{SessionID: "t", Mode: "support"}); err != nil {
		t.Fatal(err)
	}
	in := agentplane.Intent{Type: agentplane.IntentActionCall, Action: "escalate", Args: json.RawMessage(`{"ticket":"T-2"}`)}
	first, _ := c.Intent(ctx, gate.IntentRequest{SessionID: "t", Principal: "ann", Intent: in})
	in.Mode, in.ConfirmationToken = "support", first.ConfirmationToken
	if res, _ := c.Intent(ctx, gate.IntentRequest{SessionID: "t", Principal: "ann", Intent: in}); res.Status != agentplane.StatusSuccess {
		t.Fatalf("mode equal to the session's is no switch: %+v", res)
	}
}
