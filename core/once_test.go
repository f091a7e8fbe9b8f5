package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/tool"
)

// countingSend is the demo's send tool as a fake that counts its calls and
// holds each until hold returns.
func countingSend(sends *atomic.Int32, hold func()) map[string]tool.Program {
	return demo.SendWith(func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		sends.Add(1)
		hold()
		return json.RawMessage(`{"sent":true}`), nil
	})
}

// TestOneConfirmationOneRun: one confirmation question answered at once by
// n clients — "yes" turns, the token under different request ids, the
// token without one — runs the external tool once; every other answer is
// refused and recorded, and no run is recorded as a version conflict.
// The question is the router's (a command that needs confirmation) or the
// LLM's proposal of a tool the human may run directly. (Each answer
// claimed its own request key, and the token was marked used only at
// commit: 8 answers sent 8 times, and the audit showed one. A proposal's
// token was not even checked — the human needs none for that tool — so
// every answer ran it.)
func TestOneConfirmationOneRun(t *testing.T) {
	t.Parallel()
	for _, q := range confirmationQuestions {
		for _, n := range []int{1, 2, 8, 32} {
			t.Run(fmt.Sprint(q.name, "/", n), func(t *testing.T) {
				t.Parallel()
				oneConfirmationOneRun(t, n, q.ask)
			})
		}
	}
}

// askedConfirmation is a confirmation question asked of the human: its
// token and the intent a confirm button sends with it.
type askedConfirmation struct {
	token  string
	intent agentplane.Intent
}

// confirmationQuestions are the ways a session comes to wait for the
// human's confirmation of the demo's send.
var confirmationQuestions = []struct {
	name string
	ask  func(t *testing.T, c *core.Core, s *agentplane.Session) askedConfirmation
}{
	{"command", func(t *testing.T, c *core.Core, s *agentplane.Session) askedConfirmation {
		turn(t, c, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
		tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "send this to the Q1 pilot list"})
		return askedConfirmation{tr.ConfirmationToken, agentplane.Intent{Type: agentplane.IntentActionCall, Action: "send_template_to_list", Args: json.RawMessage(`{"list_id":"LIST-9"}`)}}
	}},
	{"llm_proposal", func(t *testing.T, c *core.Core, s *agentplane.Session) askedConfirmation {
		turn(t, c, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
		args, err := c.View().Validate("send_template", json.RawMessage(`{"list_id":"LIST-9"}`))
		if err != nil {
			t.Fatal(err)
		}
		cur, err := c.Session(context.Background(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Propose(context.Background(), core.Proposal{Base: cur, Principal: "p", Tool: "send_template", Args: args, Question: "Send the template to the Q1 pilot list?"})
		if err != nil {
			t.Fatal(err)
		}
		return askedConfirmation{d.ConfirmationToken, agentplane.Intent{Type: agentplane.IntentActionCall, Action: "send_template", Args: args}}
	}},
}

func oneConfirmationOneRun(t *testing.T, n int, ask func(*testing.T, *core.Core, *agentplane.Session) askedConfirmation) {
	var sends atomic.Int32
	var answered atomic.Int32
	hold := func() { // until every other answer is in, or a while
		for i := 0; i < 2000 && answered.Load() < int32(n-1); i++ {
			time.Sleep(time.Millisecond)
		}
	}
	c := demotest.Core(t, &core.Options{Programs: countingSend(&sends, hold)})
	ctx := context.Background()
	s := startSession(t, c, "sales")
	q := ask(t, c, s)
	if q.token == "" {
		t.Fatal("no confirmation asked")
	}
	intent := q.intent
	intent.ConfirmationToken = q.token
	var wg sync.WaitGroup
	var wins, refused atomic.Int32
	for i := range n {
		wg.Go(func() {
			defer answered.Add(1)
			var res *agentplane.ExecutionResult
			switch i % 3 {
			case 0: // the human types yes
				tr, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: "yes"}})
				if err != nil {
					t.Error(err)
					return
				}
				res = tr.Result // nil: routed on a session whose question was answered
			default: // the confirm button, under a request id of its own or none
				in := intent
				if i%3 == 1 {
					in.RequestID = fmt.Sprint("click-", i)
				}
				r, err := c.Intent(ctx, gate.IntentRequest{SessionID: s.ID, Principal: "p", Intent: in})
				if err != nil {
					t.Error(err)
					return
				}
				res = &r
			}
			switch {
			case res == nil:
			case res.Status == agentplane.StatusSuccess:
				wins.Add(1)
			case res.Error != nil && res.Error.Code == agentplane.CodeConfirmationInvalid:
				refused.Add(1)
			default:
				t.Errorf("answer %d: %s %+v", i, res.Status, res.Error)
			}
		})
	}
	wg.Wait()
	if sends.Load() != 1 || wins.Load() != 1 {
		t.Fatalf("%d answers: the tool ran %d times, %d successes (%d refused)", n, sends.Load(), wins.Load(), refused.Load())
	}
	recs, err := c.Records(ctx, s.ID, 0)
	if err != nil || audit.Verify(recs) != nil {
		t.Fatalf("records: %v %v", err, audit.Verify(recs))
	}
	ran := 0
	for _, r := range recs {
		if r.Result == nil {
			continue
		}
		if r.Result.Status == agentplane.StatusSuccess && r.Result.Tool == "send_template" {
			ran++
		}
		if r.Result.Error != nil && r.Result.Error.Code == agentplane.CodeVersionConflict {
			t.Errorf("record %d: a version conflict: %s", r.Seq, r.Result.Message)
		}
	}
	if ran != int(sends.Load()) {
		t.Fatalf("the audit records %d runs; the tool ran %d times", ran, sends.Load())
	}
	// the same answers again, one after the other: none runs it again
	if tr, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: "yes"}}); err != nil || tr.Result != nil && tr.Result.Status == agentplane.StatusSuccess {
		t.Fatalf("a later yes: %+v %v", tr.Result, err)
	}
	again := intent
	again.RequestID = "click-again"
	if r, err := c.Intent(ctx, gate.IntentRequest{SessionID: s.ID, Principal: "p", Intent: again}); err != nil || r.Status == agentplane.StatusSuccess {
		t.Fatalf("a later click: %+v %v", r, err)
	}
	if sends.Load() != 1 {
		t.Fatalf("answered again, the tool ran %d times", sends.Load())
	}
}

