package sqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/workflow"
)

// statements is every distinct statement a store ran, each with the
// arguments of its first run.
type statements struct {
	mu    sync.Mutex
	order []string
	args  map[string][]any
}

func (s *statements) add(query string, args []any) {
	switch query {
	case `SAVEPOINT c`, `ROLLBACK TO c`, `RELEASE c`: // transaction control
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.args[query]; !ok {
		s.order = append(s.order, query)
		s.args[query] = slices.Clone(args)
	}
}

// planClock is the runtime's clock, moved on by the test (the watchdog's
// deadlines).
type planClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *planClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *planClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Background volume: rows of other sessions, users and principals, so
// that a statement reading more than its own rows has thousands to read.
const (
	bgSessions      = 5000
	bgAuditPer      = 10
	bgRequests      = 20000
	bgConfirmations = 10000
	bgNotifications = 20000
	bgWorkflows     = 2000
	bgUsers         = 500
)

// far is a time (Unix nanoseconds) no deadline of the test reaches: the
// background's rows are never due, claimable or stale.
const far = int64(1) << 62

// fillBackground writes the background rows straight into the file.
func fillBackground(t *testing.T, path string) {
	t.Helper()
	db, err := sqlite.OpenRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	series := func(n int) string {
		return fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %d) `, n-1)
	}
	stmts := []string{
		series(bgSessions) + `INSERT INTO sessions (id, version, state, owner, created, head_seq, head_hash)
			SELECT 'bg-s-' || i, 1, '{}', 'bg-u-' || (i % ` + fmt.Sprint(bgUsers) + `), i, ` + fmt.Sprint(bgAuditPer) + `, 'h' FROM n`,
		series(bgSessions*bgAuditPer) + `INSERT INTO audit (session, seq, hash, record)
			SELECT 'bg-s-' || (i / ` + fmt.Sprint(bgAuditPer) + `), i % ` + fmt.Sprint(bgAuditPer) + ` + 1, 'h', '{}' FROM n`,
		series(bgRequests) + `INSERT INTO requests (session, principal, request_id, digest, state, result, claimed_at, seq, running)
			SELECT 'bg-s-' || (i % ` + fmt.Sprint(bgSessions) + `), 'bg-u-' || (i % ` + fmt.Sprint(bgUsers) + `), 'bg-r-' || i, 'd',
				CASE WHEN i % 10 = 0 THEN 'running' ELSE 'done' END, NULL, ` + fmt.Sprint(far) + ` + i, 1, NULL FROM n`,
		series(bgConfirmations) + `INSERT INTO confirmations (digest, used, confirmation, pending)
			SELECT 'bg-c-' || i, i % 2, '{}', CASE WHEN i % 3 = 0 THEN 'bg-p-' || i END FROM n`,
		series(bgNotifications) + `INSERT INTO notifications (id, address_key, seq, address, user_id, session_id, target, handler, title, body,
				payload, dedup_key, directive, ttl_seconds, urgency, channel, state, owner_lease, lease_until, attempts, created, updated, shows)
			SELECT 'bg-n-' || i,
				CASE WHEN i % 2 = 0 THEN 'USER:bg-u-' || (i % ` + fmt.Sprint(bgUsers) + `) ELSE 'SESSION:bg-s-' || (i % ` + fmt.Sprint(bgSessions) + `) END,
				i, CASE WHEN i % 2 = 0 THEN 'USER' ELSE 'SESSION' END, 'bg-u-' || (i % ` + fmt.Sprint(bgUsers) + `),
				'bg-s-' || (i % ` + fmt.Sprint(bgSessions) + `), 'USER', 'SYSTEM', 't', '', '', CASE WHEN i % 7 = 0 THEN 'k' || i ELSE '' END, '', 0, 'NORMAL',
				CASE i % 3 WHEN 0 THEN 'A' WHEN 1 THEN 'B' ELSE 'C' END,
				CASE i % 6 WHEN 0 THEN 'PENDING' WHEN 1 THEN 'DISPATCHED' WHEN 2 THEN 'LOCKED' WHEN 3 THEN 'ESCALATED' WHEN 4 THEN 'DELIVERED' ELSE 'FAILED' END,
				1, ` + fmt.Sprint(far) + `, 0, ` + fmt.Sprint(far) + `, ` + fmt.Sprint(far) + `, 0 FROM n`,
		series(bgWorkflows) + `INSERT INTO workflows (id, session_id, principal, status, pause, state, seq, commands, owner, lease, lease_until, created, updated)
			SELECT 'bg-w-' || i, 'bg-s-' || i, 'bg-u-' || (i % ` + fmt.Sprint(bgUsers) + `),
				CASE i % 4 WHEN 0 THEN 'awaiting_approval' WHEN 1 THEN 'awaiting_decision' ELSE 'completed' END,
				CASE WHEN i % 4 < 2 THEN 'd_bg' || i ELSE '' END, '{}', 10, 3, 'bg-owner', 1, ` + fmt.Sprint(far) + `, i, i FROM n`,
		series(bgWorkflows*10) + `INSERT INTO workflow_events (workflow_id, seq, type, data) SELECT 'bg-w-' || (i / 10), i % 10 + 1, 'e', '{}' FROM n`,
		series(bgWorkflows*3) + `INSERT INTO workflow_commands (workflow_id, seq, body, status, reason, created, done, pause, request_id, request_digest, code)
			SELECT 'bg-w-' || (i / 3), i % 3 + 1, '{}', CASE WHEN i % 3 = 2 THEN 'queued' ELSE 'applied' END, '', i, i,
				CASE WHEN i % 3 = 0 THEN 'd_bg' || (i / 3) ELSE '' END, 'bg-rq-' || i, 'd', '' FROM n`,
		series(bgWorkflows*3) + `INSERT INTO workflow_checkpoints (workflow_id, n, id, layer, state, created) SELECT 'bg-w-' || (i / 3), i % 3 + 1, 'c' || i, i % 3, '{}', i FROM n`,
		series(bgWorkflows*4) + `INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state)
			SELECT 'bg-w-' || (i / 4), 't' || (i % 4), 1, 4611686018427387904, 3, '{}' FROM n`,
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("background: %v\n%s", err, q)
		}
	}
}

// driveProduct runs every acting and reading path of the product once on
// the runtime over st: the statements it runs are what st traced.
func driveProduct(t *testing.T, ctx context.Context, st *sqlite.Store, clk *planClock, got *statements) {
	t.Helper()
	rt, err := plane.Open(ctx, plane.Options{
		Config: core.Source{YAML: demo.YAML, Name: demo.Name},
		Store:  st,
		Core:   core.Options{Programs: demo.Programs(clk.now), Now: clk.now},
		// a command queued for another instance is answered once seen done,
		// looked for every Poll
		Workflows: workflow.Options{Poll: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(time.Minute)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	c := rt.Core
	turn := func(s *agentplane.Session, text, request string) core.Turn {
		t.Helper()
		tr, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: text}, RequestID: request})
		must("turn "+text, err)
		return tr
	}

	// sessions, idempotent creation and its replay
	s, err := c.Start(ctx, core.Start{Principal: "ann", Mode: "sales"})
	must("start", err)
	once, _, err := c.StartOnce(ctx, core.Start{Principal: "ann", ID: "sess-once"}, "create-1")
	must("start once", err)
	if _, created, err := c.StartOnce(ctx, core.Start{Principal: "ann", ID: "sess-once"}, "create-1"); err != nil || created {
		t.Fatalf("start once again: created %v, %v", created, err)
	}

	// plain turns, an idempotent turn and its replay, a confirmed turn
	turn(s, "open the Q1 CFO Outreach template", "")
	turn(once, "hi", "turn-1")
	if tr := turn(once, "hi", "turn-1"); !tr.Repeated {
		t.Fatal("a turn sent again under its request id ran again")
	}
	if asked := turn(s, "send it to the Q1 pilot list", ""); asked.ConfirmationToken == "" {
		t.Fatal("no confirmation asked")
	}
	if tr := turn(s, "yes", ""); tr.Result == nil || tr.Result.Status != agentplane.StatusSuccess {
		t.Fatalf("confirmed turn: %+v", tr.Result)
	}
	// the confirm button: an intent with the token, under a request id, twice
	asked := turn(s, "send it to the Q1 pilot list", "")
	click := gate.IntentRequest{SessionID: s.ID, Principal: "ann", Intent: agentplane.Intent{Type: agentplane.IntentActionCall,
		Action: "send_template_to_list", Args: json.RawMessage(`{"list_id":"LIST-9"}`), ConfirmationToken: asked.ConfirmationToken, RequestID: "click-1"}}
	res, err := c.Intent(ctx, click)
	must("confirm", err)
	if res.Status != agentplane.StatusSuccess {
		t.Fatalf("confirm: %+v", res)
	}
	_, err = c.Intent(ctx, click)
	must("confirm again", err)
	turn(s, "send it to the Q1 pilot list", "")
	turn(s, "no", "")

	// another process appends to the session's chain: this store's cached
	// head is stale, and its next commit (of an idempotent turn) lands
	// after the other's record
	other, err := sqlite.Open(ctx, st.Path(), &sqlite.Options{Extensions: plane.Extensions, Synchronous: "NORMAL"})
	must("open the other store", err)
	oc, err := core.New(ctx, core.Source{YAML: demo.YAML, Name: demo.Name}, &core.Options{Store: other, Programs: demo.Programs(clk.now), Now: clk.now})
	must("the other core", err)
	_, err = oc.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: "hi"}})
	must("the other's turn", err)
	oc.Close()
	other.Close()
	turn(s, "hi", "after-other")

	// audit reads
	_, err = c.Records(ctx, s.ID, 0)
	must("records", err)
	_, err = c.Page(ctx, s.ID, 3, 0, 2)
	must("page before", err)
	_, err = c.Page(ctx, s.ID, 0, 1, 2)
	must("page after", err)
	_, err = c.Page(ctx, s.ID, 0, 0, 2)
	must("last page", err)
	_, err = c.Tail(ctx, s.ID, 2)
	must("tail", err)
	_, err = c.Verify(ctx, s.ID)
	must("verify", err)
	_, err = st.Head(ctx, s.ID)
	must("head", err)
	_, _, err = c.Resume(ctx, s.ID, "ann")
	must("resume", err)
	_, err = c.Owned(ctx, s.ID, "ann")
	must("owned", err)
	_, err = st.Stale(ctx, clk.now(), 100) // the gate's takeover (core.Recover)
	must("stale", err)

	// sessions by owner, two pages
	page, err := c.Sessions(ctx, store.SessionQuery{Owner: "ann", Limit: 1})
	must("sessions", err)
	if page.Next == "" {
		t.Fatal("ann's sessions: no second page")
	}
	_, err = c.Sessions(ctx, store.SessionQuery{Owner: "ann", Limit: 1, Cursor: page.Next})
	must("sessions page 2", err)

	// configurations and catalog versions
	if _, ok, err := c.StoredConfig(ctx, c.Digest()); err != nil || !ok {
		t.Fatalf("stored config: %v %v", ok, err)
	}
	body := []byte(`{"items":[]}`)
	sum := sha256.Sum256(body)
	version := "sha256:" + hex.EncodeToString(sum[:])
	must("put catalog version", st.PutCatalogVersion(ctx, version, body))
	if _, ok, err := st.CatalogVersion(ctx, version); err != nil || !ok {
		t.Fatalf("catalog version: %v %v", ok, err)
	}

	driveWorkflows(t, ctx, rt, s, once)
	driveNotifications(t, ctx, rt, s, clk, got)
}

// driveWorkflows starts a workflow (twice, under one request id) that
// waits for an approval, approves it (twice, under one request id), waits
// for a decision after its first layer, and aborts it; and one whose task
// fails (bare has no template open); then reads them.
func driveWorkflows(t *testing.T, ctx context.Context, rt *plane.Runtime, s, bare *agentplane.Session) {
	t.Helper()
	e := rt.Workflows
	wait := func(id string, after int64) *workflow.Workflow {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		w, err := e.Wait(wctx, id, "ann", after)
		if err != nil {
			t.Fatalf("wait %s: %v", id, err)
		}
		return w
	}
	def := func(src string) *workflow.Definition {
		d, err := workflow.Parse([]byte(src), "plans.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	perLayer := def("name: send\nper_layer_validation: true\ntasks:\n  - {id: send, tool: send_template, args: {list_id: LIST-9}}\n" +
		"  - {id: again, tool: send_template, args: {list_id: LIST-10}, depends_on: [send]}\n")
	w, err := e.Start(ctx, workflow.Start{SessionID: s.ID, Principal: "ann", RequestID: "wf-start", Definition: perLayer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(ctx, workflow.Start{SessionID: s.ID, Principal: "ann", RequestID: "wf-start", Definition: perLayer}); err != nil {
		t.Fatalf("start again: %v", err)
	}
	w = wait(w.ID, 0)
	if w.Status != workflow.StatusAwaitingApproval || w.Approval == nil {
		t.Fatalf("want an approval: %+v", w)
	}
	yes := true
	approve := workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: &yes, RequestID: "approve-1"}
	if _, _, err := e.CommandResult(ctx, w.ID, "ann", approve); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if _, err := e.Command(ctx, w.ID, "ann", approve); err != nil {
		t.Fatalf("approve again: %v", err)
	}
	w = wait(w.ID, w.Seq)
	if w.Status != workflow.StatusAwaitingDecision || w.Decision == nil {
		t.Fatalf("want a decision after layer 1: %+v", w)
	}
	first := w.Decision.ID
	if _, err := e.Command(ctx, w.ID, "ann", workflow.Command{Type: "continue", DecisionID: first}); err != nil {
		t.Fatalf("continue: %v", err)
	}
	if w = wait(w.ID, w.Seq); w.Status != workflow.StatusAwaitingApproval {
		t.Fatalf("want the second layer's approval: %+v", w)
	}
	// an answer naming another checkpoint is refused
	if _, err := e.Command(ctx, w.ID, "ann", workflow.Command{Type: "approval_response", CheckpointID: "wf_other-a1", Approved: &yes}); agentplane.ErrorCode(err) != agentplane.CodeInvalidState {
		t.Fatalf("an approval of another checkpoint: %v", err)
	}
	if _, err := e.Command(ctx, w.ID, "ann", workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: &yes}); err != nil {
		t.Fatalf("approve layer 2: %v", err)
	}
	if w = wait(w.ID, w.Seq); w.Status != workflow.StatusAwaitingDecision {
		t.Fatalf("want a decision after layer 2: %+v", w)
	}
	// the first decision, answered already
	if _, err := e.Command(ctx, w.ID, "ann", workflow.Command{Type: "continue", DecisionID: first}); agentplane.ErrorCode(err) != agentplane.CodeAlreadyAnswered {
		t.Fatalf("an answered decision answered again: %v", err)
	}
	if _, err := e.Command(ctx, w.ID, "ann", workflow.Command{Type: "abort", DecisionID: w.Decision.ID, Reason: "enough"}); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if w = wait(w.ID, w.Seq); w.Status != workflow.StatusAborted {
		t.Fatalf("after abort: %+v", w)
	}

	// another instance's workflows: one answered through this instance
	// (the command is queued for the instance holding it), one paused
	// when that instance stopped, which this one takes over
	other, err := workflow.New(rt.Core, rt.Store, &workflow.Options{Poll: 20 * time.Millisecond}) // it looks for queued commands every Poll
	if err != nil {
		t.Fatal(err)
	}
	pausedAt := func(name string) *workflow.Workflow {
		t.Helper()
		o, err := other.Start(ctx, workflow.Start{SessionID: s.ID, Principal: "ann", Definition: def("name: " + name + "\ntasks:\n  - {id: send, tool: send_template, args: {list_id: LIST-9}}\n")})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		o, err = other.Wait(wctx, o.ID, "ann", 0)
		if err != nil || o.Status != workflow.StatusAwaitingApproval {
			t.Fatalf("the other instance's workflow: %+v %v", o, err)
		}
		return o
	}
	queued, o := pausedAt("queued"), pausedAt("later")
	if _, err := e.Command(ctx, queued.ID, "ann", workflow.Command{Type: "approval_response", CheckpointID: queued.Approval.CheckpointID, Approved: &yes}); err != nil {
		t.Fatalf("approve the other instance's workflow: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	done, err := other.Wait(wctx, queued.ID, "ann", queued.Seq)
	cancel()
	if err != nil || done.Status != workflow.StatusCompleted {
		t.Fatalf("the other instance's workflow after the approval: %+v %v", done, err)
	}
	other.Close(time.Minute)
	if err := e.ClaimDue(ctx); err != nil {
		t.Fatal(err)
	}
	if held := e.Holding(); !slices.Contains(held, o.ID) {
		t.Fatalf("the paused workflow was not taken over: holding %v", held)
	}

	f, err := e.Start(ctx, workflow.Start{SessionID: bare.ID, Principal: "ann", MaxAttempts: 1,
		Definition: def("name: fails\ntasks:\n  - {id: send, tool: send_template, args: {list_id: LIST-9}}\n")})
	if err != nil {
		t.Fatal(err)
	}
	for f = wait(f.ID, 0); f.Status == workflow.StatusAwaitingApproval; f = wait(f.ID, f.Seq) {
		if _, err := e.Command(ctx, f.ID, "ann", workflow.Command{Type: "approval_response", CheckpointID: f.Approval.CheckpointID, Approved: &yes}); err != nil {
			t.Fatal(err)
		}
	}
	if f.Status != workflow.StatusFailed {
		t.Fatalf("want it failed: %+v", f)
	}

	// seven layers: more checkpoints than a workflow keeps
	chain := "name: chain\ntasks:\n  - {id: t1, tool: send_template, args: {list_id: LIST-9}}\n"
	for i := 2; i <= 7; i++ {
		chain += fmt.Sprintf("  - {id: t%d, tool: send_template, args: {list_id: LIST-9}, depends_on: [t%d]}\n", i, i-1)
	}
	c, err := e.Start(ctx, workflow.Start{SessionID: s.ID, Principal: "ann", Definition: def(chain)})
	if err != nil {
		t.Fatal(err)
	}
	for c = wait(c.ID, 0); c.Status == workflow.StatusAwaitingApproval; c = wait(c.ID, c.Seq) {
		if _, err := e.Command(ctx, c.ID, "ann", workflow.Command{Type: "approval_response", CheckpointID: c.Approval.CheckpointID, Approved: &yes}); err != nil {
			t.Fatal(err)
		}
	}
	if c.Status != workflow.StatusCompleted {
		t.Fatalf("the chain: %+v", c)
	}

	if _, err := e.Get(ctx, w.ID, "ann"); err != nil {
		t.Fatal(err)
	}
	if ws, err := e.List(ctx, "ann", 10); err != nil || len(ws) != 5 {
		t.Fatalf("list: %d workflows, %v", len(ws), err)
	}
	if _, err := e.Checkpoints(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Events(ctx, w.ID, 0, 100); err != nil {
		t.Fatal(err)
	}
	if err := e.ClaimDue(ctx); err != nil {
		t.Fatal(err)
	}
}

// driveNotifications runs the ledger's every transition and read, and
// the watchdog's sweeps.
func driveNotifications(t *testing.T, ctx context.Context, rt *plane.Runtime, s *agentplane.Session, clk *planClock, got *statements) {
	t.Helper()
	l := rt.Ledger
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	inbox := notify.Notification{Address: notify.AddressUser, UserID: "ann", Target: notify.TargetUser, Handler: notify.HandlerSystem, Title: "one"}
	a, err := l.Emit(ctx, inbox, 0)
	must("emit", err)
	b, err := l.Emit(ctx, inbox, 0)
	must("emit", err)
	deduped := inbox
	deduped.DedupKey = "build-7"
	_, err = l.Emit(ctx, deduped, 0)
	must("emit with a dedup key", err)
	deduped.Title = "two"
	_, err = l.Emit(ctx, deduped, 0)
	must("emit over a live dedup key", err)
	floor := notify.Notification{Address: notify.AddressSession, UserID: "ann", SessionID: s.ID, Target: notify.TargetUser, Handler: notify.HandlerSystem, Title: "floor"}
	fl, err := l.Emit(ctx, floor, 0)
	must("emit to a session", err)

	ackBatch(t, ctx, rt, got)
	_, err = l.Dispatch(ctx, a.ID)
	must("dispatch", err)
	_, err = l.Ack(ctx, a.ID, "ann")
	must("ack", err)
	_, err = l.Ack(ctx, b.ID, "ann")
	must("ack pending", err)
	_, err = l.Dispatch(ctx, fl.ID)
	must("dispatch", err)
	n, err := l.Claim(ctx, fl.ID, 0, time.Minute)
	must("claim", err)
	_, err = l.Deliver(ctx, fl.ID, n.OwnerLease)
	must("deliver", err)
	_, err = l.Get(ctx, a.ID)
	must("get", err)
	_, _, err = l.Inbox(ctx, "ann", 20)
	must("inbox", err)
	_, _, err = rt.Bus.Inbox(ctx, "ann", 20)
	must("bus inbox", err)
	_, err = l.Unread(ctx, "ann")
	must("unread", err)
	for _, q := range []notify.Query{{UserID: "ann"}, {UserID: "ann", Channel: notify.ChannelInbox},
		{UserID: "ann", States: []notify.State{notify.StatePending, notify.StateDispatched}},
		{UserID: "ann", Channel: notify.ChannelFloor, States: []notify.State{notify.StateDelivered}}} {
		_, err = l.List(ctx, q)
		must("list", err)
	}
	l.Awareness(ctx, s)

	// the agent's notifications: one the agent acknowledges, one it never
	// delivers (escalated, shown again, then a dead letter), one locked
	// and escalated by its owner, one failed by its owner
	agent := notify.Notification{Address: notify.AddressUser, UserID: "ann", Target: notify.TargetAgent, Handler: notify.HandlerSystem, Title: "build failed", TTLSeconds: 60}
	acked, err := l.Emit(ctx, agent, 0)
	must("emit to the agent", err)
	l.AgentAck(ctx, "ann", []string{acked.ID})
	_, err = l.Emit(ctx, agent, 0)
	must("emit to the agent", err)
	esc, err := l.Emit(ctx, agent, 0)
	must("emit to the agent", err)
	_, err = l.Dispatch(ctx, esc.ID)
	must("dispatch", err)
	n, err = l.Claim(ctx, esc.ID, 0, time.Minute)
	must("claim", err)
	_, err = l.Escalate(ctx, esc.ID, n.OwnerLease)
	must("escalate", err)
	failed, err := l.Emit(ctx, agent, 0)
	must("emit to the agent", err)
	_, err = l.Dispatch(ctx, failed.ID)
	must("dispatch", err)
	n, err = l.Claim(ctx, failed.ID, 0, time.Minute)
	must("claim", err)
	_, err = l.Fail(ctx, failed.ID, n.OwnerLease)
	must("fail", err)

	dog := &notify.Watchdog{Bus: rt.Bus, RetryAfter: time.Minute, MaxShows: 2}
	for range 4 {
		clk.advance(2 * time.Minute)
		_, err := dog.Sweep(ctx)
		must("sweep", err)
	}
	_, err = l.Due(ctx, clk.now(), time.Minute, 500)
	must("due", err)
	dead, err := l.Dead(ctx, 50)
	must("dead", err)
	if len(dead) < 2 {
		t.Fatalf("dead letters: %d, want the failed one and the escalated one", len(dead))
	}
}

// ackBatch acknowledges many notifications at once, so that acks are
// delivered in batches as under load: SQLite planned the batched ack
// over the state index from 16 acks a batch. While a commit holds the
// store's leader, the acks wait in line, and the commit after it takes
// them as one batch; rounds are tried until one batch held at least 16
// (a goroutine may not reach the line before the leader is let go).
func ackBatch(t *testing.T, ctx context.Context, rt *plane.Runtime, got *statements) {
	t.Helper()
	const n = 32
	largest := func() int {
		got.mu.Lock()
		defer got.mu.Unlock()
		most := 0
		for _, q := range got.order {
			if strings.HasPrefix(q, "UPDATE OR FAIL notifications") {
				most = max(most, strings.Count(q, "(id = ?"))
			}
		}
		return most
	}
	for round := 0; largest() < 16; round++ {
		if round == 10 {
			t.Fatalf("no batch of 16 acks in 10 rounds of %d: at most %d", n, largest())
		}
		ids := make([]string, n)
		for i := range ids {
			e, err := rt.Ledger.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: fmt.Sprint("acker-", i%4), Target: notify.TargetUser,
				Handler: notify.HandlerSystem, Title: "ack me"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = e.ID
		}
		entered, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			held <- rt.Store.Commit(ctx, &store.Commit{Ops: []store.Op{store.OpFunc(func(context.Context, store.Tx) error {
				close(entered)
				<-release
				return nil
			})}})
		}()
		<-entered
		var started atomic.Int32
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, id := range ids {
			wg.Go(func() {
				started.Add(1)
				_, errs[i] = rt.Ledger.Ack(ctx, id, fmt.Sprint("acker-", i%4))
			})
		}
		for started.Load() < n {
			runtime.Gosched()
		}
		close(release)
		wg.Wait()
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("ack %d: %v", i, err)
			}
		}
	}
}

// planStep is a row of EXPLAIN QUERY PLAN.
type planStep struct {
	id, parent int
	detail     string
}

func explain(db *sql.DB, query string, args []any) ([]planStep, error) {
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []planStep
	for rows.Next() {
		var s planStep
		var unused int
		if err := rows.Scan(&s.id, &s.parent, &unused, &s.detail); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// fixedTables hold a row per migration or extension: never more than a
// few.
var fixedTables = map[string]bool{"schema_version": true, "schema_extensions": true}

// weakColumns are columns with a handful of values: an index step that
// finds rows by them alone reads a share of every user's rows.
var weakColumns = map[string]bool{"state": true, "status": true, "channel": true, "used": true, "address": true}

// allowed are plan steps that read more than the statement's own rows on
// purpose; each with why. Keyed by a fragment of the statement and the
// step's detail. (None now.)
var allowed = []struct{ query, step, why string }{}

// expected are constraints a statement's plan must show, which the rules
// of badStep cannot tell from the statement: keyed by a fragment of the
// statement.
var expected = []struct{ query, step, why string }{
	{"AND (created, id) < (?, ?)", "(owner=? AND (created,id)<(?,?))", "a page of sessions starts at its cursor, not at the owner's newest"},
}

// reached are fragments of statements the workload must have run: the
// paths least easy to reach (a path it stops reaching is not audited).
var reached = []string{
	"UPDATE OR FAIL notifications SET state", // a batch of acks
	"AND dedup_key = ? AND dedup_key <> ''",  // an emit over a live deduplication key
	"UPDATE notifications SET shows = shows + 1",
	"FROM notifications WHERE state = 'FAILED'",
	"AND (created, id) < (?, ?)",                             // a second page of sessions
	"FROM audit WHERE session = ? ORDER BY seq DESC LIMIT 1", // a stale chain head
	"UPDATE requests SET seq = ?",
	"UPDATE confirmations SET used = 1 WHERE pending = ?",
	"UPDATE confirmations SET used = 1 WHERE digest = ?",
	"FROM workflows WHERE status IN (",
	"UPDATE workflows SET owner = ?",       // a workflow taken over
	"UPDATE workflows SET lease_until = 0", // released
	"AND c.request_id = ?",                 // a command under its idempotency key
	"AND pause = ? AND pause <> ''",        // an answered decision
	"DELETE FROM workflow_checkpoints",     // more checkpoints than kept
	"INSERT INTO configs",
	"FROM catalog_versions WHERE version = ?",
}

// schema is what the plan rules know of the database: its tables, each
// with its columns and indexes.
type schema struct {
	columns map[string]map[string]bool // table → its columns
	indexes map[string][]index         // table → its indexes, the primary key's too
}

// index is an index's name (as EXPLAIN QUERY PLAN names it) and columns,
// and whether it is partial (holds only the rows its WHERE names).
type index struct {
	name    string
	cols    []string
	partial bool
}

func readSchema(t *testing.T, db *sql.DB) schema {
	t.Helper()
	sc := schema{columns: map[string]map[string]bool{}, indexes: map[string][]index{}}
	names := func(query string, args ...any) []string {
		rows, err := db.Query(query, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	for _, table := range names(`SELECT name FROM sqlite_master WHERE type = 'table'`) {
		sc.columns[table] = map[string]bool{}
		for _, c := range names(`SELECT name FROM pragma_table_info(?)`, table) {
			sc.columns[table][c] = true
		}
		for _, name := range names(`SELECT name FROM pragma_index_list(?)`, table) {
			ix := index{name: name, cols: names(`SELECT name FROM pragma_index_info(?) ORDER BY seqno`, name)}
			ix.partial = slices.Contains(names(`SELECT partial FROM pragma_index_list(?) WHERE name = ?`, table, name), "1")
			if slices.Contains(names(`SELECT origin FROM pragma_index_list(?) WHERE name = ?`, table, name), "pk") {
				ix.name = "PRIMARY KEY" // a WITHOUT ROWID table's
			}
			sc.indexes[table] = append(sc.indexes[table], ix)
		}
	}
	return sc
}

// keyColumns are the columns a statement's WHERE compares for equality
// (= a value or a parameter, IN a list), by name, of any of its tables.
func keyColumns(query string) map[string]bool {
	where := query
	if i := strings.Index(query, " WHERE "); i >= 0 {
		where = query[i:]
	}
	out := map[string]bool{}
	for _, m := range keyRE.FindAllStringSubmatch(where, -1) {
		out[m[1]] = true
	}
	return out
}

var keyRE = regexp.MustCompile(`(\w+)\s*(?:=\s*(?:\?|'|\d)|IN\s*\()`)

// aliases maps the statement's table aliases to their tables.
func aliases(query string) map[string]string {
	out := map[string]string{}
	for _, m := range aliasRE.FindAllStringSubmatch(query, -1) {
		out[m[2]] = m[1]
	}
	return out
}

var aliasRE = regexp.MustCompile(`(?:FROM|JOIN)\s+(\w+)\s+(?:AS\s+)?(\w+)\s+(?:ON|WHERE|JOIN)`)

// prefix is how many of the index's leading columns are among keys,
// weak columns not counted (an index of them is no better).
func prefix(cols []string, keys map[string]bool) int {
	n := 0
	for _, c := range cols {
		if !keys[c] {
			break
		}
		if !weakColumns[c] {
			n++
		}
	}
	return n
}

// allowance is why a plan step that badStep would refuse is allowed, if
// it is.
func allowance(query, detail string) (string, bool) {
	for _, a := range allowed {
		if strings.Contains(oneLine(query), a.query) && strings.Contains(detail, a.step) {
			return a.why, true
		}
	}
	return "", false
}

// badStep says what is wrong with a plan step of a statement, or "" when
// nothing is:
//   - a SCAN of a table that grows (one not in fixedTables), unless of a
//     covering index;
//   - a SEARCH whose every constraint is on a column of weakColumns (the
//     acks' plan before stateTerm), unless its index is partial: then it
//     holds only the rows of those values the statement looks for (the
//     watchdog's, the dead letters);
//   - a SEARCH by fewer of the statement's equality columns than another
//     index of the table has as its leading columns (a partial index the
//     statement does not say it may use, or a key it does not use);
//   - a statement of expected whose plan lacks the constraint it names.
func badStep(sc schema, query, detail string) string {
	table := func(name string) string {
		if _, ok := sc.columns[name]; ok {
			return name
		}
		return aliases(query)[name]
	}
	if m := scanRE.FindStringSubmatch(detail); m != nil {
		if tb := table(m[1]); tb != "" && !fixedTables[tb] && !strings.Contains(detail, "COVERING INDEX") {
			return "reads all of " + tb
		}
		return ""
	}
	m := searchRE.FindStringSubmatch(detail)
	if m == nil {
		return ""
	}
	tb := table(m[1])
	if tb == "" || fixedTables[tb] {
		return ""
	}
	terms := strings.Split(m[3], " AND ")
	weak := true
	used, leading := 0, true // the leading equality constraints
	for _, c := range terms {
		col := columnRE.FindStringSubmatch(c)[1]
		if !weakColumns[col] {
			weak = false
		}
		leading = leading && strings.HasSuffix(c, "=?") && !strings.ContainsAny(c, "<>")
		if leading && !weakColumns[col] {
			used++
		}
	}
	if weak && !slices.ContainsFunc(sc.indexes[tb], func(ix index) bool { return ix.partial && "INDEX "+ix.name == m[2] }) {
		return "finds its rows of " + tb + " by " + m[3] + " alone: every user's rows with those values"
	}
	keys := map[string]bool{}
	for c := range keyColumns(query) {
		if sc.columns[tb][c] {
			keys[c] = true
		}
	}
	for _, ix := range sc.indexes[tb] {
		if n := prefix(ix.cols, keys); n > used {
			return fmt.Sprintf("finds its rows of %s in %s by %d of the statement's key columns, where %s has %d: %v", tb, m[2], used, ix.name, n, ix.cols[:n])
		}
	}
	return ""
}

var (
	scanRE   = regexp.MustCompile(`^SCAN (\w+)`)
	searchRE = regexp.MustCompile(`^SEARCH (\w+) USING (?:COVERING )?(PRIMARY KEY|INDEX \w+|INTEGER PRIMARY KEY) \((.*)\)$`)
	columnRE = regexp.MustCompile(`^\(?(\w+)`)
)

// TestEveryStatementFindsItsRows runs every acting and reading path of
// the product once (turns, confirmations, idempotent requests, audit
// pages, sessions, workflows, notifications, the watchdog) on a database
// full of other sessions', users' and principals' rows, and asks SQLite
// (EXPLAIN QUERY PLAN, with the arguments each statement first ran with)
// how it plans every distinct statement the store ran: none may read a
// table that grows with use from end to end, find its rows by an index
// of a column with a handful of values (the plan SQLite chose for
// notify's batched acks, which read every live notification per batch),
// or by fewer of its key columns than another index holds (badStep),
// unless allowed says why. -v prints every statement with its plan.
func TestEveryStatementFindsItsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	st, err := sqlite.Open(ctx, path, &sqlite.Options{Extensions: plane.Extensions, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fillBackground(t, path)
	got := &statements{args: map[string][]any{}}
	st.Trace(got.add)
	clk := &planClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	driveProduct(t, ctx, st, clk, got)
	st.Trace(nil)

	for _, r := range reached {
		if !slices.ContainsFunc(got.order, func(q string) bool { return strings.Contains(oneLine(q), r) }) {
			t.Errorf("the workload ran no statement with %q", r)
		}
	}

	db, err := sqlite.OpenRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sc := readSchema(t, db)
	var table strings.Builder
	failed := 0
	for i, q := range got.order {
		steps, err := explain(db, q, got.args[q])
		if err != nil {
			t.Errorf("explain statement %d: %v\n%s", i, err, q)
			continue
		}
		fmt.Fprintf(&table, "\n#%d %s\n", i, oneLine(q))
		for _, s := range steps {
			mark := "  "
			if why, ok := allowance(q, s.detail); ok && badStep(sc, q, s.detail) != "" {
				mark = "~~"
				s.detail += "  [allowed: " + why + "]"
			} else if why := badStep(sc, q, s.detail); why != "" {
				mark = "!!"
				failed++
				t.Errorf("statement #%d %s\n  plan step %q %s", i, oneLine(q), s.detail, why)
			}
			fmt.Fprintf(&table, "   %s %s\n", mark, s.detail)
		}
		for _, e := range expected {
			if strings.Contains(oneLine(q), e.query) && !slices.ContainsFunc(steps, func(s planStep) bool { return strings.Contains(s.detail, e.step) }) {
				failed++
				t.Errorf("statement #%d %s\n  plan %v has no step by %s: %s", i, oneLine(q), steps, e.step, e.why)
			}
		}
	}
	t.Logf("%d distinct statements, %d bad plan steps:%s", len(got.order), failed, table.String())
}

// oneLine is a statement on one line, its whitespace collapsed.
func oneLine(q string) string { return strings.Join(strings.Fields(q), " ") }
