package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// fixture is the demo runtime behind a gate whose send tool is a fake
// that counts its calls, with a clock the test moves.
type fixture struct {
	g     *core.Core // the gate, through the one door to it
	store store.Store
	now   time.Time
	sends atomic.Int32
}

// sendFunc is the body of the fixture's send_template tool.
type sendFunc func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// newFixture's tools may take as long as a loaded machine needs; a test
// of the timeout itself uses newFixtureTimeout.
func newFixture(t testing.TB, send sendFunc) *fixture {
	t.Helper()
	return newFixtureTimeout(t, send, 30*time.Second)
}

func newFixtureTimeout(t testing.TB, send sendFunc, timeout time.Duration) *fixture {
	t.Helper()
	f := &fixture{now: t0}
	if send == nil {
		send = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			f.sends.Add(1)
			return json.RawMessage(`{"sent":true}`), nil
		}
	}
	st := memstore.New()
	c := demotest.Core(t, &core.Options{
		Store:       st,
		Now:         func() time.Time { return f.now },
		Programs:    demo.SendWith(tool.Program(send)),
		ToolTimeout: timeout,
	})
	f.g, f.store = c, st
	return f
}

func (f *fixture) open(t testing.TB, id, mode string) {
	t.Helper()
	if _, err := f.g.Open(context.Background(), gate.Opening{SessionID: id, Mode: mode}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) exec(t testing.TB, inv gate.Invocation) agentplane.ExecutionResult {
	t.Helper()
	if inv.Origin == "" {
		inv.Origin = gate.OriginUser
	}
	res, err := f.g.Execute(context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *fixture) session(t testing.TB, id string) *agentplane.Session {
	t.Helper()
	s, err := f.store.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ready opens a sales session with an active template, ready to send.
func (f *fixture) ready(t testing.TB, id string) {
	f.open(t, id, "sales")
	if r := f.exec(t, gate.Invocation{SessionID: id, CommandID: "set_active_email_template", ResolvedID: "TPL-123"}); r.Status != agentplane.StatusSuccess {
		t.Fatalf("activate template: %+v", r)
	}
}

func send(id, list, token string) gate.Invocation {
	return gate.Invocation{SessionID: id, CommandID: "send_template_to_list", ResolvedID: list, ConfirmationToken: token}
}

func TestConfirmationTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.ready(t, "a")
	f.ready(t, "b")
	res := f.exec(t, send("a", "LIST-9", ""))
	if res.Status != agentplane.StatusConfirmationRequired || res.ConfirmationToken == "" || res.Message != "Confirm send to 'Q1 pilot list'?" {
		t.Fatalf("first send: %+v", res)
	}
	token := res.ConfirmationToken
	before := f.session(t, "a")
	tests := []struct {
		name string
		inv  gate.Invocation
		want string
	}{
		{"Wrong", send("a", "LIST-9", "forged"), "unknown confirmation token"},
		{"OtherInvocation", send("a", "LIST-10", token), "the confirmation token confirms send_template_to_list(LIST-9), not send_template_to_list(LIST-10)"},
		{"OtherSession", send("b", "LIST-9", token), "the confirmation token belongs to another session"},
	}
	for _, tt := range tests {
		r := f.exec(t, tt.inv)
		if r.Status != agentplane.StatusRejected || r.Error.Code != agentplane.CodeConfirmationInvalid || r.Error.Detail != tt.want {
			t.Errorf("%s: %+v %+v", tt.name, r, r.Error)
		}
	}
	if f.sends.Load() != 0 || f.session(t, "a").Version != before.Version {
		t.Fatalf("a rejected confirmation ran the tool or changed the session")
	}
	if r := f.exec(t, send("a", "LIST-9", token)); r.Status != agentplane.StatusSuccess || f.sends.Load() != 1 || string(r.Output) != `{"sent":true}` {
		t.Fatalf("confirmed send: %+v", r)
	}
	if r := f.exec(t, send("a", "LIST-9", token)); r.Status != agentplane.StatusRejected || r.Error.Detail != "the confirmation token was used already" {
		t.Fatalf("reused token: %+v", r)
	}
	if f.sends.Load() != 1 {
		t.Fatal("a reused token ran the tool again")
	}
}

func TestConfirmationTokenExpiresAndBindsVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.ready(t, "a")
	token := f.exec(t, send("a", "LIST-9", "")).ConfirmationToken
	f.now = f.now.Add(6 * time.Minute)
	if r := f.exec(t, send("a", "LIST-9", token)); r.Error == nil || r.Error.Code != agentplane.CodeConfirmationInvalid {
		t.Fatalf("expired token: %+v", r)
	}
	token = f.exec(t, send("a", "LIST-9", "")).ConfirmationToken
	f.exec(t, gate.Invocation{SessionID: "a", CommandID: "set_active_email_template", ResolvedID: "TPL-124"}) // the state the human saw changed
	if r := f.exec(t, send("a", "LIST-9", token)); r.Error == nil || r.Error.Detail != "the session changed since the confirmation was asked (version 2, now 3)" {
		t.Fatalf("stale token: %+v", r)
	}
	if f.sends.Load() != 0 {
		t.Fatal("the tool ran")
	}
}

func TestLLMNeverSeesTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.ready(t, "a")
	for _, o := range []gate.Origin{gate.OriginLLM, gate.OriginMCP, gate.OriginWorkflow, gate.OriginAgentInternal} {
		r := f.exec(t, gate.Invocation{SessionID: "a", CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: o})
		b, _ := json.Marshal(r)
		if r.Status != agentplane.StatusConfirmationRequired || r.ConfirmationToken != "" || json.Valid(b) && containsToken(b) {
			t.Errorf("%s: %s", o, b)
		}
	}
	for _, o := range []gate.Origin{gate.OriginUser, gate.OriginAPI} {
		if r := f.exec(t, gate.Invocation{SessionID: "a", CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: o}); r.ConfirmationToken == "" {
			t.Errorf("%s: the human's channel got no token", o)
		}
	}
}

