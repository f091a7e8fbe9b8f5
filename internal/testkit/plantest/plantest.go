// Package plantest is the workload of the stores' plan audits
// (TestEveryStatementFindsItsRows in store/sqlite and store/postgres): a
// background of thousands of other sessions', users' and principals' rows
// (Fill, per dialect), and every acting and reading path of the product
// driven once over a store (Drive), whose statements the audit captures
// (Statements) and asks its database to plan.
//
//	got := plantest.NewStatements()
//	st.Trace(got.Add)
//	plantest.Drive(t, ctx, plantest.Target{Store: st, Other: reopen}, plantest.NewClock(), got)
package plantest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/agentplane/agentplane/workflow"
)

// statements is every distinct statement a store ran, each with the
// Statements is every distinct statement a store ran, each with the
// arguments of its first run: Add is a store's trace. Safe for concurrent
// use.
type Statements struct {
	mu      sync.Mutex
	order   []string
	args    map[string][]any
	waiting []seen // Seen's, until a statement holds their fragment
}

// seen is a fragment a caller of Seen waits for.
type seen struct {
	fragment string
	c        chan struct{}
}

// NewStatements returns an empty set.
func NewStatements() *Statements { return &Statements{args: map[string][]any{}} }

// Mark opens a statement the workload itself runs (not the product's),
// which Add leaves out.
const Mark = "/* plantest */ "

// Add records query, unless it is transaction control or the workload's
// own (Mark), with a copy of args if it is new.
func (s *Statements) Add(query string, args []any) {
	switch query {
	case `SAVEPOINT c`, `ROLLBACK TO c`, `RELEASE c`: // transaction control
		return
	}
	if strings.HasPrefix(query, Mark) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.args[query]; !ok {
		s.order = append(s.order, query)
		s.args[query] = slices.Clone(args)
		s.waiting = slices.DeleteFunc(s.waiting, func(w seen) bool {
			if strings.Contains(Normal(query), w.fragment) {
				close(w.c)
				return true
			}
			return false
		})
	}
}

// Seen returns a channel closed once a statement holding fragment (as
// Normal writes it) was added.
func (s *Statements) Seen(fragment string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(chan struct{})
	if slices.ContainsFunc(s.order, func(q string) bool { return strings.Contains(Normal(q), fragment) }) {
		close(c)
		return c
	}
	s.waiting = append(s.waiting, seen{fragment, c})
	return c
}

// Order returns the statements in the order they first ran.
func (s *Statements) Order() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// Args returns the arguments of query's first run.
func (s *Statements) Args(query string) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.args[query]
}

// Clock is the runtime's clock, moved on by the workload (the watchdog's
// deadlines). Safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at the workload's start.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *Clock) advance(d time.Duration) {
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
	// the inbox's history: notifications delivered long ago, to the
	// background's users and a twentieth of them to ann, the workload's
	// user (5,000): what a statement reading all of a user's rows reads
	bgHistory   = 100000
	bgWorkflows = 2000
	bgUsers     = 500
	// configurations and catalog versions: one per deployment's
	// configuration and per provider's answer
	bgConfigs         = 200
	bgCatalogVersions = 5000
)

// historySeq is past the sequence numbers of the other background rows:
// the history's are historySeq + i.
const historySeq = 1_000_000

// far is a time (Unix nanoseconds) no deadline of the workload reaches:
// the background's rows are never due, claimable or stale.
const far = int64(1) << 62

