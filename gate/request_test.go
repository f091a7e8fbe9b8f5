package gate_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/demotest"
	"github.com/agentplane/agentplane/tool"
)

// TestConcurrentSameRequestRunsOnce: many executions with one request id at
// once run the external tool once; every other gets the recorded result or
// is told the request is still running. (Check-then-act ran it twice.)
func TestConcurrentSameRequestRunsOnce(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var f *fixture
	f = newFixtureTimeout(t, func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		f.sends.Add(1)
		<-release // hold the first call until the others have their answer
		return json.RawMessage(`{"sent":true}`), nil
	}, time.Minute)
	f.ready(t, "a")
	const n = 16
	results := make([]agentplane.ExecutionResult, n)
	var wg sync.WaitGroup
	var answered atomic.Int32
	for i := range n {
		wg.Go(func() {
			r, err := f.g.Execute(context.Background(), gate.Invocation{SessionID: "a", Tool: "send_template", Args: json.RawMessage(`{"list_id":"LIST-9"}`),
				Origin: gate.OriginAPI, Principal: "ann", RequestID: "same"})
			if err != nil {
				t.Error(err)
			}
			results[i] = r
			answered.Add(1)
		})
	}
	for answered.Load() < n-1 { // all but the one running the tool
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if f.sends.Load() != 1 {
		t.Fatalf("the tool ran %d times for one request id", f.sends.Load())
	}
	ok, busy := 0, 0
	for _, r := range results {
		switch {
		case r.Status == agentplane.StatusSuccess && string(r.Output) == `{"sent":true}`:
			ok++
		case r.Error != nil && r.Error.Code == agentplane.CodeRequestInProgress:
			busy++
		default:
			t.Errorf("unexpected result %+v", r)
		}
	}
	if ok == 0 || ok+busy != n {
		t.Fatalf("%d successes, %d in progress", ok, busy)
	}
	// afterwards every retry gets the recorded result, and nothing runs
	r, _ := f.g.Execute(context.Background(), gate.Invocation{SessionID: "a", Tool: "send_template", Args: json.RawMessage(`{ "list_id" : "LIST-9" }`),
		Origin: gate.OriginAPI, Principal: "ann", RequestID: "same"})
	if r.Status != agentplane.StatusSuccess || f.sends.Load() != 1 {
		t.Fatalf("retry: %+v, %d sends", r, f.sends.Load())
	}
}

// TestRequestIDsAreScoped: a request id means one request only within a
// session and for one principal. (Another session reusing an id got the
// first session's result, and its own command never ran.)
func TestRequestIDsAreScoped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.open(t, "a", "general")
	f.open(t, "b", "general")
	run := func(session, principal, mode string) agentplane.ExecutionResult {
		return f.exec(t, gate.Invocation{SessionID: session, Principal: principal, CommandID: "set_mode", ResolvedID: mode, RequestID: "r1"})
	}
	if r := run("a", "ann", "ddr"); r.Status != agentplane.StatusSuccess || r.Session.Mode != "ddr" {
		t.Fatalf("a: %+v", r)
	}
	if r := run("b", "ann", "sales"); r.Status != agentplane.StatusSuccess || r.Session.Mode != "sales" || r.Session.ID != "b" {
		t.Fatalf("b got %+v", r)
	}
	if r := run("a", "bob", "sales"); r.Status != agentplane.StatusSuccess || r.Session.Mode != "sales" {
		t.Fatalf("another principal in a: %+v", r)
	}
	if r := run("a", "ann", "general"); r.Error == nil || r.Error.Code != agentplane.CodeRequestConflict || !strings.Contains(r.Error.Detail, `"r1" was used for another invocation`) {
		t.Fatalf("the same key with other arguments: %+v", r)
	}
	if s := f.session(t, "a"); s.Mode != "sales" {
		t.Fatalf("a refused request changed the session: %+v", s)
	}
}

// TestTokensOnlyFromTheHuman: a valid token presented from any origin but
// the human's channel confirms nothing, and a pending confirmation is
// confirmed only by the human's own turn. (A reader of the log, or an LLM
// holding a token, could confirm the human's action.)
func TestTokensOnlyFromTheHuman(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.ready(t, "a")
	token := f.exec(t, send("a", "LIST-9", "")).ConfirmationToken
	for _, o := range []gate.Origin{gate.OriginLLM, gate.OriginMCP, gate.OriginWorkflow, gate.OriginAgentInternal} {
		inv := send("a", "LIST-9", token)
		inv.Origin = o
		r := f.exec(t, inv)
		if r.Error == nil || r.Error.Code != agentplane.CodeConfirmationInvalid || !strings.Contains(r.Error.Detail, "only from the human") {
			t.Errorf("%s presented a token: %+v", o, r)
		}
		inv.ConfirmationToken, inv.Confirmed = "", true
		if r := f.exec(t, inv); r.Error == nil || r.Error.Code != agentplane.CodeConfirmationInvalid {
			t.Errorf("%s claimed the human's yes: %+v", o, r)
		}
	}
	if f.sends.Load() != 0 {
		t.Fatal("the tool ran")
	}
	inv := send("a", "LIST-9", token)
	inv.Origin = gate.OriginAPI
	if r := f.exec(t, inv); r.Status != agentplane.StatusSuccess || f.sends.Load() != 1 {
		t.Fatalf("the human's API client: %+v", r)
	}
}

func TestUnknownOriginIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.open(t, "a", "general")
	r, err := f.g.Execute(context.Background(), gate.Invocation{SessionID: "a", CommandID: "set_mode", ResolvedID: "ddr", Origin: "root"})
	if err != nil || r.Error == nil || r.Error.Code != agentplane.CodeInvalidInput || !strings.Contains(r.Error.Detail, `origin "root"`) {
		t.Fatalf("%+v %v", r, err)
	}
	if s := f.session(t, "a"); s.Mode != "general" {
		t.Fatal("ran")
	}
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec  string
		human bool
		llm   bool
	}{
		{"read/low", false, false}, {"internal/low", false, false}, {"external/low", false, true},
		{"external/medium", false, true}, {"read/high", true, true}, {"read/low/confirm", true, true},
	} {
		parts := strings.Split(c.spec, "/")
		s := specOf(parts[0], parts[1], len(parts) == 3)
		if got := gate.NeedsConfirmation(nil, &s, gate.OriginUser); got != c.human {
			t.Errorf("%s from the human: %v", c.spec, got)
		}
		if got := gate.NeedsConfirmation(nil, &s, gate.OriginLLM); got != c.llm {
			t.Errorf("%s from the LLM: %v", c.spec, got)
		}
	}
}

func specOf(impact, risk string, confirm bool) tool.Spec {
	return tool.Spec{Name: "t", Impact: tool.Impact(impact), Risk: tool.Risk(risk), RequiresConfirmation: confirm}
}

func TestPendingAfterDecision(t *testing.T) {
	t.Parallel()
	c := demotest.Core(t, nil)
	reg, g := c.Router(), c.Gate()
	s := &agentplane.Session{ID: "s", Mode: "sales", Version: 1,
		AWC: agentplane.ActiveWorkContext{EntityType: "email_template", Entity: &agentplane.EntityHeader{ID: "TPL-123", DisplayName: "Q1 CFO Outreach"}}}
	now := t0
	d, _ := reg.Route(context.Background(), s, agentplane.TurnInput{Text: "send it to the q1 pilot list", Now: now})
	picker, confirm := g.Pending(s, &d, now)
	if picker != nil || confirm == nil || confirm.ResolvedID != "LIST-9" || !confirm.ExpiresAt.Equal(now.Add(config.DefaultConfirmationTTL)) {
		t.Fatalf("after a confirmation question: picker %+v confirm %+v", picker, confirm)
	}
	d, _ = reg.Route(context.Background(), s, agentplane.TurnInput{Text: "open the outreach template", Now: now})
	picker, confirm = g.Pending(s, &d, now)
	if confirm != nil || picker == nil || strings.Join(picker.OptionIDs, ",") != "TPL-123,TPL-124" {
		t.Fatalf("after a candidate question: picker %+v confirm %+v", picker, confirm)
	}
	s.PendingPicker = picker
	d, _ = reg.Route(context.Background(), s, agentplane.TurnInput{Text: "hello there", Now: now})
	if p, _ := g.Pending(s, &d, now); p != nil {
		t.Fatal("a question not answered with one of its options stayed pending")
	}
	// a picker the client shows stays while the conversation goes on
	d, _ = reg.Route(context.Background(), s, agentplane.TurnInput{Text: "I want to work on email templates", UI: true, Now: now})
	if picker, _ = g.Pending(s, &d, now); picker == nil || len(picker.OptionIDs) != 0 {
		t.Fatalf("after a launcher with UI: %+v", picker)
	}
	s.PendingPicker = picker
	d, _ = reg.Route(context.Background(), s, agentplane.TurnInput{Text: "hello there", UI: true, Now: now})
	if p, _ := g.Pending(s, &d, now); p == nil {
		t.Fatal("an unrelated turn dropped the picker on screen")
	}
	if p, _ := g.Pending(s, &d, now.Add(time.Hour)); p != nil {
		t.Fatal("an expired picker was kept")
	}
}
