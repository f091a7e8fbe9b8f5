package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/store/memstore"
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
	reg, g := c.Router(), c
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
	// a picker is pending until the conversation leaves it: a turn that
	// goes to the LLM drops it, and a later name typed is no pick from it
	d, _ = reg.Route(context.Background(), s, agentplane.TurnInput{Text: "I want to work on email templates", UI: true, Now: now})
	if picker, _ = g.Pending(s, &d, now); picker == nil || len(picker.OptionIDs) != 0 {
		t.Fatalf("after a launcher with UI: %+v", picker)
	}
	s.PendingPicker = picker
	if d, _ := reg.Route(context.Background(), s, agentplane.TurnInput{Text: "Renewal Reminder", UI: true, Now: now}); d.Action != agentplane.ActionInvokeCommand {
		t.Fatalf("a name typed into the pending picker -> %s", d.Action)
	}
	d, _ = reg.Route(context.Background(), s, agentplane.TurnInput{Text: "hello there", UI: true, Now: now})
	if p, _ := g.Pending(s, &d, now); p != nil {
		t.Fatal("a turn that went to the LLM left the picker pending")
	}
	s.PendingPicker = nil
	if d, _ := reg.Route(context.Background(), s, agentplane.TurnInput{Text: "Renewal Reminder", UI: true, Now: now}); d.Action != agentplane.ActionContinueLLM {
		t.Fatalf("a name typed after the conversation left the picker -> %s %s(%s)", d.Action, d.CommandID, d.ResolvedID)
	}
}

// TestStaleClaimIsFinishedAsInterrupted: instance A stops while a send it
// claimed runs (its tool never returns). Instance B, on the same store and
// asked the same request, says it is still running until the claim is
// older than twice the tool timeout and a minute; then it takes the claim
// over and records the request as failed, interrupted — once, without
// running the send again — and answers that from then on. (Before, the
// request stayed request_in_progress for good and the audit log never
// held the send.)
func TestStaleClaimIsFinishedAsInterrupted(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	release := make(chan struct{})
	var sends atomic.Int32
	send := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		sends.Add(1)
		<-release // the instance stops here
		return json.RawMessage(`{"sent":true}`), nil
	}
	a := demotest.Core(t, &core.Options{Store: st, Now: func() time.Time { return t0 }, Programs: demo.SendWith(tool.Program(send)), ToolTimeout: time.Hour})
	var mu sync.Mutex
	now := t0
	b := demotest.Core(t, &core.Options{Store: st, Programs: demo.SendWith(tool.Program(send)), ToolTimeout: time.Second,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	ctx := context.Background()
	if _, err := a.Open(ctx, gate.Opening{SessionID: "s", Mode: "sales"}); err != nil {
		t.Fatal(err)
	}
	inv := gate.Invocation{SessionID: "s", Tool: "send_template", Args: json.RawMessage(`{"list_id":"LIST-9"}`), Origin: gate.OriginAPI, Principal: "ann", RequestID: "r1"}
	stopped := make(chan agentplane.ExecutionResult)
	go func() {
		res, _ := a.Execute(ctx, inv)
		stopped <- res
	}()
	for sends.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	at := func(d time.Duration) agentplane.ExecutionResult {
		mu.Lock()
		now = t0.Add(d)
		mu.Unlock()
		res, err := b.Execute(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	code := func(r agentplane.ExecutionResult) string {
		if r.Error == nil {
			return string(r.Status)
		}
		return r.Error.Code
	}
	if r := at(10 * time.Second); code(r) != agentplane.CodeRequestInProgress {
		t.Fatalf("while the claim is fresh: %+v", r)
	}
	// stale (2 × 1s and a minute ago): eight clients ask at once; one
	// takes the claim over, the others find it running or finished
	mu.Lock()
	now = t0.Add(2*time.Second + time.Minute + time.Second)
	mu.Unlock()
	answers := make([]agentplane.ExecutionResult, 8)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			res, err := b.Execute(ctx, inv)
			if err != nil {
				t.Error(err)
			}
			answers[i] = res
		})
	}
	wg.Wait()
	var r agentplane.ExecutionResult
	for _, a := range answers {
		switch code(a) {
		case agentplane.CodeInterrupted:
			if a.Status != agentplane.StatusFailed || a.Tool != "send_template" || r.Seq != 0 && a.Seq != r.Seq {
				t.Fatalf("once the claim is stale: %+v", a)
			}
			r = a
		case agentplane.CodeRequestInProgress:
		default:
			t.Fatalf("once the claim is stale: %+v", a)
		}
	}
	if r.Seq == 0 {
		t.Fatalf("no client was told the request was interrupted: %+v", answers)
	}
	if again := at(5 * time.Minute); again.Status != agentplane.StatusFailed || code(again) != agentplane.CodeInterrupted || again.Seq != r.Seq {
		t.Fatalf("asked again: %+v, first %+v", again, r)
	}
	close(release) // A comes back: its run is not recorded over the answer given
	if res := <-stopped; code(res) != agentplane.CodeInterrupted {
		t.Fatalf("A's own answer: %+v", res)
	}
	recs, err := st.Records(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	interrupted := 0
	for _, rec := range recs {
		if rec.Result != nil && rec.Result.Error != nil && rec.Result.Error.Code == agentplane.CodeInterrupted {
			interrupted++
		}
		if rec.Result != nil && rec.Result.Status == agentplane.StatusSuccess && rec.Result.Tool == "send_template" {
			t.Fatalf("record %d: a send recorded as run after it was recorded interrupted", rec.Seq)
		}
	}
	if sends.Load() != 1 || interrupted != 1 {
		t.Fatalf("%d sends, %d interrupted records; want 1 and 1", sends.Load(), interrupted)
	}
	var log, out bytes.Buffer // the session replays as recorded
	for _, rec := range recs {
		log.Write(append(rec.Raw, '\n'))
	}
	if n, err := replay.Run(ctx, demotest.Core(t, nil), &log, &out, nil); n != 0 || err != nil {
		t.Fatalf("replay: %d divergences, %v\n%s", n, err, out.String())
	}
}

// TestDownstreamKeyIsStable pins the key a tool service sees to its
// definition: SHA-256 over "agentplane/idempotency\x00", the principal, a
// zero byte, the session, a zero byte and the key, its first 16 bytes in
// hex. Services dedupe on it, so it may not change from one release to
// the next (values computed apart from this code, with Python's hashlib).
func TestDownstreamKeyIsStable(t *testing.T) {
	long := strings.Repeat("p", 300) // past the stack buffer
	for _, c := range []struct{ principal, session, key, want string }{
		{"ann", "s-1", "r-1", "e19c7961c311dbd09650d14bb3c6ffd2"},
		{long, "s", "k", "007dbf9615217a44393d55e713f896a5"},
	} {
		if got := gate.DownstreamKey(c.principal, c.session, c.key); got != c.want {
			t.Errorf("DownstreamKey(%.10q…, %q, %q) = %s, want %s", c.principal, c.session, c.key, got, c.want)
		}
	}
}