// Fill returns the statements that write the background rows into a
// store's database of dialect (store.SQLite or store.Postgres), migrated
// with plane.Extensions: each inserts n rows, numbered i from 0.
func Fill(dialect string) []string {
	insert := func(n int, into, sel string) string {
		if dialect == store.Postgres {
			return `INSERT INTO ` + into + ` ` + sel + ` FROM generate_series(0, ` + fmt.Sprint(n-1) + `) AS n(i)`
		}
		return fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %d) `, n-1) +
			`INSERT INTO ` + into + ` ` + sel + ` FROM n`
	}
	used := `i % 2` // a confirmation's used, half of them
	if dialect == store.Postgres {
		used = `i % 2 = 1`
	}
	users, sessions, audits := fmt.Sprint(bgUsers), fmt.Sprint(bgSessions), fmt.Sprint(bgAuditPer)
	historyUser := `(CASE WHEN i % 20 = 0 THEN 'ann' ELSE 'bg-u-' || (i % ` + users + `) END)`
	out := []string{
		insert(bgSessions, `sessions (id, version, state, owner, created, head_seq, head_hash)`,
			`SELECT 'bg-s-' || i, 1, '{}', 'bg-u-' || (i % `+users+`), i, `+audits+`, 'h'`),
		insert(bgSessions*bgAuditPer, `audit (session, seq, hash, record)`,
			`SELECT 'bg-s-' || (i / `+audits+`), i % `+audits+` + 1, 'h', '{}'`),
		insert(bgRequests, `requests (session, principal, request_id, digest, state, result, claimed_at, seq, running)`,
			`SELECT 'bg-s-' || (i % `+sessions+`), 'bg-u-' || (i % `+users+`), 'bg-r-' || i, 'd',
				CASE WHEN i % 10 = 0 THEN 'running' ELSE 'done' END, NULL, `+fmt.Sprint(far)+` + i, 1, NULL`),
		insert(bgConfirmations, `confirmations (digest, used, confirmation, pending)`,
			`SELECT 'bg-c-' || i, `+used+`, '{}', CASE WHEN i % 3 = 0 THEN 'bg-p-' || i END`),
		insert(bgNotifications, `notifications (id, address_key, seq, address, user_id, session_id, target, handler, title, body,
				payload, dedup_key, directive, ttl_seconds, urgency, channel, state, owner_lease, lease_until, attempts, created, updated, shows)`,
			`SELECT 'bg-n-' || i,
				CASE WHEN i % 2 = 0 THEN 'USER:bg-u-' || (i % `+users+`) ELSE 'SESSION:bg-s-' || (i % `+sessions+`) END,
				i, CASE WHEN i % 2 = 0 THEN 'USER' ELSE 'SESSION' END, 'bg-u-' || (i % `+users+`),
				'bg-s-' || (i % `+sessions+`), 'USER', 'SYSTEM', 't', '', '', CASE WHEN i % 7 = 0 THEN 'k' || i ELSE '' END, '', 0, 'NORMAL',
				CASE i % 3 WHEN 0 THEN 'A' WHEN 1 THEN 'B' ELSE 'C' END,
				CASE i % 6 WHEN 0 THEN 'PENDING' WHEN 1 THEN 'DISPATCHED' WHEN 2 THEN 'LOCKED' WHEN 3 THEN 'ESCALATED' WHEN 4 THEN 'DELIVERED' ELSE 'FAILED' END,
				1, `+fmt.Sprint(far)+`, 0, `+fmt.Sprint(far)+`, `+fmt.Sprint(far)+`, 0`),
		insert(bgHistory, `notifications (id, address_key, seq, address, user_id, session_id, target, handler, title, body,
				payload, dedup_key, directive, ttl_seconds, urgency, channel, state, owner_lease, lease_until, attempts, created, updated, shows)`,
			`SELECT 'bg-h-' || i, 'USER:' || `+historyUser+`, `+fmt.Sprint(historySeq)+` + i, 'USER', `+historyUser+`, '', 'USER', 'SYSTEM', 't', '', '', '', '', 0, 'NORMAL',
				'A', 'DELIVERED', 1, 0, 1, i, i, 0`),
		insert(bgConfigs, `configs (digest, body, created)`, `SELECT 'bg-cfg-' || i, 'x', i`),
		insert(bgCatalogVersions, `catalog_versions (version, body, created)`, `SELECT 'sha256:bg-' || i, 'x', i`),
		insert(bgWorkflows, `workflows (id, session_id, principal, status, pause, state, seq, commands, owner, lease, lease_until, created, updated)`,
			`SELECT 'bg-w-' || i, 'bg-s-' || i, 'bg-u-' || (i % `+users+`),
				CASE i % 4 WHEN 0 THEN 'awaiting_approval' WHEN 1 THEN 'awaiting_decision' ELSE 'completed' END,
				CASE WHEN i % 4 < 2 THEN 'd_bg' || i ELSE '' END, '{}', 10, 3, 'bg-owner', 1, `+fmt.Sprint(far)+`, i, i`),
		insert(bgWorkflows*10, `workflow_events (workflow_id, seq, type, data, cp_n, cp_id, cp_layer, cp_state, cp_created)`,
			`SELECT 'bg-w-' || (i / 10), i % 10 + 1, 'e', '{}', CASE WHEN i % 3 = 2 THEN i % 10 ELSE 0 END,
				CASE WHEN i % 3 = 2 THEN 'c' || i ELSE '' END, i % 3, CASE WHEN i % 3 = 2 THEN '{}' ELSE '' END, i`),
		insert(bgWorkflows*3, `workflow_commands (workflow_id, seq, body, status, reason, created, done, pause, request_id, request_digest, code)`,
			`SELECT 'bg-w-' || (i / 3), i % 3 + 1, '{}', CASE WHEN i % 3 = 2 THEN 'queued' ELSE 'applied' END, '', i, i,
				CASE WHEN i % 3 = 0 THEN 'd_bg' || (i / 3) ELSE '' END, 'bg-rq-' || i, 'd', ''`),
		insert(bgWorkflows*4, `workflow_task_history (workflow_id, id, since, until, n, state)`,
			`SELECT 'bg-w-' || (i / 4), 't' || (i % 4), 1, 4611686018427387904, 3, '{}'`),
	}
	if dialect == store.Postgres { // an address's last seq, kept apart there
		out = append(out, insert(bgUsers, `notification_seqs (address_key, seq)`, `SELECT 'USER:bg-u-' || i, `+fmt.Sprint(2*historySeq)),
			`INSERT INTO notification_seqs (address_key, seq) VALUES ('USER:ann', `+fmt.Sprint(2*historySeq)+`)`)
	}
	return out
}

// Target is the store a workload drives, and another process's on the
// same database.
type Target struct {
	// Store was opened with plane.Extensions; the workload does not close it.
	Store interface {
		store.Store
		store.CatalogVersions
	}
	// Other opens a second store on Store's database, with
	// plane.Extensions: another process, whose commit makes the chain head
	// Store cached stale. The workload closes it.
	Other func(ctx context.Context) (store.Store, error)
}

// Drive runs every acting and reading path of the product once on a
// runtime over tg.Store (turns, confirmed turns and the confirm button,
// idempotent requests and their replay, a stale chain head, audit pages,
// sessions by owner, the chain heads, configurations and catalog
// versions, workflows, notifications in batches and alone, the watchdog,
// and the followers of other instances' writes), with clk as its clock:
// the statements it runs are what the store traced into got, which the
// batches and the followers are read back from.
func Drive(t *testing.T, ctx context.Context, tg Target, clk *Clock, got *Statements) {
	t.Helper()
	st := tg.Store
	rt, err := plane.Open(ctx, plane.Options{
		Config: core.Source{YAML: demo.YAML, Name: demo.Name},
		Store:  st,
		Core:   core.Options{Programs: demo.Programs(clk.Now), Now: clk.Now},
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
	other, err := tg.Other(ctx)
	must("open the other store", err)
	oc, err := core.New(ctx, core.Source{YAML: demo.YAML, Name: demo.Name}, &core.Options{Store: other, Programs: demo.Programs(clk.Now), Now: clk.Now})
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
	_, err = st.Stale(ctx, clk.Now(), 100) // the gate's takeover (core.Recover)
	must("stale", err)
	// a store other instances write to: the chain heads the runtime
	// follows their commits by
	if shared, ok := st.(interface {
		Heads(ctx context.Context, sessions []string) (map[string]int64, error)
	}); ok {
		_, err = shared.Heads(ctx, []string{s.ID, once.ID})
		must("heads", err)
	}

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
	driveFollowers(t, ctx, rt, got)
}

// driveFollowers runs the loops with which a runtime over a store other
// instances write to (PostgreSQL) follows their commits: the inbox
// streams' look for notifications stored since (Bus.Follow, while ann's
// inbox is followed) and the workflow streams' read of the last events of
// the workflows waited on (Engine.Watch, while a Wait is on one), each
// until it ran its statement.
func driveFollowers(t *testing.T, ctx context.Context, rt *plane.Runtime, got *Statements) {
	t.Helper()
	ws, err := rt.Workflows.List(ctx, "ann", 1)
	if err != nil || len(ws) == 0 {
		t.Fatalf("a workflow to wait on: %v %v", ws, err)
	}
	sub := rt.Hub.Subscribe(notify.UserTopic("ann"), 0)
	defer sub.Close()
	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() { rt.Workflows.Wait(fctx, ws[0].ID, "ann", ws[0].Seq) }) // ended: nothing comes
	wg.Go(func() { rt.Bus.Follow(fctx, time.Millisecond) })
	wg.Go(func() { rt.Workflows.Watch(fctx, time.Millisecond) })
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for _, f := range []string{followInbox, followWorkflows} {
		select {
		case <-got.Seen(f):
		case <-timeout.C:
			t.Fatalf("the followers ran no statement with %q in 30 s", f)
		}
	}
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
	// approveAll approves each layer of workflow id until it waits for
	// nothing more, and returns it as it ended
	approveAll := func(id string) *workflow.Workflow {
		t.Helper()
		w := wait(id, 0)
		for ; w.Status == workflow.StatusAwaitingApproval; w = wait(id, w.Seq) {
			if _, err := e.Command(ctx, id, "ann", workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: &yes}); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
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
	// a command queued for the instance holding the workflow, which it
	// rejects: an approval of another checkpoint
	if _, err := e.Command(ctx, queued.ID, "ann", workflow.Command{Type: "approval_response", CheckpointID: "wf_other-a1", Approved: &yes}); agentplane.ErrorCode(err) != agentplane.CodeInvalidState {
		t.Fatalf("an approval of another checkpoint, queued for the other instance: %v", err)
	}
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
	if f = approveAll(f.ID); f.Status != workflow.StatusFailed {
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
	if c = approveAll(c.ID); c.Status != workflow.StatusCompleted {
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
func driveNotifications(t *testing.T, ctx context.Context, rt *plane.Runtime, s *agentplane.Session, clk *Clock, got *Statements) {
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
	emitBatch(t, ctx, rt, got)
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
	// emitted, dispatched, locked by its owner, then ended by it
	owned := func(end func(ctx context.Context, id string, lease int64) (notify.Notification, error), what string) {
		e, err := l.Emit(ctx, agent, 0)
		must("emit to the agent", err)
		_, err = l.Dispatch(ctx, e.ID)
		must("dispatch", err)
		n, err := l.Claim(ctx, e.ID, 0, time.Minute)
		must("claim", err)
		_, err = end(ctx, e.ID, n.OwnerLease)
		must(what, err)
	}
	owned(l.Escalate, "escalate")
	owned(l.Fail, "fail")

	dog := &notify.Watchdog{Bus: rt.Bus, RetryAfter: time.Minute, MaxShows: 2}
	for range 4 {
		clk.advance(2 * time.Minute)
		_, err := dog.Sweep(ctx)
		must("sweep", err)
	}
	_, err = l.Due(ctx, clk.Now(), time.Minute, 500)
	must("due", err)
	dead, err := l.Dead(ctx, 50)
	must("dead", err)
	if len(dead) < 2 {
		t.Fatalf("dead letters: %d, want the failed one and the escalated one", len(dead))
	}
}

// ackBatch acknowledges many notifications at once, so that acks are
// delivered in batches as under load: SQLite planned the batched ack
// over the state index from 16 acks a batch. On PostgreSQL the hold locks
// the notifications, which the batches in flight wait for.
func ackBatch(t *testing.T, ctx context.Context, rt *plane.Runtime, got *Statements) {
	t.Helper()
	largest := func() int {
		most := 0
		for _, q := range got.Order() {
			if strings.Contains(q, "notifications SET state = ") {
				most = max(most, strings.Count(q, "(id = "))
			}
		}
		return most
	}
	together(t, ctx, rt, "acks", func() bool { return largest() >= 16 }, func(n int) (hold string, args []any, do func(i int) error) {
		ids := make([]string, n)
		for i := range ids {
			e, err := rt.Ledger.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: fmt.Sprint("acker-", i%4), Target: notify.TargetUser,
				Handler: notify.HandlerSystem, Title: "ack me"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = e.ID
		}
		return `SELECT 1 FROM notifications WHERE id = ANY (?) FOR UPDATE`, []any{ids}, func(i int) error {
			_, err := rt.Ledger.Ack(ctx, ids[i], fmt.Sprint("acker-", i%4))
			return err
		}
	})
}

// emitBatch emits to many users at once, so that emits are stored in
// batches as under load (on PostgreSQL one INSERT of unnest's rows). On
// PostgreSQL the hold inserts the users' sequence numbers, which the
// batches in flight wait for, and takes them back.
func emitBatch(t *testing.T, ctx context.Context, rt *plane.Runtime, got *Statements) {
	t.Helper()
	batched := func() bool {
		return slices.ContainsFunc(got.Order(), func(q string) bool {
			return strings.Contains(q, "INSERT INTO notifications") && strings.Contains(q, "FROM v JOIN s") || // PostgreSQL
				strings.Contains(q, "INSERT OR FAIL INTO notifications") && strings.Count(q, "), (") >= 15 // SQLite
		})
	}
	round := 0
	together(t, ctx, rt, "emits", batched, func(n int) (hold string, args []any, do func(i int) error) {
		round++
		users := make([]string, n)
		keys := make([]string, n)
		for i := range users {
			users[i] = fmt.Sprintf("emitter-%d-%d", round, i)
			keys[i] = "USER:" + users[i]
		}
		return `INSERT INTO notification_seqs (address_key, seq) SELECT unnest(?::text[]), 0`, []any{keys}, func(i int) error {
			_, err := rt.Ledger.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: users[i], Target: notify.TargetUser,
				Handler: notify.HandlerSystem, Title: "batched"}, 0)
			return err
		}
	})
}

// errHeld ends a hold's transaction: what it locked or wrote is taken
// back.
var errHeld = errors.New("plantest: the hold is over")

// together runs n calls of do at once, while a commit holds the store: on
// SQLite its leader, on PostgreSQL the rows its transaction writes or
// locks with hold (of the workload's own, Mark: no audited statement),
// then rolls back. Meanwhile the calls wait in line, and the commit after
// the hold takes them as one batch. Rounds, each prepared anew (the hold
// statement with its arguments, and do), are tried until done (a
// goroutine may not reach the line before the hold is let go).
func together(t *testing.T, ctx context.Context, rt *plane.Runtime, what string, done func() bool, prepare func(n int) (hold string, args []any, do func(i int) error)) {
	t.Helper()
	const n = 32
	for round := 0; !done(); round++ {
		if round == 10 {
			t.Fatalf("no batch of %s large enough in 10 rounds of %d", what, n)
		}
		hold, args, do := prepare(n)
		entered, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			held <- rt.Store.Commit(ctx, &store.Commit{Ops: []store.Op{store.OpFunc(func(ctx context.Context, tx store.Tx) error {
				if tx.Dialect() != store.Postgres {
					close(entered)
					<-release
					return nil
				}
				_, err := tx.Exec(ctx, Mark+hold, args...)
				close(entered)
				if err != nil {
					return err
				}
				<-release
				return errHeld
			})}})
		}()
		<-entered
		var started atomic.Int32
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				started.Add(1)
				errs[i] = do(i)
			})
		}
		for started.Load() < n {
			runtime.Gosched()
		}
		close(release)
		wg.Wait()
		if err := <-held; err != nil && !errors.Is(err, errHeld) {
			t.Fatal(err)
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s %d: %v", what, i, err)
			}
		}
	}
}
