package gate_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/docs/schemas"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/tool"
)

// TestInvocationContext: the gate tells every tool who asks, from where,
// in which session and mode, on which active item, with which keys and how
// the call was authorised — the human's token, the human's yes, the
// policy — in the published shape.
func TestInvocationContext(t *testing.T) {
	t.Parallel()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []agentplane.InvocationContext
	send := func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		ci, _ := tool.CallInfoFrom(ctx)
		mu.Lock()
		seen = append(seen, ci.Context)
		mu.Unlock()
		return json.RawMessage(`{"sent":true}`), nil
	}
	c := demotest.Core(t, &core.Options{Programs: demo.SendWith(send)})
	ctx := context.Background()
	g := c
	s, _ := c.Start(ctx, core.Start{Mode: "sales", Principal: "ann"})
	g.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "set_active_email_template", ResolvedID: "TPL-123", Origin: gate.OriginUser, Principal: "ann"})
	asked, _ := g.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginAPI, Principal: "ann", Roles: []string{"rep"}})
	res, err := g.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginAPI,
		Principal: "ann", Roles: []string{"rep"}, RequestID: "r-1", ConfirmationToken: asked.ConfirmationToken})
	if err != nil || res.Status != agentplane.StatusSuccess {
		t.Fatalf("%+v %v", res, err)
	}
	// the human's yes in a turn
	c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: "send it to the q1 pilot list"}})
	if tr, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: "yes"}}); err != nil || tr.Result == nil || tr.Result.Status != agentplane.StatusSuccess {
		t.Fatalf("yes: %+v %v", tr, err)
	}
	// the policy: the human asked the tool directly (external, not high risk)
	if r, _ := g.Execute(ctx, gate.Invocation{SessionID: s.ID, Tool: "send_template", Args: json.RawMessage(`{"list_id":"LIST-9"}`), Origin: gate.OriginUser, Principal: "ann", IdempotencyKey: "k-1", RequestID: "r-9"}); r.Status != agentplane.StatusSuccess {
		t.Fatalf("direct: %+v", r)
	}
	if len(seen) != 3 {
		t.Fatalf("%d calls", len(seen))
	}
	first := seen[0]
	if first.Principal.UserID != "ann" || len(first.Principal.Roles) != 1 || first.Origin != "api" || first.SessionID != s.ID || first.Mode != "sales" ||
		first.ActiveWorkContext.Entity == nil || first.ActiveWorkContext.Entity.ID != "TPL-123" || first.RequestID != "r-1" || first.IdempotencyKey != gate.DownstreamKey("ann", s.ID, "r-1") ||
		first.Authorization.Kind != agentplane.AuthorizedByHuman || first.SnapshotVersion < 2 {
		t.Errorf("the token's call: %+v", first)
	}
	if yes := seen[1]; yes.Origin != "user" || yes.Authorization.Kind != agentplane.AuthorizedByHuman || yes.RequestID == "" {
		t.Errorf("the yes's call: %+v", yes)
	}
	if direct := seen[2]; direct.Authorization.Kind != agentplane.AuthorizedByPolicy || direct.IdempotencyKey != gate.DownstreamKey("ann", s.ID, "k-1") || direct.RequestID != "r-9" {
		t.Errorf("the direct call: %+v", direct)
	}
	for _, cx := range seen {
		if err := set.Validate(schemas.InvocationContext, cx); err != nil {
			t.Error(err)
		}
	}
}
