package gate

import (
	"context"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/tool"
)

// BenchmarkInvocationContext measures what the gate adds to a tool call
// to tell the tool about it: the invocation context built and put in the
// call's context beside the session (the session's clone was there
// before). BenchmarkExecute/memstore/tool-call is the call it is part of.
func BenchmarkInvocationContext(b *testing.B) {
	sess := &agentplane.Session{ID: "a", Mode: "sales", Version: 7, AWC: agentplane.ActiveWorkContext{EntityType: "email_template",
		Entity:          &agentplane.EntityHeader{ID: "TPL-123", DisplayName: "Q1 CFO Outreach"},
		RelatedEntities: []agentplane.RelatedEntityRef{{EntityType: "persona", Header: agentplane.EntityHeader{ID: "PERS-22", DisplayName: "CFO"}, Role: "audience"}}}}
	x := &execution{inv: &Invocation{SessionID: "a", Origin: OriginUser, Principal: "ann", Roles: []string{"rep"}, RequestID: "r-1"},
		sess: sess, mode: "sales", authorized: agentplane.Authorization{Kind: agentplane.AuthorizedByPolicy}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ci := tool.CallInfo{Context: x.invocationContext(), Session: sess}
		if c, _ := tool.CallInfoFrom(tool.WithCallInfo(ctx, ci)); c.Context.SessionID != "a" {
			b.Fatal(c)
		}
	}
}
