package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/tool"
)

var start = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// newCore builds the runtime on the demo configuration the way
// cmd/agentplane does (the demo's outbox unless programs are given), with
// a fixed clock and sequential ids, over an in-memory store.
func newCore(tb testing.TB, programs map[string]tool.Program) *core.Core {
	tb.Helper()
	clock := start
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	if programs == nil {
		programs = demo.Programs(now)
	}
	n := 0
	c, err := core.New(context.Background(), core.Source{YAML: demo.YAML, Name: demo.Name},
		&core.Options{Now: now, NewID: func() string { n++; return fmt.Sprintf("s%d", n) }, Programs: programs})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func startSession(t testing.TB, c *core.Core, mode string) *agentplane.Session {
	t.Helper()
	s, err := c.Start(context.Background(), core.Start{Mode: mode, Principal: "p"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func turn(t *testing.T, c *core.Core, id string, in agentplane.TurnInput) core.Turn {
	t.Helper()
	tr, err := c.Turn(context.Background(), core.TurnRequest{SessionID: id, Principal: "p", Input: in})
	if err != nil {
		t.Fatalf("turn %+v: %v", in, err)
	}
	return tr
}

// Flow A — one-and-done: switch to DDR mode.
func TestFlowA(t *testing.T) {
	t.Parallel()
	c := newCore(t, nil)
	s := startSession(t, c, "")
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "switch to DDR mode"})
	if tr.Decision.Action != agentplane.ActionInvokeCommand || tr.Decision.CommandID != "set_mode" || tr.Decision.ResolvedID != "ddr" {
		t.Fatalf("decision %+v", tr.Decision)
	}
	if tr.Result.Status != agentplane.StatusSuccess || tr.Session.Mode != "ddr" {
		t.Fatalf("result %+v, mode %q", tr.Result, tr.Session.Mode)
	}
	// the DDR mode's toolboxes are now active: its catalog resolves, the sales commands do not
	tr = turn(t, c, s.ID, agentplane.TurnInput{Text: "open the agent control plane ddr"})
	if tr.Result == nil || tr.Session.AWC.Entity.ID != "AGN-000037" || tr.Session.AWC.EntityType != "ddr" {
		t.Fatalf("after mode change: %+v %+v", tr.Decision, tr.Session.AWC)
	}
}

// Flow B — launcher with UI: work on email templates, pick one.
func TestFlowB(t *testing.T) {
	t.Parallel()
	c := newCore(t, nil)
	s := startSession(t, c, "")
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "I want to work on email templates", UI: true})
	d := tr.Decision
	if d.Action != agentplane.ActionOpenPicker || d.CatalogID != "email_templates" || d.CommandID != "set_active_email_template" {
		t.Fatalf("turn 1: %+v", d)
	}
	if tr.Session.PendingPicker == nil || tr.Session.PendingPicker.CommandID != "set_active_email_template" {
		t.Fatalf("no pending picker recorded: %+v", tr.Session)
	}
	tr = turn(t, c, s.ID, agentplane.TurnInput{UI: true, Selection: &agentplane.Selection{CommandID: d.CommandID, ID: "TPL-123"}})
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
	c := newCore(t, nil)
	s := startSession(t, c, "")
	turn(t, c, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "rewrite this template for the CFO persona"})
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
	c := newCore(t, nil)
	s := startSession(t, c, "sales")
	turn(t, c, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "send this to the Q1 pilot list"})
	d := tr.Decision
	if d.Action != agentplane.ActionAskQuestion || d.QuestionText != "Confirm send to 'Q1 pilot list'?" || d.CommandID != "send_template_to_list" || d.ResolvedID != "LIST-9" {
		t.Fatalf("turn 1: %+v", d)
	}
	if tr.Result != nil || tr.Session.PendingConfirmation == nil {
		t.Fatalf("something ran before confirmation, or nothing is pending: %+v %+v", tr.Result, tr.Session)
	}
	version := tr.Session.Version
	tr = turn(t, c, s.ID, agentplane.TurnInput{Text: "Yes"})
	if tr.Decision.Action != agentplane.ActionInvokeCommand || !tr.Decision.Confirmed || tr.Decision.ResolvedID != "LIST-9" {
		t.Fatalf("turn 2: %+v", tr.Decision)
	}
	if tr.Result.Status != agentplane.StatusSuccess || tr.Result.Tool != "send_template" || string(tr.Result.Output) == "" {
		t.Fatalf("result %+v", tr.Result)
	}
	if tr.Session.PendingConfirmation != nil || tr.Session.Version != version+1 || tr.Session.AWC.Entity.ID != "TPL-123" {
		t.Fatalf("session after the confirmed turn: %+v", tr.Session)
	}
}

// TestFlowDToolUnavailable: a send tool that is not connected fails with
// tool_unavailable, and a failed result changes nothing: the confirmation
// stays pending, so the human may try again.
func TestFlowDToolUnavailable(t *testing.T) {
	t.Parallel()
	c := newCore(t, demo.SendWith(func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, fmt.Errorf("%w: the mail system is down", tool.ErrUnavailable)
	}))
	s := startSession(t, c, "sales")
	turn(t, c, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
	asked := turn(t, c, s.ID, agentplane.TurnInput{Text: "send this to the Q1 pilot list"})
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "yes"})
	if tr.Result.Status != agentplane.StatusFailed || tr.Result.Error.Code != agentplane.CodeToolUnavailable || !strings.Contains(tr.Result.Message, "mail system is down") {
		t.Fatalf("result %+v", tr.Result)
	}
	if tr.Session.PendingConfirmation == nil || tr.Session.Version != asked.Session.Version {
		t.Fatalf("session after the failed send: %+v", tr.Session)
	}
}

