package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/tool"
)

func TestDemoConfigIsValid(t *testing.T) {
	t.Parallel()
	cfg, err := Config(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DefaultMode().Key != "general" || len(cfg.Modes) != 3 {
		t.Fatalf("modes = %+v", cfg.Modes)
	}
}

func TestOutboxSendsOncePerRequest(t *testing.T) {
	t.Parallel()
	o := NewOutbox(func() time.Time { return time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) })
	send := o.Programs()[Program]
	sess := &agentplane.Session{ID: "s", Mode: "sales", Version: 3, AWC: agentplane.ActiveWorkContext{EntityType: "email_template",
		Entity: &agentplane.EntityHeader{ID: "TPL-123", DisplayName: "Q1 CFO Outreach"}}}
	ctx := tool.WithCallInfo(context.Background(), tool.CallInfo{Context: agentplane.InvocationContext{SessionID: "s", RequestID: "r1", ActiveWorkContext: sess.AWC}, Session: sess})
	a, err := send(ctx, json.RawMessage(`{"list_id":"LIST-9"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := send(ctx, json.RawMessage(`{"list_id":"LIST-9"}`)) // a retry of the same request
	if string(a) != string(b) || len(o.Sends()) != 1 {
		t.Fatalf("retry sent again: %s / %s, %d sends", a, b, len(o.Sends()))
	}
	s := o.Sends()[0]
	if s.TemplateID != "TPL-123" || s.ListID != "LIST-9" || s.RequestID != "r1" || s.ID != 1 {
		t.Fatalf("send = %+v", s)
	}
	ctx2 := tool.WithCallInfo(context.Background(), tool.CallInfo{Context: agentplane.InvocationContext{SessionID: "s", RequestID: "r2"}, Session: &agentplane.Session{ID: "s"}})
	if _, err := send(ctx2, json.RawMessage(`{"list_id":"LIST-9"}`)); err == nil || !strings.Contains(err.Error(), "no email template is active") {
		t.Fatalf("send without a template: %v", err)
	}
	if len(o.Sends()) != 1 {
		t.Fatal("a refused send was recorded")
	}
}

// TestOutboxSendsNothingAfterItsContextEnds: a call the gate gave up on
// (timed out) must not act afterwards.
func TestOutboxSendsNothingAfterItsContextEnds(t *testing.T) {
	t.Parallel()
	o := NewOutbox(nil)
	sess := &agentplane.Session{ID: "s", AWC: agentplane.ActiveWorkContext{EntityType: "email_template", Entity: &agentplane.EntityHeader{ID: "TPL-123"}}}
	ctx, cancel := context.WithCancel(tool.WithCallInfo(context.Background(), tool.CallInfo{Context: agentplane.InvocationContext{SessionID: "s", RequestID: "r", ActiveWorkContext: sess.AWC}, Session: sess}))
	cancel()
	if _, err := o.Programs()[Program](ctx, json.RawMessage(`{"list_id":"LIST-9"}`)); err == nil {
		t.Fatal("a call whose context had ended succeeded")
	}
	if len(o.Sends()) != 0 {
		t.Fatal("it sent")
	}
}