func containsToken(b []byte) bool {
	var m map[string]any
	json.Unmarshal(b, &m)
	_, ok := m["confirmation_token"]
	return ok
}

func TestToolFailuresAreResults(t *testing.T) {
	t.Parallel()
	f := newFixtureTimeout(t, func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		switch {
		case string(args) == `{"list_id":"LIST-9"}`:
			<-ctx.Done() // hangs until cut
			return nil, ctx.Err()
		case string(args) == `{"list_id":"LIST-10"}`:
			panic("boom")
		case string(args) == `{"list_id":"LIST-11"}`:
			return nil, errors.New("smtp: 550 mailbox unavailable")
		}
		return json.RawMessage(`not json`), nil
	}, 50*time.Millisecond)
	f.ready(t, "a")
	tests := []struct{ list, code, detail string }{
		{"LIST-9", agentplane.CodeTimeout, "tool send_template did not answer within 50ms"},
		{"LIST-10", agentplane.CodeToolFailed, "tool send_template: panicked: boom"},
		{"LIST-11", agentplane.CodeToolFailed, "tool send_template: smtp: 550 mailbox unavailable"},
		{"LIST-12", agentplane.CodeToolFailed, "tool send_template returned output that is not JSON"},
	}
	for _, tt := range tests {
		token := f.exec(t, send("a", tt.list, "")).ConfirmationToken
		before := f.session(t, "a")
		r := f.exec(t, send("a", tt.list, token))
		if r.Status != agentplane.StatusFailed || r.Error.Code != tt.code || r.Error.Detail != tt.detail || len(r.StateDiff) != 0 {
			t.Errorf("%s: %+v", tt.list, r)
		}
		if after := f.session(t, "a"); after.Version != before.Version {
			t.Errorf("%s: a failed tool changed the session", tt.list)
		}
	}
}

func TestEveryAttemptIsAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.ready(t, "a")
	f.exec(t, gate.Invocation{SessionID: "a", CommandID: "nope", ResolvedID: "x"})
	f.exec(t, gate.Invocation{SessionID: "a", CommandID: "set_mode", ResolvedID: "turbo"})
	f.exec(t, send("a", "LIST-9", ""))
	recs, _ := f.store.Records(context.Background(), "a", 0)
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		s := r.Kind
		if r.Result != nil {
			s += ":" + string(r.Result.Status)
		}
		kinds = append(kinds, s)
	}
	want := "[open execution:success execution:rejected execution:rejected execution:confirmation_required]"
	if fmt.Sprint(kinds) != want {
		t.Fatalf("records %v, want %s", kinds, want)
	}
	if d := recs[1].Result.StateDiff; len(d) == 0 || recs[1].Intent.Action != "set_active_email_template" || string(recs[1].Intent.Args) != `{"template_id":"TPL-123"}` {
		t.Fatalf("the success record lacks its intent or diff: %+v", recs[1])
	}
}

