package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// dying is a store shared by two instances, one of which stops (dies)
// while its tool runs: from then on none of that instance's writes arrive.
type dying struct {
	store.Store
	dead *atomic.Bool
}

func (d dying) Commit(ctx context.Context, c *store.Commit) error {
	if d.dead.Load() {
		return errors.New("the instance stopped")
	}
	return d.Store.Commit(ctx, c)
}

// clock is a test clock both instances read, moved by the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// TestTakeoverAfterACrash: an instance stops while the tool of a
// confirmed turn runs (the "yes" of a router's question or of the LLM's
// proposal). The turn's retry on another instance, once the claim is
// stale, is answered interrupted — not request_in_progress forever — and
// a takeover nobody asks for (Recover) records it too; either way the
// audit holds what may have reached the world, and the tool ran once.
// (The core's repeated-turn check answered request_in_progress before the
// gate's takeover was reached, and the audit had no record of the run.)
func TestTakeoverAfterACrash(t *testing.T) {
	t.Parallel()
	for _, q := range confirmationQuestions {
		for _, retried := range []bool{true, false} {
			name := q.name + "/recovered"
			if retried {
				name = q.name + "/retried"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				mem := memstore.New()
				clk := &clock{now: demotest.Start}
				var dead atomic.Bool
				var sends atomic.Int32
				a := demotest.Core(t, &core.Options{Store: dying{mem, &dead}, Now: clk.Now, ToolTimeout: 10 * time.Second,
					Programs: countingSend(&sends, func() { dead.Store(true) })})
				b := demotest.Core(t, &core.Options{Store: mem, Now: clk.Now, ToolTimeout: 10 * time.Second, Programs: countingSend(&sends, func() {})})
				s := startSession(t, a, "sales")
				asked := q.ask(t, a, s)
				if asked.token == "" {
					t.Fatal("no confirmation asked")
				}
				yes := core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: "yes"}, RequestID: "yes-1"}
				if _, err := a.Turn(ctx, yes); err == nil {
					t.Fatal("the instance stopped, but its turn was answered")
				}
				if sends.Load() != 1 {
					t.Fatalf("the tool ran %d times", sends.Load())
				}
				// before it is stale: still running, nothing recorded
				if _, err := b.Turn(ctx, yes); agentplane.ErrorCode(err) != agentplane.CodeRequestInProgress {
					t.Fatalf("a retry while it may still run: %v", err)
				}
				clk.Add(2*10*time.Second + time.Minute)
				var tr core.Turn
				if retried {
					var err error
					if tr, err = b.Turn(ctx, yes); err != nil {
						t.Fatalf("the retry after the claim went stale: %v", err)
					}
				} else {
					if n, err := core.RecoverOnce(ctx, b); err != nil || n != 1 {
						t.Fatalf("recover: %d %v", n, err)
					}
					if n, err := core.RecoverOnce(ctx, b); err != nil || n != 0 {
						t.Fatalf("recover again: %d %v", n, err)
					}
					var err error
					if tr, err = b.Turn(ctx, yes); err != nil || !tr.Repeated {
						t.Fatalf("the retry after the takeover: %+v %v", tr, err)
					}
				}
				if tr.Result == nil || tr.Result.Error == nil || tr.Result.Error.Code != agentplane.CodeInterrupted || tr.Decision.Action != agentplane.ActionInvokeCommand {
					t.Fatalf("the answer: %+v %+v", tr.Decision, tr.Result)
				}
				recs, err := b.Records(ctx, s.ID, 0)
				if err != nil || audit.Verify(recs) != nil {
					t.Fatalf("records: %v %v", err, audit.Verify(recs))
				}
				last := recs[len(recs)-1]
				if last.Kind != audit.KindTurn || last.Input == nil || last.Input.Text != "yes" || last.Intent == nil || last.Intent.Action != asked.intent.Action ||
					last.Result.Error.Code != agentplane.CodeInterrupted || last.Principal != "p" {
					t.Fatalf("the takeover's record: %+v intent %+v", last, last.Intent)
				}
				if asked.intent.Action == "send_template" && string(last.Intent.Args) != string(asked.intent.Args) {
					t.Fatalf("the record does not say what ran: %s", last.Intent.Args)
				}
				// the question it answered is answered: a later yes runs nothing
				if tr, err := b.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: "yes"}}); err != nil || tr.Result != nil && tr.Result.Status == agentplane.StatusSuccess {
					t.Fatalf("a later yes: %+v %v", tr.Result, err)
				}
				if sends.Load() != 1 {
					t.Fatalf("the tool ran %d times", sends.Load())
				}
			})
		}
	}
}

// TestReservedRequestIDs: request ids starting with the gate's own prefix
// are refused, naming the prefix; nothing runs.
func TestReservedRequestIDs(t *testing.T) {
	t.Parallel()
	var sends atomic.Int32
	c := demotest.Core(t, &core.Options{Programs: countingSend(&sends, func() {})})
	ctx := context.Background()
	s := startSession(t, c, "sales")
	res, err := c.Execute(ctx, gate.Invocation{SessionID: s.ID, Tool: "send_template", Args: []byte(`{"list_id":"LIST-9"}`), Origin: gate.OriginUser, Principal: "p", RequestID: "~gate-1"})
	if err != nil || res.Status != agentplane.StatusRejected || res.Error.Code != agentplane.CodeInvalidInput || sends.Load() != 0 {
		t.Fatalf("%+v %v (%d sends)", res, err, sends.Load())
	}
}

// TestKeysDownstreamCannotCollide: two people confirming in their own
// sessions under the same Idempotency-Key, and the same LLM call id in
// two sessions, reach the tool's service under different keys; the same
// request retried reaches it under its first key. (The client's key went
// downstream verbatim: a service that dedups by key gave the first
// person's result to the second, and bob's LLM call alice's answer.)
func TestKeysDownstreamCannotCollide(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys []string
	c := demotest.Core(t, &core.Options{Programs: demo.SendWith(func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		ci, _ := tool.CallInfoFrom(ctx)
		mu.Lock()
		keys = append(keys, ci.Key())
		mu.Unlock()
		return json.RawMessage(`{"sent":true}`), nil
	})})
	ctx := context.Background()
	run := func(principal, requestID string) string {
		if _, err := c.Start(ctx, core.Start{Mode: "sales", Principal: principal, ID: principal + "-session"}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Execute(ctx, gate.Invocation{SessionID: principal + "-session", Tool: "send_template", Args: json.RawMessage(`{"list_id":"LIST-9"}`),
			Origin: gate.OriginUser, Principal: principal, RequestID: requestID})
		if err != nil || res.Status != agentplane.StatusSuccess {
			t.Fatalf("%s: %+v %v", principal, res, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return keys[len(keys)-1]
	}
	alice, bob := run("alice", "key-1"), run("bob", "key-1")
	llmA, llmB := run("carol", "llm-2-0"), run("dave", "llm-2-0")
	if alice == bob || llmA == llmB || alice == "key-1" || llmA == "llm-2-0" {
		t.Fatalf("keys downstream: alice %s, bob %s; LLM calls %s, %s", alice, bob, llmA, llmB)
	}
	if alice != gate.DownstreamKey("alice", "alice-session", "key-1") {
		t.Fatalf("alice's key %s is not derived from her, her session and her request", alice)
	}
}
