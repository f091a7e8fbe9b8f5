package conversation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/conversation"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/router"
	"github.com/agentplane/agentplane/store/memstore"
)

var start = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// newEngine wires the demo configuration the way cmd/agentplane does, with
// a fixed clock and sequential session ids.
func newEngine(tb testing.TB) *conversation.Engine {
	tb.Helper()
	clock := start
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	reg, store, g := demoGate(tb, &gate.Options{Now: now})
	n := 0
	return conversation.New(reg, g, store, &conversation.Options{Now: now, NewID: func() string { n++; return fmt.Sprintf("s%d", n) }})
}

// demoGate returns the demo registry and a gate over an in-memory store.
func demoGate(tb testing.TB, opts *gate.Options) (*router.Registry, *memstore.Store, *gate.Gate) {
	tb.Helper()
	cfg, err := demo.Config(nil)
	if err != nil {
		tb.Fatal(err)
	}
	reg, err := router.NewRegistry(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	store := memstore.New()
	g, err := gate.New(reg, store, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return reg, store, g
}

func turn(t *testing.T, e *conversation.Engine, id string, in agentplane.TurnInput) conversation.Turn {
	t.Helper()
	tr, err := e.Turn(context.Background(), id, in)
	if err != nil {
		t.Fatalf("turn %+v: %v", in, err)
	}
	return tr
}

// Flow A — one-and-done: switch to DDR mode.
func TestFlowA(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	s, _ := e.Start(context.Background(), "")
	tr := turn(t, e, s.ID, agentplane.TurnInput{Text: "switch to DDR mode"})
	if tr.Decision.Action != agentplane.ActionInvokeCommand || tr.Decision.CommandID != "set_mode" || tr.Decision.ResolvedID != "ddr" {
		t.Fatalf("decision %+v", tr.Decision)
	}
	if tr.Result.Status != agentplane.StatusSuccess || tr.Session.Mode != "ddr" {
		t.Fatalf("result %+v, mode %q", tr.Result, tr.Session.Mode)
	}
	// the DDR mode's toolboxes are now active: its catalog resolves, the sales commands do not
	tr = turn(t, e, s.ID, agentplane.TurnInput{Text: "open the agent control plane ddr"})
	if tr.Result == nil || tr.Session.AWC.Entity.ID != "AGN-000037" || tr.Session.AWC.EntityType != "ddr" {
		t.Fatalf("after mode change: %+v %+v", tr.Decision, tr.Session.AWC)
	}
}

// Flow B — launcher with UI: work on email templates, pick one.
func TestFlowB(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	s, _ := e.Start(context.Background(), "")
	tr := turn(t, e, s.ID, agentplane.TurnInput{Text: "I want to work on email templates", UI: true})
	d := tr.Decision
	if d.Action != agentplane.ActionOpenPicker || d.CatalogID != "email_templates" || d.CommandID != "set_active_email_template" {
		t.Fatalf("turn 1: %+v", d)
	}
	if tr.Session.PendingPicker == nil || tr.Session.PendingPicker.CommandID != "set_active_email_template" {
		t.Fatalf("no pending picker recorded: %+v", tr.Session)
	}
	tr = turn(t, e, s.ID, agentplane.TurnInput{UI: true, Selection: &agentplane.Selection{CommandID: d.CommandID, ID: "TPL-123"}})
	if tr.Decision.Action != agentplane.ActionInvokeCommand || tr.Result.Status != agentplane.StatusSuccess {
		t.Fatalf("turn 2: %+v %+v", tr.Decision, tr.Result)
	}
	awc := tr.Session.AWC
	if awc.EntityType != "email_template" || awc.Entity.ID != "TPL-123" || awc.Entity.DisplayName != "Q1 CFO Outreach" {
		t.Fatalf("AWC = %+v", awc)
	}
	if len(awc.RelatedEntities) != 1 || awc.RelatedEntities[0].Header.ID != "PERS-22" || awc.RelatedEntities[0].Role != "audience" {
		t.Fatalf("related = %+v", awc.RelatedEntities)
	}
	if tr.Session.PendingPicker != nil {
		t.Fatal("the picker stayed pending after the selection")
	}
}

// Flow C — the active template and its related persona, then the LLM.
func TestFlowC(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	s, _ := e.Start(context.Background(), "")
	turn(t, e, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
	tr := turn(t, e, s.ID, agentplane.TurnInput{Text: "rewrite this template for the CFO persona"})
	if tr.Decision.Action != agentplane.ActionContinueLLM || tr.Result != nil {
		t.Fatalf("decision %+v", tr.Decision)
	}
	awc := tr.Session.AWC
	if awc.Entity == nil || awc.Entity.ID != "TPL-123" || awc.RelatedEntities[0].Header.DisplayName != "CFO - MidMarket" {
		t.Fatalf("the LLM would not see the template and persona: %+v", awc)
	}
}

// Flow D — a side-effecting command asks for confirmation first.
func TestFlowD(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	s, _ := e.Start(context.Background(), "sales")
	turn(t, e, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
	tr := turn(t, e, s.ID, agentplane.TurnInput{Text: "send this to the Q1 pilot list"})
	d := tr.Decision
	if d.Action != agentplane.ActionAskQuestion || d.QuestionText != "Confirm send to 'Q1 pilot list'?" || d.CommandID != "send_template_to_list" || d.ResolvedID != "LIST-9" {
		t.Fatalf("turn 1: %+v", d)
	}
	if tr.Result != nil || tr.Session.PendingConfirmation == nil {
		t.Fatalf("something ran before confirmation, or nothing is pending: %+v %+v", tr.Result, tr.Session)
	}
	version := tr.Session.Version
	tr = turn(t, e, s.ID, agentplane.TurnInput{Text: "Yes"})
	if tr.Decision.Action != agentplane.ActionInvokeCommand || !tr.Decision.Confirmed || tr.Decision.ResolvedID != "LIST-9" {
		t.Fatalf("turn 2: %+v", tr.Decision)
	}
	// The send tool is an HTTP tool that the tools issue connects; until
	// then the gate says so, and a failed result changes nothing: the
	// confirmation stays pending, so the human may try again.
	if tr.Result.Status != agentplane.StatusFailed || tr.Result.Error.Code != agentplane.CodeToolUnavailable || tr.Result.Tool != "send_template" {
		t.Fatalf("result %+v", tr.Result)
	}
	if tr.Session.PendingConfirmation == nil || tr.Session.Version != version || tr.Session.AWC.Entity.ID != "TPL-123" {
		t.Fatalf("session after the confirmed turn: %+v", tr.Session)
	}
}

func TestFlowDDeclined(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	s, _ := e.Start(context.Background(), "sales")
	turn(t, e, s.ID, agentplane.TurnInput{Text: "send it to the Q1 pilot list"})
	tr := turn(t, e, s.ID, agentplane.TurnInput{Text: "no"})
	if tr.Decision.ReasonCode != agentplane.ReasonConfirmationDeclined || tr.Result != nil || tr.Session.PendingConfirmation != nil {
		t.Fatalf("decline: %+v %+v", tr.Decision, tr.Session)
	}
	tr = turn(t, e, s.ID, agentplane.TurnInput{Text: "yes"})
	if tr.Decision.Action != agentplane.ActionContinueLLM {
		t.Fatalf("a yes after the decline invoked something: %+v", tr.Decision)
	}
}

func TestQuestionThenNumber(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	s, _ := e.Start(context.Background(), "")
	tr := turn(t, e, s.ID, agentplane.TurnInput{Text: "open the outreach template"})
	if tr.Decision.Action != agentplane.ActionAskQuestion || len(tr.Decision.Options) != 2 {
		t.Fatalf("turn 1: %+v", tr.Decision)
	}
	tr = turn(t, e, s.ID, agentplane.TurnInput{Text: "2"})
	if tr.Result == nil || tr.Session.AWC.Entity.ID != "TPL-124" {
		t.Fatalf("turn 2: %+v %+v", tr.Decision, tr.Session.AWC)
	}
}

func TestGateRejectsWhatTheRouterWouldNotDo(t *testing.T) {
	t.Parallel()
	_, store, g := demoGate(t, nil)
	ctx := context.Background()
	s, _ := g.Open(ctx, "x", "general")
	tests := []struct {
		name string
		inv  gate.Invocation
		code string
	}{
		{"UnknownCommand", gate.Invocation{CommandID: "nope", ResolvedID: "x"}, agentplane.CodeUnknownAction},
		{"Inactive", gate.Invocation{CommandID: "send_template_to_list", ResolvedID: "LIST-9"}, agentplane.CodeInactiveAction},
		{"InventedID", gate.Invocation{CommandID: "set_mode", ResolvedID: "turbo"}, agentplane.CodeInvalidArgs},
		{"Launcher", gate.Invocation{CommandID: "open_email_templates", ResolvedID: "TPL-123"}, agentplane.CodeInvalidArgs},
		{"NoSession", gate.Invocation{SessionID: "ghost", CommandID: "set_mode", ResolvedID: "ddr"}, agentplane.CodeNotFound},
	}
	for _, tt := range tests {
		inv := tt.inv
		if inv.SessionID == "" {
			inv.SessionID = s.ID
		}
		inv.Origin = gate.OriginUser
		res, err := g.Execute(ctx, inv)
		if err != nil || res.Status != agentplane.StatusRejected || res.Error.Code != tt.code {
			t.Errorf("%s: %+v %v", tt.name, res, err)
		}
	}
	after, _ := store.Session(ctx, s.ID)
	if after.Version != s.Version || after.Mode != "general" {
		t.Fatalf("a rejected invocation changed the session: %+v", after)
	}
	// preconditions, then the confirmation policy: the gate refuses an
	// unconfirmed side effect even if asked directly
	s2, _ := g.Open(ctx, "y", "sales")
	res, _ := g.Execute(ctx, gate.Invocation{SessionID: s2.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginLLM})
	if res.Status != agentplane.StatusRejected || res.Error.Code != agentplane.CodePreconditionFailed {
		t.Fatalf("send without an active template: %+v", res)
	}
	g.Execute(ctx, gate.Invocation{SessionID: s2.ID, CommandID: "set_active_email_template", ResolvedID: "TPL-123", Origin: gate.OriginUser})
	res, _ = g.Execute(ctx, gate.Invocation{SessionID: s2.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginLLM})
	if res.Status != agentplane.StatusConfirmationRequired || res.ConfirmationToken != "" {
		t.Fatalf("unconfirmed send from the LLM (which must not see a token): %+v", res)
	}
	// a stale version loses
	cur, _ := store.Session(ctx, s.ID)
	cur.Version++
	if err := store.Commit(ctx, &gate.Commit{SessionID: s.ID, Session: cur}); err != nil { // someone else wrote
		t.Fatal(err)
	}
	stale := *cur // the same version again: conflict
	if err := store.Commit(ctx, &gate.Commit{SessionID: s.ID, Session: &stale}); agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
		t.Fatalf("stale commit: %v", err)
	}
}

func TestRequestIDIsIdempotent(t *testing.T) {
	t.Parallel()
	_, store, g := demoGate(t, nil)
	ctx := context.Background()
	s, _ := g.Open(ctx, "x", "general")
	inv := gate.Invocation{SessionID: s.ID, CommandID: "set_mode", ResolvedID: "ddr", RequestID: "req-1", Origin: gate.OriginUser}
	first, err := g.Execute(ctx, inv)
	if err != nil || first.Status != agentplane.StatusSuccess || first.Session.Version != 2 {
		t.Fatalf("first: %+v %v", first, err)
	}
	// a retry with the same request id, even with other arguments, runs nothing
	inv.ResolvedID = "sales"
	again, err := g.Execute(ctx, inv)
	if err != nil || again.Status != agentplane.StatusSuccess || again.Message != first.Message || again.SnapshotID != first.SnapshotID {
		t.Fatalf("retry: %+v %v", again, err)
	}
	cur, _ := store.Session(ctx, s.ID)
	if cur.Version != 2 || cur.Mode != "ddr" {
		t.Fatalf("the retry ran again: %+v", cur)
	}
	// a new request id runs
	inv.RequestID = "req-2"
	if r, _ := g.Execute(ctx, inv); r.Session.Mode != "sales" || r.Session.Version != 3 {
		t.Fatalf("new request: %+v", r)
	}
}

func TestAuditedConversationVerifies(t *testing.T) {
	t.Parallel()
	reg, store, g := demoGate(t, nil)
	e := conversation.New(reg, g, store, nil)
	ctx := context.Background()
	s, _ := e.Start(ctx, "sales")
	for _, text := range []string{"open the q1 cfo outreach template", "send it to the q1 pilot list", "yes", "hi", "/mode ddr"} {
		if _, err := e.Turn(ctx, s.ID, agentplane.TurnInput{Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	recs, _ := store.Records(ctx, s.ID)
	if len(recs) != 6 || recs[0].Kind != audit.KindOpen {
		t.Fatalf("%d records for an open and 5 turns", len(recs))
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
	recs = recs[1:]
	if r := recs[0]; r.Result == nil || r.Result.Status != agentplane.StatusSuccess || len(r.Result.StateDiff) == 0 || r.State.AWC.Entity.ID != "TPL-123" {
		t.Fatalf("first record: %+v", r)
	}
	if r := recs[1]; r.Result != nil || r.Decision.QuestionText != "Confirm send to 'Q1 pilot list'?" || r.State.PendingConfirmation == nil {
		t.Fatalf("second record: %+v", r)
	}
}
