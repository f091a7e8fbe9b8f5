package core_test

import (
	"context"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/store"
)

// A turn sent again with its request id is answered from its record:
// nothing is routed, run or recorded twice, whatever the decision was.
func TestRetriedTurnsAreAnsweredFromTheirRecord(t *testing.T) {
	out := demo.NewOutbox(nil)
	c := newCore(t, out.Programs())
	ctx := context.Background()
	s := startSession(t, c, "sales")
	send := func(id, text string) (core.Turn, error) {
		return c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "p", RequestID: id, Input: agentplane.TurnInput{Text: text}})
	}
	for _, step := range []struct{ id, text string }{
		{"t1", "open the q1 cfo outreach template"}, // invokes
		{"t2", "send this to the q1 pilot list"},    // asks for confirmation
		{"t3", "yes"},                               // sends
		{"t4", "hello there"},                       // to the LLM
	} {
		first, err := send(step.id, step.text)
		if err != nil || first.Repeated {
			t.Fatalf("%s: %+v %v", step.id, first, err)
		}
		recs, _ := c.Records(ctx, s.ID, 0)
		again, err := send(step.id, step.text)
		if err != nil || !again.Repeated || again.Seq != first.Seq || again.Decision.Action != first.Decision.Action ||
			again.Session.Version != first.Session.Version || (again.Result == nil) != (first.Result == nil) {
			t.Fatalf("%s again: %+v %v\nfirst: %+v", step.id, again, err, first)
		}
		if again.Result != nil && (again.Result.Status != first.Result.Status || again.Result.Message != first.Result.Message) {
			t.Fatalf("%s: result %+v, first %+v", step.id, again.Result, first.Result)
		}
		if after, _ := c.Records(ctx, s.ID, 0); len(after) != len(recs) {
			t.Fatalf("%s: a retry wrote %d records", step.id, len(after)-len(recs))
		}
	}
	if n := len(out.Sends()); n != 1 {
		t.Fatalf("%d sends, want 1", n)
	}
	// the same id with another input is refused and changes nothing
	before, _ := c.Session(ctx, s.ID)
	if _, err := send("t1", "switch to ddr mode"); agentplane.ErrorCode(err) != agentplane.CodeRequestConflict {
		t.Fatalf("another turn under t1: %v", err)
	}
	if after, _ := c.Session(ctx, s.ID); after.Version != before.Version {
		t.Fatal("a conflicting turn changed the session")
	}
}

// A session opened with a request id is opened once: the retry gets the
// session as it was opened.
func TestStartOnce(t *testing.T) {
	c := newCore(t, nil)
	ctx := context.Background()
	first, created, err := c.StartOnce(ctx, core.Start{Mode: "ddr", Principal: "alice"}, "k1")
	if err != nil || !created || first.Owner != "alice" || first.Mode != "ddr" {
		t.Fatalf("%+v %v %v", first, created, err)
	}
	if _, err := c.Turn(ctx, core.TurnRequest{SessionID: first.ID, Principal: "alice", Input: agentplane.TurnInput{Text: "switch to sales mode"}}); err != nil {
		t.Fatal(err)
	}
	again, created, err := c.StartOnce(ctx, core.Start{Mode: "ddr", Principal: "alice"}, "k1")
	if err != nil || created || again.ID != first.ID || again.Mode != "ddr" || again.Version != 1 {
		t.Fatalf("retry: %+v %v %v", again, created, err)
	}
	if _, _, err := c.StartOnce(ctx, core.Start{Mode: "sales", Principal: "alice"}, "k1"); agentplane.ErrorCode(err) != agentplane.CodeRequestConflict {
		t.Fatalf("another mode under k1: %v", err)
	}
	// the same key is another session for another principal
	bob, created, err := c.StartOnce(ctx, core.Start{Principal: "bob"}, "k1")
	if err != nil || !created || bob.ID == first.ID {
		t.Fatalf("bob: %+v %v %v", bob, created, err)
	}
}

// A principal reaches its own sessions only; the local principal also
// reaches the sessions nobody owns.
func TestOwnedSessions(t *testing.T) {
	c := newCore(t, nil)
	ctx := context.Background()
	alice, _ := c.Start(ctx, core.Start{Principal: "alice"})
	nobody, _ := c.Start(ctx, core.Start{}) // a session stored before owners
	for _, tc := range []struct {
		id, principal string
		ok            bool
	}{
		{alice.ID, "alice", true}, {alice.ID, "bob", false}, {alice.ID, agentplane.LocalPrincipal, false},
		{nobody.ID, agentplane.LocalPrincipal, true}, {nobody.ID, "alice", false}, {"nope", "alice", false},
	} {
		_, err := c.Owned(ctx, tc.id, tc.principal)
		if tc.ok != (err == nil) || !tc.ok && agentplane.ErrorCode(err) != agentplane.CodeNotFound {
			t.Errorf("%s as %s: %v", tc.id, tc.principal, err)
		}
	}
	page, err := c.Sessions(ctx, store.SessionQuery{Owner: "alice"})
	if err != nil || len(page.Sessions) != 1 || page.Sessions[0].Session.ID != alice.ID {
		t.Fatalf("%+v %v", page, err)
	}
}