// TestConcurrentExecuteLosesNoUpdate runs 100 goroutines against one
// session: every success is one version step, every loser is rejected with
// version_conflict and changes nothing, and every attempt is in the chain.
func TestConcurrentExecuteLosesNoUpdate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.open(t, "a", "general")
	var wg sync.WaitGroup
	var wins, conflicts atomic.Int32
	modes := []string{"general", "ddr", "sales"}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.g.Execute(context.Background(), gate.Invocation{SessionID: "a", CommandID: "set_mode", ResolvedID: modes[i%3], Origin: gate.OriginUser, RequestID: fmt.Sprint("r", i)})
			switch {
			case err != nil:
				t.Error(err)
			case r.Status == agentplane.StatusSuccess:
				wins.Add(1)
			case r.Error != nil && r.Error.Code == agentplane.CodeVersionConflict:
				conflicts.Add(1)
			default:
				t.Errorf("unexpected result %+v", r)
			}
		}()
	}
	wg.Wait()
	s := f.session(t, "a")
	if wins.Load()+conflicts.Load() != 100 || s.Version != 1+int64(wins.Load()) {
		t.Fatalf("%d wins, %d conflicts, version %d", wins.Load(), conflicts.Load(), s.Version)
	}
	recs, _ := f.store.Records(context.Background(), "a", 0)
	if len(recs) != 101 || audit.Verify(recs) != nil {
		t.Fatalf("%d records, verify %v", len(recs), audit.Verify(recs))
	}
	// the versions recorded by successes are exactly 2..1+wins: none applied on a stale version
	seen := map[int64]bool{}
	for _, r := range recs[1:] {
		if r.Result.Status == agentplane.StatusSuccess {
			if seen[r.State.Version] {
				t.Fatalf("version %d applied twice", r.State.Version)
			}
			seen[r.State.Version] = true
		}
	}
}

// TestNonSuccessChangesNothing is a property: whatever is invoked, a result
// other than success leaves the session and the app state (the send tool's
// effects) exactly as they were.
func TestNonSuccessChangesNothing(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		f := newFixture(t, nil)
		f.open(t, "a", rapid.SampledFrom([]string{"general", "ddr", "sales"}).Draw(rt, "mode"))
		f.open(t, "b", "sales")
		var tokens []string
		for i := 0; i < rapid.IntRange(1, 12).Draw(rt, "steps"); i++ {
			inv := gate.Invocation{
				SessionID:  rapid.SampledFrom([]string{"a", "a", "a", "b", "ghost"}).Draw(rt, "session"),
				CommandID:  rapid.SampledFrom([]string{"set_mode", "set_active_email_template", "close_email_template", "send_template_to_list", "open_email_templates", "set_active_ddr", "nope"}).Draw(rt, "command"),
				ResolvedID: rapid.SampledFrom([]string{"ddr", "sales", "general", "TPL-123", "TPL-124", "LIST-9", "AGN-000037", "bogus"}).Draw(rt, "id"),
				Origin:     rapid.SampledFrom([]gate.Origin{gate.OriginUser, gate.OriginLLM, gate.OriginAPI}).Draw(rt, "origin"),
				Roles:      nil,
			}
			if len(tokens) > 0 && rapid.Bool().Draw(rt, "useToken") {
				inv.ConfirmationToken = rapid.SampledFrom(tokens).Draw(rt, "token")
			}
			if rapid.IntRange(0, 9).Draw(rt, "clock") == 0 {
				f.now = f.now.Add(4 * time.Minute)
			}
			before, _ := f.store.Session(context.Background(), inv.SessionID)
			sends := f.sends.Load()
			r, err := f.g.Execute(context.Background(), inv)
			if err != nil {
				rt.Fatal(err)
			}
			if r.ConfirmationToken != "" {
				tokens = append(tokens, r.ConfirmationToken)
			}
			after, _ := f.store.Session(context.Background(), inv.SessionID)
			if r.Status == agentplane.StatusSuccess {
				if after.Version != before.Version+1 {
					rt.Fatalf("success moved version %d -> %d", before.Version, after.Version)
				}
				continue
			}
			b1, _ := json.Marshal(before)
			b2, _ := json.Marshal(after)
			if string(b1) != string(b2) || f.sends.Load() != sends || len(r.StateDiff) != 0 {
				rt.Fatalf("%s result changed state:\n%s\n%s\n%+v", r.Status, b1, b2, r)
			}
		}
		for _, id := range []string{"a", "b"} {
			recs, _ := f.store.Records(context.Background(), id, 0)
			if err := audit.Verify(recs); err != nil {
				rt.Fatal(err)
			}
		}
	})
}

