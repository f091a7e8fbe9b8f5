package agentplane_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/docs/schemas"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/tool"
)

// TestEmittedObjectsMatchSchemas runs conversations that reach every
// result status and validates every execution result and every state
// snapshot they produce against the published schemas.
func TestEmittedObjectsMatchSchemas(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	// a send tool that is not connected: its results are failures
	down := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, tool.ErrUnavailable
	}
	c := demotest.Core(t, &core.Options{Now: func() time.Time { return now }, Programs: demo.SendWith(down)})
	g := c
	ctx := context.Background()
	sess, _ := c.Start(ctx, core.Start{})
	statuses := map[agentplane.Status]int{}
	check := func(res *agentplane.ExecutionResult, s *agentplane.Session) {
		t.Helper()
		if res != nil {
			statuses[res.Status]++
			if err := set.Validate(schemas.ExecutionResult, res); err != nil {
				t.Error(err)
			}
		}
		if err := set.Validate(schemas.StateSnapshot, s.Snapshot(now)); err != nil {
			t.Error(err)
		}
	}
	for _, text := range []string{
		"switch to sales mode", "I want to work on email templates", "1", "open the outreach template", "2",
		"send this to the q1 pilot list", "yes", "close the q1 cto outreach template", "/mode", "hello",
	} {
		tr, err := c.Turn(ctx, core.TurnRequest{SessionID: sess.ID, Input: agentplane.TurnInput{Text: text}})
		if err != nil {
			t.Fatal(err)
		}
		check(tr.Result, tr.Session)
		if err := set.Validate(schemas.Decision, tr.Decision); err != nil {
			t.Errorf("%q: %v", text, err)
		}
	}
	for _, inv := range []gate.Invocation{
		{SessionID: sess.ID, CommandID: "nope", ResolvedID: "x"},
		{SessionID: sess.ID, CommandID: "set_mode", ResolvedID: "turbo"},
		{SessionID: sess.ID, CommandID: "set_active_email_template", ResolvedID: "TPL-123", Origin: gate.OriginUser},
		{SessionID: sess.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginLLM},
		{SessionID: sess.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginUser},
		{SessionID: sess.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginUser, ConfirmationToken: "forged"},
		{SessionID: "ghost", CommandID: "set_mode", ResolvedID: "ddr"},
	} {
		res, err := g.Execute(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		statuses[res.Status]++
		if err := set.Validate(schemas.ExecutionResult, res); err != nil {
			t.Error(err)
		}
	}
	for _, st := range []agentplane.Status{agentplane.StatusSuccess, agentplane.StatusRejected, agentplane.StatusFailed, agentplane.StatusConfirmationRequired} {
		if statuses[st] == 0 {
			t.Errorf("no %s result was produced, so its shape went unchecked", st)
		}
	}
	for _, in := range []agentplane.Intent{
		{Type: agentplane.IntentActionCall, Action: "set_mode", Args: json.RawMessage(`{"mode":"ddr"}`), RequestID: "r1", Origin: "user"},
		{Type: agentplane.IntentClarificationRequest, Question: "Which template?", Origin: "llm"},
	} {
		if err := set.Validate(schemas.Intent, in); err != nil {
			t.Error(err)
		}
	}
}

// TestSchemasRejectMalformedObjects shows the validator is not a rubber
// stamp: objects that break the protocol fail.
func TestSchemasRejectMalformedObjects(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		schema string
		v      any
		want   string
	}{
		{schemas.ExecutionResult, map[string]any{"status": "success", "message": "x"}, "state_diff"},
		{schemas.ExecutionResult, map[string]any{"status": "rejected", "message": "x", "state_diff": []any{}}, "error"},
		{schemas.ExecutionResult, map[string]any{"status": "failed", "message": "x", "state_diff": []any{}, "error": map[string]any{"code": "oops", "detail": "d"}}, "code"},
		{schemas.ExecutionResult, map[string]any{"status": "success", "message": "x", "state_diff": []any{map[string]any{"op": "replace", "path": "/mode"}}}, "value"},
		{schemas.StateSnapshot, map[string]any{"snapshot_id": "s@1", "session_id": "s", "version": 1, "mode": "m", "taken_at": "2026-11-25T12:00:00Z",
			"awc": map[string]any{"entity_header": map[string]any{"id": "T", "display_name": "t"}}}, "entity_type"},
		{schemas.Intent, map[string]any{"type": "clarification_request", "action": "set_mode", "question": "q"}, "not"},
		{schemas.Intent, map[string]any{"type": "action_call"}, "action"},
	}
	for i, b := range bad {
		err := set.Validate(b.schema, b.v)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("case %d: Validate(%s) = %v, want an error mentioning %q", i, b.schema, err, b.want)
		}
	}
}