func TestFlowDDeclined(t *testing.T) {
	t.Parallel()
	c := newCore(t, nil)
	s := startSession(t, c, "sales")
	turn(t, c, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
	turn(t, c, s.ID, agentplane.TurnInput{Text: "send it to the Q1 pilot list"})
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "no"})
	if tr.Decision.ReasonCode != agentplane.ReasonConfirmationDeclined || tr.Result != nil || tr.Session.PendingConfirmation != nil {
		t.Fatalf("decline: %+v %+v", tr.Decision, tr.Session)
	}
	tr = turn(t, c, s.ID, agentplane.TurnInput{Text: "yes"})
	if tr.Decision.Action != agentplane.ActionContinueLLM {
		t.Fatalf("a yes after the decline invoked something: %+v", tr.Decision)
	}
}

func TestQuestionThenNumber(t *testing.T) {
	t.Parallel()
	c := newCore(t, nil)
	s := startSession(t, c, "")
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "open the outreach template"})
	if tr.Decision.Action != agentplane.ActionAskQuestion || len(tr.Decision.Options) != 2 {
		t.Fatalf("turn 1: %+v", tr.Decision)
	}
	tr = turn(t, c, s.ID, agentplane.TurnInput{Text: "2"})
	if tr.Result == nil || tr.Session.AWC.Entity.ID != "TPL-124" {
		t.Fatalf("turn 2: %+v %+v", tr.Decision, tr.Session.AWC)
	}
}

func TestGateRejectsWhatTheRouterWouldNotDo(t *testing.T) {
	t.Parallel()
	c := newCore(t, nil)
	st, g := core.StoreOf(c), c
	ctx := context.Background()
	s, _ := g.Open(ctx, gate.Opening{SessionID: "x", Mode: "general"})
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
	after, _ := st.Session(ctx, s.ID)
	if after.Version != s.Version || after.Mode != "general" {
		t.Fatalf("a rejected invocation changed the session: %+v", after)
	}
	// preconditions, then the confirmation policy: the gate refuses an
	// unconfirmed side effect even if asked directly
	s2, _ := g.Open(ctx, gate.Opening{SessionID: "y", Mode: "sales"})
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
	cur, _ := st.Session(ctx, s.ID)
	cur.Version++
	if err := st.Commit(ctx, &store.Commit{SessionID: s.ID, Session: cur}); err != nil { // someone else wrote
		t.Fatal(err)
	}
	stale := *cur // the same version again: conflict
	if err := st.Commit(ctx, &store.Commit{SessionID: s.ID, Session: &stale}); agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
		t.Fatalf("stale commit: %v", err)
	}
}

func TestRequestIDIsIdempotent(t *testing.T) {
	t.Parallel()
	c := newCore(t, nil)
	st, g := core.StoreOf(c), c
	ctx := context.Background()
	s, _ := g.Open(ctx, gate.Opening{SessionID: "x", Mode: "general"})
	inv := gate.Invocation{SessionID: s.ID, CommandID: "set_mode", ResolvedID: "ddr", RequestID: "req-1", Origin: gate.OriginUser}
	first, err := g.Execute(ctx, inv)
	if err != nil || first.Status != agentplane.StatusSuccess || first.Session.Version != 2 {
		t.Fatalf("first: %+v %v", first, err)
	}
	// a retry with the same request id runs nothing and answers the same
	again, err := g.Execute(ctx, inv)
	if err != nil || again.Status != agentplane.StatusSuccess || again.Message != first.Message || again.SnapshotID != first.SnapshotID {
		t.Fatalf("retry: %+v %v", again, err)
	}
	// the same request id with other arguments is refused, and runs nothing
	inv.ResolvedID = "sales"
	other, err := g.Execute(ctx, inv)
	if err != nil || other.Status != agentplane.StatusRejected || other.Error.Code != agentplane.CodeRequestConflict {
		t.Fatalf("reused id: %+v %v", other, err)
	}
	cur, _ := st.Session(ctx, s.ID)
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
	c := newCore(t, nil)
	ctx := context.Background()
	s := startSession(t, c, "sales")
	for _, text := range []string{"open the q1 cfo outreach template", "send it to the q1 pilot list", "yes", "hi", "/mode ddr"} {
		turn(t, c, s.ID, agentplane.TurnInput{Text: text})
	}
	recs, _ := c.Records(ctx, s.ID, 0)
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

// TestPreconditionsBeforeConfirmation: with nothing active, a send is not
// confirmed first and refused after the yes; the precondition is said at
// once and nothing is pending.
func TestPreconditionsBeforeConfirmation(t *testing.T) {
	t.Parallel()
	c := newCore(t, nil)
	s := startSession(t, c, "sales")
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "send this to the Q1 pilot list"})
	if tr.Decision.Action != agentplane.ActionInvokeCommand || tr.Result == nil || tr.Result.Error == nil ||
		tr.Result.Error.Code != agentplane.CodePreconditionFailed || !strings.Contains(tr.Result.Message, "needs an active email_template") {
		t.Fatalf("decision %+v, result %+v", tr.Decision, tr.Result)
	}
	if tr.Session.PendingConfirmation != nil {
		t.Fatal("a confirmation is pending for what cannot run")
	}
	if !strings.Contains(strings.Join(tr.Decision.Trace, "\n"), "preconditions fail") {
		t.Fatalf("the trace does not say why: %q", tr.Decision.Trace)
	}
}