func TestIntents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.ready(t, "a")
	ctx := context.Background()
	before := f.session(t, "a")
	bad := []struct {
		args, want string
	}{
		{`{}`, "missing property 'template_id'"},
		{`{"template_id": 7}`, "want string"},
		{`{"template_id": "TPL-124", "extra": 1}`, "additional properties 'extra' not allowed"},
		{`[1]`, "want object"},
		{`not json`, "args are not strict JSON"},
		{`{"template_id":"TPL-124","template_id":"TPL-123"}`, "duplicate member name"},
	}
	for _, b := range bad {
		r, err := f.g.Intent(ctx, gate.IntentRequest{SessionID: "a", Intent: agentplane.Intent{Type: agentplane.IntentActionCall, Action: "set_active_email_template", Args: json.RawMessage(b.args), Origin: "llm"}})
		if err != nil || r.Status != agentplane.StatusRejected || r.Error.Code != agentplane.CodeInvalidArgs || !strings.Contains(r.Error.Detail, b.want) {
			t.Errorf("args %s: %+v %v", b.args, r.Error, err)
		}
	}
	r, _ := f.g.Intent(ctx, gate.IntentRequest{SessionID: "a", Intent: agentplane.Intent{Type: agentplane.IntentClarificationRequest, Question: "Which template?", Origin: "llm"}})
	if r.Status != agentplane.StatusSuccess || len(r.StateDiff) != 0 || r.Message != "Which template?" {
		t.Fatalf("clarification: %+v", r)
	}
	if after := f.session(t, "a"); after.Version != before.Version {
		t.Fatal("an intent that was refused or only asked a question changed the session")
	}
	r, _ = f.g.Intent(ctx, gate.IntentRequest{SessionID: "a", Intent: agentplane.Intent{Type: agentplane.IntentActionCall, Action: "set_active_email_template", Args: json.RawMessage(`{"template_id":"TPL-124"}`), Origin: "llm"}})
	if r.Status != agentplane.StatusSuccess || r.Session.AWC.Entity.ID != "TPL-124" {
		t.Fatalf("valid call: %+v", r)
	}
	r, _ = f.g.Intent(ctx, gate.IntentRequest{SessionID: "a", Intent: agentplane.Intent{Type: agentplane.IntentActionCall, Action: "format_disk", Args: json.RawMessage(`{}`)}})
	if r.Error == nil || r.Error.Code != agentplane.CodeUnknownAction {
		t.Fatalf("unknown action: %+v", r)
	}
	recs, _ := f.store.Records(ctx, "a", 0)
	if err := audit.Verify(recs); err != nil || len(recs) != 2+len(bad)+3 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
}

func TestToolInvocations(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.open(t, "g", "general")
	f.ready(t, "a")
	ctx := context.Background()
	tool := func(session string, args string, origin gate.Origin, token string) agentplane.ExecutionResult {
		r, err := f.g.Execute(ctx, gate.Invocation{SessionID: session, Tool: "send_template", Args: json.RawMessage(args), Origin: origin, ConfirmationToken: token})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cases := []struct {
		name, session, args string
		origin              gate.Origin
		code                string
	}{
		{"Inactive", "g", `{"list_id":"LIST-9"}`, gate.OriginLLM, agentplane.CodeInactiveAction},
		{"MissingArg", "a", `{}`, gate.OriginLLM, agentplane.CodeInvalidArgs},
		{"ExtraArg", "a", `{"list_id":"LIST-9","bcc":"x"}`, gate.OriginLLM, agentplane.CodeInvalidArgs},
		{"WrongType", "a", `{"list_id":9}`, gate.OriginLLM, agentplane.CodeInvalidArgs},
		{"NotJSON", "a", `{list_id}`, gate.OriginLLM, agentplane.CodeInvalidArgs},
	}
	for _, c := range cases {
		if r := tool(c.session, c.args, c.origin, ""); r.Status != agentplane.StatusRejected || r.Error.Code != c.code {
			t.Errorf("%s: %+v %+v", c.name, r, r.Error)
		}
	}
	// an external tool the LLM calls waits for the human; the LLM gets no token
	r := tool("a", `{"list_id": "LIST-9"}`, gate.OriginLLM, "")
	if r.Status != agentplane.StatusConfirmationRequired || r.ConfirmationToken != "" || f.sends.Load() != 0 {
		t.Fatalf("LLM call: %+v", r)
	}
	// the human's channel confirms the exact arguments (compared as compact JSON)
	r = tool("a", `{"list_id": "LIST-9"}`, gate.OriginUser, "")
	if r.Status != agentplane.StatusSuccess || f.sends.Load() != 1 || string(r.Output) != `{"sent":true}` || len(r.StateDiff) != 0 {
		t.Fatalf("human call: %+v", r)
	}
	tok := f.exec(t, gate.Invocation{SessionID: "a", CommandID: "send_template_to_list", ResolvedID: "LIST-9"}).ConfirmationToken
	if r := tool("a", `{"list_id":"LIST-9"}`, gate.OriginLLM, tok); r.Error == nil || r.Error.Code != agentplane.CodeConfirmationInvalid {
		t.Fatalf("a command's token used for the tool: %+v", r)
	}
}
