package core_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/tool"
)

// TestOneResultWording: a command confirmed with its token (the page's
// Confirm button, the API) and the same command confirmed by "yes" in a
// turn run the same way and say the same thing — also when the command's
// tool has the command's name.
func TestOneResultWording(t *testing.T) {
	t.Parallel()
	const yaml = `version: 1
modes: [{key: desk, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [tickets], commands: [close_ticket], tools: [close_ticket]}]
catalogs: [{id: tickets, entity_type: ticket, items: [{id: T-1, display_name: Invoice shows wrong VAT}]}]
commands:
  - {id: close_ticket, display_name: Close the ticket, tool: close_ticket, parameter: ticket_id, resolver: {catalog: tickets},
     requires_confirmation: true, triggers: ["close [the] {item} [ticket]"]}
`
	var calls atomic.Int32
	closeTool := &tool.Func{S: tool.Spec{Name: "close_ticket", Usage: "Closes a ticket.", Impact: tool.ImpactExternal, Risk: tool.RiskLow,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"ticket_id":{"type":"string"}},"required":["ticket_id"]}`)},
		Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			calls.Add(1)
			return json.RawMessage(`{"closed":true}`), nil
		}}
	ctx := context.Background()
	c, err := core.New(ctx, core.Source{YAML: []byte(yaml), Name: "desk.yaml"}, &core.Options{Tools: []tool.Tool{closeTool}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ask := func() (*agentplane.Session, core.Turn) {
		s, _ := c.Start(ctx, core.Start{Principal: "dana"})
		tr, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "dana", Input: agentplane.TurnInput{Text: "close the invoice shows wrong vat ticket"}})
		if err != nil || tr.Decision.Action != agentplane.ActionAskQuestion || tr.ConfirmationToken == "" {
			t.Fatalf("ask: %+v %v", tr, err)
		}
		return s, tr
	}
	s, _ := ask()
	yes, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "dana", Input: agentplane.TurnInput{Text: "yes"}})
	if err != nil || yes.Result == nil || yes.Result.Status != agentplane.StatusSuccess {
		t.Fatalf("yes: %+v %v", yes, err)
	}
	s2, asked := ask()
	res, err := c.Intent(ctx, gate.IntentRequest{SessionID: s2.ID, Principal: "dana", Intent: agentplane.Intent{Type: agentplane.IntentActionCall,
		Action: "close_ticket", Args: json.RawMessage(`{"ticket_id":"T-1"}`), Origin: "user", ConfirmationToken: asked.ConfirmationToken}})
	if err != nil || res.Status != agentplane.StatusSuccess {
		t.Fatalf("confirm_intent: %+v %v", res, err)
	}
	if res.Message != yes.Result.Message {
		t.Errorf("two wordings for one action:\n  yes:            %q\n  confirm_intent: %q", yes.Result.Message, res.Message)
	}
	if yes.Result.Message != "Close the ticket: Invoice shows wrong VAT — done." {
		t.Errorf("the message: %q", yes.Result.Message)
	}
	// eight clients pressing Confirm at once: the command runs once
	s4, asked4 := ask()
	before := calls.Load()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c.Intent(ctx, gate.IntentRequest{SessionID: s4.ID, Principal: "dana", Intent: agentplane.Intent{Type: agentplane.IntentActionCall,
				Action: "close_ticket", Args: json.RawMessage(`{"ticket_id":"T-1"}`), Origin: "user", ConfirmationToken: asked4.ConfirmationToken}})
		})
	}
	wg.Wait()
	if n := calls.Load() - before; n != 1 {
		t.Fatalf("8 concurrent confirmations ran the tool %d times", n)
	}
	after, _ := c.Session(ctx, s2.ID)
	if after.PendingConfirmation != nil {
		t.Errorf("the confirmation is still pending: %+v", after.PendingConfirmation)
	}
	// the same name without a token is the command, which asks first:
	// calling the tool by the command's name does not skip the question
	s3, _ := c.Start(ctx, core.Start{Principal: "dana"})
	direct, err := c.Intent(ctx, gate.IntentRequest{SessionID: s3.ID, Principal: "dana", Intent: agentplane.Intent{Type: agentplane.IntentActionCall,
		Action: "close_ticket", Args: json.RawMessage(`{"ticket_id":"T-1"}`), Origin: "api"}})
	if err != nil || direct.Status != agentplane.StatusConfirmationRequired {
		t.Fatalf("without a token: %+v %v", direct, err)
	}
	// the LLM's proposal of the tool is confirmed as the tool it proposed
	base, _ := c.Session(ctx, s3.ID)
	proposed, err := c.Propose(ctx, core.Proposal{Base: base, Principal: "dana", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"T-1"}`), Question: "Close T-1?"})
	if err != nil {
		t.Fatalf("the LLM's proposal: %v", err)
	}
	res, err = c.Intent(ctx, gate.IntentRequest{SessionID: s3.ID, Principal: "dana", Intent: agentplane.Intent{Type: agentplane.IntentActionCall,
		Action: "close_ticket", Args: json.RawMessage(`{"ticket_id":"T-1"}`), Origin: "user", ConfirmationToken: proposed.ConfirmationToken}})
	if err != nil || res.Status != agentplane.StatusSuccess {
		t.Fatalf("the proposal confirmed: %+v %v", res, err)
	}
	if calls.Load() != 4 {
		t.Errorf("%d calls, want 4", calls.Load())
	}
}