// TestRunOnAMovedSessionIsRecorded: a session another writer changes
// while a confirmed tool runs gets the run recorded as what it was — a
// success, its effects applied to the session as it then is — never as a
// version conflict; replay of the log finds no divergence. (The run was
// recorded as rejected version_conflict although the tool had acted.)
func TestRunOnAMovedSessionIsRecorded(t *testing.T) {
	t.Parallel()
	var sends atomic.Int32
	moved := make(chan struct{})
	var c *core.Core
	var sessID string
	hold := func() { // another client changes the session while the tool runs
		_, err := c.Intent(context.Background(), gate.IntentRequest{SessionID: sessID, Principal: "p",
			Intent: agentplane.Intent{Type: agentplane.IntentActionCall, Action: "set_active_email_template", Args: json.RawMessage(`{"template_id":"TPL-124"}`)}})
		if err != nil {
			t.Error(err)
		}
		close(moved)
	}
	c = demotest.Core(t, &core.Options{Programs: countingSend(&sends, hold)})
	ctx := context.Background()
	s := startSession(t, c, "sales")
	sessID = s.ID
	turn(t, c, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
	turn(t, c, s.ID, agentplane.TurnInput{Text: "send this to the Q1 pilot list"})
	tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "yes"})
	<-moved
	if sends.Load() != 1 || tr.Result == nil || tr.Result.Status != agentplane.StatusSuccess {
		t.Fatalf("the confirmed send: %d sends, %+v", sends.Load(), tr.Result)
	}
	if tr.Session.PendingConfirmation != nil || tr.Session.AWC.Entity == nil || tr.Session.AWC.Entity.ID != "TPL-124" {
		t.Fatalf("the effects were not applied to the moved session: %+v", tr.Session)
	}
	recs, _ := c.Records(ctx, s.ID, 0)
	last := recs[len(recs)-1]
	if last.Rebased == 0 || last.Rebased == last.Base || last.Result.Status != agentplane.StatusSuccess {
		t.Fatalf("the run's record: base %d, rebased %d, %+v", last.Base, last.Rebased, last.Result)
	}
	var log bytes.Buffer
	for _, r := range recs {
		log.Write(append(r.Raw, '\n'))
	}
	var out bytes.Buffer
	rc := demotest.Core(t, &core.Options{Programs: countingSend(new(atomic.Int32), func() {})})
	if n, err := replay.Run(ctx, rc, &log, &out, nil); err != nil || n != 0 {
		t.Fatalf("replay: %d divergences, %v\n%s", n, err, out.String())
	}
}
