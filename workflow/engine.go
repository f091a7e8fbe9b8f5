package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/tool"
)

// Options configure an Engine. nil means defaults.
type Options struct {
	// Owner names this engine in the leases it holds; "" means a random
	// name. Two engines must not share one.
	Owner string
	// Lease is how long a claim on a workflow holds without renewal (it is
	// renewed every third of it); another engine takes a workflow over
	// when it runs out. 0 means 10s.
	Lease time.Duration
	// Poll is how often Run looks for workflows to take over, and a paused
	// workflow's runner for commands queued through another instance.
	// 0 means half the lease, at most 1s.
	Poll time.Duration
	// Concurrency is how many tasks of a layer run at once; 0 means 8.
	Concurrency int
	// Backoff is the wait before a task's second attempt, doubled for each
	// further one, at most 5s; 0 means 100ms.
	Backoff time.Duration
	// Suggester answers replan_dag; nil means the deterministic one: the
	// requirement matched against the active tools' usage texts, weighed
	// by PageRank over the co-usage graph of past workflows.
	Suggester Suggester
	Logger    *slog.Logger // nil discards
	// Tracer, when set, traces each layer a workflow runs and each command
	// it processes (package telemetry), with its tasks' executions as
	// children; nil: no tracing.
	Tracer trace.Tracer
	// NewID makes the ids of workflows and of their pauses (decision_id),
	// and the engine's owner name; nil means agentplane.RandomID, and
	// workflow ids "wf_" and agentplane.OrderedID. It is called from
	// several goroutines at once.
	NewID func() string
	// Memory keeps workflows in memory when the store has no tables
	// (memstore): for tests and embedding, where nothing need survive the
	// process. Without it, such a store is refused.
	Memory bool
}

// Engine runs workflows: it creates them, claims the ones nobody holds,
// runs each it holds layer by layer through the gate, and processes their
// command queues. Several engines (processes) may share one database:
// exactly one holds a workflow at a time, and every write it makes checks
// its lease.
type Engine struct {
	core        Sessions
	st          store.Store // the requests of tasks a dead engine left running
	j           journal
	owner       string
	lease       time.Duration
	poll        time.Duration
	concurrency int
	backoff     time.Duration
	suggest     Suggester
	log         *slog.Logger
	tracer      trace.Tracer
	newID       func() string
	workflowID  func() string // a new workflow's id

	ctx  context.Context // cancelled by Kill: tasks stop where they are
	kill context.CancelFunc
	stop chan struct{} // closed by Close: runners stop at the next layer boundary

	mu      sync.Mutex
	runners map[string]*runner
	changed map[string]*signal // a workflow's waiters here: closed when it writes something
	swept   time.Time          // when changed was last swept of the channels Changes gave out
	closed  bool
	wg      sync.WaitGroup
	workers *workers // the goroutines tasks and runners run on

	// written, set by tests, sees every write that succeeded.
	written func(ctx context.Context, w *Workflow, cp *Checkpoint, events []Event)
	// looping, set by tests, runs as a runner's loop begins.
	looping func()
}

// Sessions is what the engine uses of the core (a *core.Core): the
// sessions workflows run in, the gate's executions of their tasks, the
// tools' specs (never the tools: a task runs through Execute) and the
// clock. The methods are safe for concurrent use.
type Sessions interface {
	// Owned returns a session when it is the principal's; not_found
	// otherwise.
	Owned(ctx context.Context, id, principal string) (*agentplane.Session, error)
	Session(ctx context.Context, id string) (*agentplane.Session, error)
	// Execute runs a task's call through the gate.
	Execute(ctx context.Context, inv gate.Invocation) (agentplane.ExecutionResult, error)
	// ActiveTools are the tools active for a session's mode and roles.
	ActiveTools(mode string, roles []string) []core.ToolInfo
	// View is the configuration in force: the tools' specs.
	View() core.View
	Now() time.Time
}

// New returns an engine over the sessions (a *core.Core) and st, the store
// the core keeps them in, which stays the caller's to close: a SQL store
// (SQLite or PostgreSQL) opened with Extension keeps the workflows with
// the sessions; with an in-memory store they are kept in memory too, and
// live as long as the engine.
func New(c Sessions, st store.Store, opts *Options) (*Engine, error) {
	if opts == nil {
		opts = &Options{}
	}
	if st == nil {
		return nil, errors.New("workflow: missing store (pass the store the core was given: plane.Runtime.Store)")
	}
	var j journal
	switch q, ok := st.(store.Querier); {
	case ok:
		j = newSQLJournal(st, q)
	case opts.Memory:
		j = newMemJournal()
	default:
		return nil, errors.New("workflow: the store keeps no tables (an in-memory store): open SQLite or PostgreSQL with workflow.Extension, or set Options.Memory for workflows that need not survive the process")
	}
	e := &Engine{core: c, st: st, j: j, owner: opts.Owner, lease: opts.Lease, poll: opts.Poll,
		concurrency: opts.Concurrency, backoff: opts.Backoff, suggest: opts.Suggester, log: opts.Logger, tracer: opts.Tracer, newID: opts.NewID,
		stop: make(chan struct{}), runners: map[string]*runner{}, changed: map[string]*signal{}}
	e.workflowID = func() string { return "wf_" + e.newID() }
	if e.newID == nil {
		e.newID = agentplane.RandomID
		e.workflowID = func() string { return "wf_" + agentplane.OrderedID(time.Now()) } // time-ordered: see agentplane.OrderedID
	}
	if e.owner == "" {
		e.owner = "engine-" + e.newID()
	}
	if e.lease <= 0 {
		e.lease = 10 * time.Second
	}
	if e.poll <= 0 {
		e.poll = min(time.Second, e.lease/2)
	}
	if e.concurrency <= 0 {
		e.concurrency = 8
	}
	if e.backoff <= 0 {
		e.backoff = 100 * time.Millisecond
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.suggest == nil {
		e.suggest = &rankSuggester{core: c, j: e.j}
	}
	e.ctx, e.kill = context.WithCancel(context.Background())
	e.workers = &workers{jobs: make(chan func()), wg: &e.wg, stop: e.stop, idle: 10 * e.poll}
	return e, nil
}

// Start is a workflow to begin: its definition, and the session and
// principal its tasks run as.
type Start struct {
	SessionID  string
	Principal  string
	Roles      []string
	Definition *Definition
	// ResumePolicy: ResumeManual ("" too) or ResumeAutomatic.
	ResumePolicy string
	// MaxAttempts is how often a task is tried; 0 means 3, at most 10.
	MaxAttempts int
	// RequestID, when set, is the start's idempotency key: a start retried
	// with it returns the workflow the first one started (the same key for
	// another start is a request_conflict).
	RequestID string
}

// Limits of a start.
const (
	DefaultAttempts = 3
	MaxAttempts     = 10
)

// Start checks the definition against the tools, creates the workflow
// (its first event and checkpoint with it) and runs it to its first pause
// in the background; Wait waits for that.
func (e *Engine) Start(ctx context.Context, s Start) (*Workflow, error) {
	if s.Definition == nil {
		return nil, agentplane.Errorf(agentplane.CodeInvalidInput, "a workflow needs a definition")
	}
	if err := Check(s.Definition, "workflow", e.known); err != nil {
		return nil, agentplane.Errorf(agentplane.CodeInvalidInput, "%v", err)
	}
	switch s.ResumePolicy {
	case "":
		s.ResumePolicy = ResumeManual
	case ResumeManual, ResumeAutomatic:
	default:
		return nil, agentplane.Errorf(agentplane.CodeInvalidInput, "resume_policy %q: want manual or automatic", s.ResumePolicy)
	}
	switch {
	case s.MaxAttempts == 0:
		s.MaxAttempts = DefaultAttempts
	case s.MaxAttempts < 0 || s.MaxAttempts > MaxAttempts:
		return nil, agentplane.Errorf(agentplane.CodeInvalidInput, "max_attempts %d: want 1 to %d", s.MaxAttempts, MaxAttempts)
	}
	if _, err := e.core.Owned(ctx, s.SessionID, s.Principal); err != nil {
		return nil, err
	}
	now := e.core.Now().UTC()
	id, digest := e.workflowID(), ""
	if s.RequestID != "" {
		id, digest = startKey(s)
		if w, done, err := e.started(ctx, id, s.Principal, digest); done || err != nil {
			return w, err
		}
	}
	w := &Workflow{ID: id, RequestDigest: digest, Name: s.Definition.Name, SessionID: s.SessionID, Principal: s.Principal, Roles: slices.Clone(s.Roles),
		Status: StatusRunning, PerLayerValidation: s.Definition.PerLayerValidation, ResumePolicy: s.ResumePolicy, MaxAttempts: s.MaxAttempts,
		Created: now, Updated: now}
	for _, t := range s.Definition.Tasks {
		w.Tasks = append(w.Tasks, TaskRun{Task: t, Status: TaskPending, Key: w.ID + "-" + t.ID})
	}
	r := e.newRunner(w, 1, false)
	cp := r.checkpoint(w)
	evs := []Event{r.event(w, EventStarted), r.event(w, EventCheckpointSaved)}
	evs[1].CheckpointID, evs[1].Layer = cp.ID, 0
	cp.w = w.copy() // what the checkpoint keeps: the workflow before its first layer
	more, layer := r.next(w)
	evs, r.started = append(evs, more...), layer
	reserved, ok := e.reserve(r)
	if !ok {
		return nil, errors.New("workflow: the engine is closed")
	}
	// the lease runs from the write, not from the start's checks
	r.stamped = e.core.Now()
	if err := r.write(ctx, &saved{events: evs, cp: cp, insert: true, owner: e.owner, until: r.stamped.Add(e.lease).UnixNano()}); err != nil {
		if reserved {
			e.unreserve(r)
		}
		if s.RequestID != "" { // a retry that raced the first
			if w, done, lerr := e.started(ctx, id, s.Principal, digest); done || lerr != nil {
				return w, lerr
			}
		}
		return nil, fmt.Errorf("workflow: create: %w", err)
	}
	started := w.copy() // before its runner changes it
	if !e.adopt(r) {
		e.unreserve(r)
		return nil, errors.New("workflow: the engine is closed")
	}
	return started, nil
}

// reserve puts a new workflow's runner among the engine's before its
// first write, so that ClaimDue never takes over a workflow this engine
// is starting (on a loaded machine the write may land after the lease it
// stamps ran out). reserved false: a start with the same key holds the
// place (its write or this one fails); ok false: the engine is closed.
func (e *Engine) reserve(r *runner) (reserved, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false, false
	}
	if _, taken := e.runners[r.id]; taken {
		return false, true
	}
	e.runners[r.id] = r
	return true, true
}

// unreserve removes a runner whose loop never started; a command handed
// to it meanwhile goes to the queue.
func (e *Engine) unreserve(r *runner) {
	e.mu.Lock()
	if e.runners[r.id] == r {
		delete(e.runners, r.id)
	}
	e.mu.Unlock()
	close(r.done)
}

// startKey derives a keyed start's workflow id from the principal and the
// key, and the digest of what it asks for.
func startKey(s Start) (id, digest string) {
	h := sha256.Sum256([]byte("workflow\x00" + s.Principal + "\x00" + s.RequestID))
	asked, _ := json.Marshal(struct {
		Session      string      `json:"session"`
		Definition   *Definition `json:"definition"`
		ResumePolicy string      `json:"resume_policy"`
		MaxAttempts  int         `json:"max_attempts"`
	}{s.SessionID, s.Definition, s.ResumePolicy, s.MaxAttempts})
	d := sha256.Sum256(asked)
	return "wf_" + hex.EncodeToString(h[:8]), hex.EncodeToString(d[:])
}

// started returns the workflow a keyed start made already (done), or
// refuses the key when it started something else.
func (e *Engine) started(ctx context.Context, id, principal, digest string) (*Workflow, bool, error) {
	row, err := e.j.load(ctx, id)
	switch {
	case agentplane.ErrorCode(err) == agentplane.CodeNotFound:
		return nil, false, nil
	case err != nil:
		return nil, true, err
	case row.w.Principal != principal || row.w.RequestDigest != digest:
		return nil, true, agentplane.Errorf(agentplane.CodeRequestConflict, "this idempotency key started another workflow; use a new key")
	}
	return row.w, true, nil
}

// known reports whether a tool is registered.
func (e *Engine) known(name string) bool {
	_, ok := e.core.View().Tool(name)
	return ok
}

// adopt starts the runner of a workflow this engine now holds.
func (e *Engine) adopt(r *runner) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.runners[r.id] = r
	e.workers.run(r.loop)
	return true
}

// Run takes over, every Poll, the workflows nobody holds: those whose
// lease ran out (their engine died: a workflow that was running is
// interrupted) or was released. It returns when ctx is done or the engine
// is closed.
func (e *Engine) Run(ctx context.Context) error {
	t := time.NewTicker(e.poll)
	defer t.Stop()
	for {
		if err := e.ClaimDue(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("workflow: claim", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.stop:
			return nil
		case <-t.C:
		}
	}
}

// ClaimDue takes over the workflows nobody holds now (what Run does every
// Poll).
func (e *Engine) ClaimDue(ctx context.Context) error {
	now := e.core.Now()
	rows, err := e.j.claimable(ctx, now, 100)
	if err != nil {
		return err
	}
	for _, row := range rows {
		e.mu.Lock()
		_, held := e.runners[row.w.ID]
		e.mu.Unlock()
		if held {
			continue
		}
		ok, err := e.j.claim(ctx, row.w.ID, e.owner, row.lease, now.Add(e.lease))
		if err != nil {
			return err
		}
		if !ok {
			continue // another engine was first
		}
		r := e.newRunner(row.w, row.lease+1, !row.inline)
		if row.leaseUntil != 0 && row.w.Status == StatusRunning {
			// its engine died while it ran
			if err := r.interrupted(ctx); err != nil {
				e.log.Warn("workflow: interrupt", "workflow", row.w.ID, "err", err)
				continue
			}
		}
		e.log.Info("workflow: took over", "workflow", row.w.ID, "status", r.w.Status, "lease", r.lease)
		e.fire(row.w.ID)
		if !e.adopt(r) {
			return nil
		}
	}
	return nil
}

// Close stops the engine: runners finish the layer they run, release
// their workflows (another engine may take them at once) and stop; after
// timeout, tasks still running are cancelled and their workflows are left
// to be taken over as interrupted.
func (e *Engine) Close(timeout time.Duration) {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.stop)
	}
	e.mu.Unlock()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		e.kill()
		<-done
	}
	e.kill()
}

// Command queues a command for a workflow of the principal's and waits
// until it is processed: applied, or rejected with the reason (an error
// with code invalid_state, nothing changed). A malformed command, or one
// for a workflow that does not exist or is finished, is refused at once.
//
// The command answers the pause its DecisionID names or, without one, the
// pause pending now, as it is received: a pause answered already by
// another command refuses it (already_answered, naming the pause). Under
// a RequestID it is applied once: sent again, it gets the first one's
// answer.
func (e *Engine) Command(ctx context.Context, id, principal string, cmd Command) (seq int64, err error) {
	seq, _, err = e.command(ctx, id, principal, cmd)
	return seq, err
}

// CommandResult is Command, and the workflow as the command left it: as
// this engine's runner committed it with the command when the runner
// carried it out at once, otherwise as Get reads it once the command
// was processed. What it refers to may be shared with the engine, as
// Get's.
func (e *Engine) CommandResult(ctx context.Context, id, principal string, cmd Command) (int64, *Workflow, error) {
	seq, w, err := e.command(ctx, id, principal, cmd)
	if err != nil {
		return seq, nil, err
	}
	if w != nil {
		return seq, w.copy(), nil
	}
	w, err = e.Get(ctx, id, principal)
	return seq, w, err
}

// command is Command, with the workflow as the runner committed it when
// it carried the command out at once (nil otherwise).
func (e *Engine) command(ctx context.Context, id, principal string, cmd Command) (seq int64, w *Workflow, err error) {
	if err := cmd.Check(); err != nil {
		return 0, nil, err
	}
	var digest string
	if cmd.RequestID != "" {
		digest = cmd.digest()
		if seq, ok, err := e.repeated(ctx, id, principal, cmd.RequestID, digest); ok || err != nil {
			return seq, nil, err
		}
	}
	e.mu.Lock()
	r := e.runners[id]
	e.mu.Unlock()
	if r != nil { // the runner answers it, or says the pause it waits at
		a, ok, err := r.ask(ctx, principal, cmd, digest)
		switch {
		case err != nil:
			return 0, nil, err
		case ok && a.handled:
			if a.err != nil && cmd.RequestID != "" { // the same key at once: the first one's answer
				if seq, ok, rerr := e.repeated(ctx, id, principal, cmd.RequestID, digest); ok {
					return seq, nil, rerr
				}
			}
			if a.err != nil {
				return a.seq, nil, a.err
			}
			return a.seq, a.w, a.o.err()
		case ok:
			if cmd.DecisionID == "" {
				cmd.DecisionID = a.pause
			}
		default:
			r = nil // it stopped: as if it had never been
		}
	}
	if r == nil && cmd.DecisionID == "" { // the pause it answers is the one pending now
		h, err := e.j.status(ctx, id)
		if err != nil {
			return 0, nil, err
		}
		if h.principal != principal {
			return 0, nil, agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
		}
		cmd.DecisionID = h.pause
	}
	seq, err = e.j.enqueue(ctx, id, principal, cmd, digest, e.core.Now())
	if err != nil {
		if cmd.RequestID != "" {
			if seq, ok, rerr := e.repeated(ctx, id, principal, cmd.RequestID, digest); ok {
				return seq, nil, rerr
			}
		}
		return 0, nil, err
	}
	if r != nil {
		r.poke()
	}
	return seq, nil, e.settled(ctx, id, seq)
}

// repeated answers a command sent again under its idempotency key with
// the first one's answer, once it is processed (ok); another command
// under the key is a request_conflict. ok false: the key is new.
func (e *Engine) repeated(ctx context.Context, id, principal, key, digest string) (int64, bool, error) {
	seq, first, found, err := e.j.byRequest(ctx, id, principal, key)
	switch {
	case err != nil:
		return 0, true, err
	case !found:
		return 0, false, nil
	case first != digest:
		return seq, true, agentplane.Errorf(agentplane.CodeRequestConflict,
			"idempotency key %q was used for another command of workflow %s (command %d); use a new key", key, id, seq)
	}
	return seq, true, e.settled(ctx, id, seq)
}

// settled waits until a queued command is processed: nil when it was
// applied, its refusal when it was rejected.
func (e *Engine) settled(ctx context.Context, id string, seq int64) error {
	wt := e.waitOn(id)
	defer wt.stop()
	for {
		ch := wt.changed()
		o, err := e.j.outcome(ctx, id, seq)
		switch {
		case err != nil:
			return err
		case o.Status != CommandQueued:
			return o.err()
		}
		if err := e.await(ctx, ch); err != nil {
			return err
		}
	}
}

// digest identifies what a command asks, for its idempotency key: the
// command as sent (its pause as named, not as found).
func (c Command) digest() string {
	b, _ := json.Marshal(c)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// await waits for a change signal, or Poll (another instance's write),
// or ctx.
func (e *Engine) await(ctx context.Context, ch <-chan struct{}) error {
	t := time.NewTimer(e.poll)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Get returns a workflow of the principal's: while this engine's runner
// holds it, as the runner last committed it (what the database holds,
// not read back), otherwise as stored. What the workflow refers to (its
// tasks' arguments, its approval) may be shared with the engine, as
// Wait's is: read it, or change a copy.
func (e *Engine) Get(ctx context.Context, id, principal string) (*Workflow, error) {
	w := e.held(id)
	if w == nil {
		row, err := e.j.load(ctx, id)
		if err != nil {
			return nil, err
		}
		w = row.w
	}
	if w.Principal != principal {
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
	}
	return w, nil
}

// held returns a copy of the workflow as this engine's runner last
// committed it, while the runner holds it, has written it and is not
// writing it now; nil otherwise (read the database). A caller that saw
// a write in the database (its events) before it asked gets that write
// or a later one: the runner takes a write as its last before it stops
// writing.
func (e *Engine) held(id string) *Workflow {
	e.mu.Lock()
	r := e.runners[id]
	e.mu.Unlock()
	if r == nil || r.lost.Load() || r.writing.Load() > 0 {
		return nil
	}
	if last := r.last.Load(); last != nil {
		return last.copy()
	}
	return nil
}

// List returns the principal's workflows, newest first, at most limit
// (0 means 50, at most 500).
func (e *Engine) List(ctx context.Context, principal string, limit int) ([]*Workflow, error) {
	if limit <= 0 {
		limit = 50
	}
	return e.j.list(ctx, principal, min(limit, 500))
}

// Checkpoints returns a workflow's kept checkpoints, oldest first.
func (e *Engine) Checkpoints(ctx context.Context, id string) ([]Checkpoint, error) {
	return e.j.checkpoints(ctx, id)
}

// Wait waits until the workflow of the principal's is paused or finished
// and has an event after after, and returns it.
//
// While this engine's runner holds the workflow (or left it finished),
// the waiter takes the workflow as the runner committed it, without
// reading it back; otherwise it reads the database.
func (e *Engine) Wait(ctx context.Context, id, principal string, after int64) (*Workflow, error) {
	wt := e.waitOn(id)
	defer wt.stop()
	for {
		ch := wt.changed()
		if w := wt.committed(); w != nil {
			switch {
			case w.Principal != principal:
				return nil, agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
			case (Paused(w.Status) || Terminal(w.Status)) && w.Seq > after:
				return w.copy(), nil
			}
			if err := e.await(ctx, ch); err != nil {
				return nil, err
			}
			continue
		}
		h, err := e.j.status(ctx, id)
		switch {
		case err != nil:
			return nil, err
		case h.principal != principal:
			return nil, agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", id)
		case (Paused(h.status) || Terminal(h.status)) && h.seq > after:
			return e.Get(ctx, id, principal)
		}
		if err := e.await(ctx, ch); err != nil {
			return nil, err
		}
	}
}

// Events returns a workflow's stored events after a sequence number, at
// most limit, as stored (JSON), with their sequence numbers.
func (e *Engine) Events(ctx context.Context, id string, after int64, limit int) ([]json.RawMessage, []int64, error) {
	return e.j.events(ctx, id, after, limit)
}

// Watch learns, every interval until ctx ends, of the events other
// instances wrote for the workflows someone here is waiting on (Changes):
// one read of their last events' sequence numbers, and a wake-up of those
// that moved (and of those seen for the first time: an event may have
// come between a waiter's read and its wait).
func (e *Engine) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	type head struct {
		seq  int64
		tick int // when it was last asked for
	}
	seen := map[string]head{} // kept a while after a waiter leaves: it comes back to wait again
	for tick := 0; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.mu.Lock()
		ids := make([]string, 0, len(e.changed))
		for id := range e.changed {
			ids = append(ids, id)
		}
		e.mu.Unlock()
		for id, h := range seen {
			if tick-h.tick > 200 {
				delete(seen, id)
			}
		}
		if len(ids) == 0 {
			continue
		}
		heads, err := e.j.heads(ctx, ids)
		if err != nil {
			e.log.Warn("workflow streams: poll the workflows' heads", "err", err)
			continue
		}
		for id, seq := range heads {
			if last, ok := seen[id]; !ok || seq > last.seq {
				e.fire(id)
			}
			seen[id] = head{seq, tick}
		}
	}
}

// pauseID issues the id of a pause (decision_id).
func (e *Engine) pauseID() string { return "d_" + e.newID() }

// Holding returns the ids of the workflows this engine runs now.
func (e *Engine) Holding() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.runners))
	for id := range e.runners {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Poll returns how often waiters look at the database for other
// instances' writes.
func (e *Engine) Poll() time.Duration { return e.poll }

// event appends an event to the workflow (numbered; the status is set
// when it is saved).
func (r *runner) event(w *Workflow, typ string) Event {
	w.Seq++
	return Event{Seq: w.Seq, Type: typ, WorkflowID: w.ID, Time: r.e.core.Now().UTC()}
}

// checkpoint issues the checkpoint of the workflow as it is.
func (r *runner) checkpoint(w *Workflow) *Checkpoint {
	id := w.nextID("c")
	return &Checkpoint{ID: id, Layer: w.Layer, Created: r.e.core.Now().UTC(), n: w.Counter}
}

// save writes the workflow with events (and a checkpoint, and a
// command's outcome), then wakes whoever waits on it.
func (r *runner) save(ctx context.Context, evs []Event, cp *Checkpoint, cmd *outcome) error {
	return r.write(ctx, &saved{events: evs, cp: cp, cmd: cmd})
}

func (r *runner) write(ctx context.Context, s *saved) error {
	r.writing.Add(1)
	defer r.writing.Add(-1)
	r.prepare(r.w, s)
	if err := r.e.j.save(ctx, s); err != nil {
		return err
	}
	r.wrote(ctx, s)
	return nil
}

// prepare makes s the write of w (the runner's workflow, or the copy
// that becomes it once written): what changed since the last write.
func (r *runner) prepare(w *Workflow, s *saved) {
	w.Updated = r.e.core.Now().UTC()
	for i := range s.events {
		s.events[i].Status = w.Status
	}
	s.w, s.lease = w, r.lease
	s.sameStatus = !s.insert && r.status != "" && r.status == w.Status
	if s.cp == nil {
		s.tasks = diffTasks(w.Tasks, r.stored)
		return
	}
	if s.cp.w == nil {
		s.cp.w = w
	}
	s.cpTasks = diffTasks(s.cp.w.Tasks, r.stored)
	s.tasks = diffTasks(w.Tasks, &taskStates{tasks: s.cp.w.Tasks})
	s.prune = r.checkpoints < 0 || r.checkpoints >= KeepCheckpoints
}

// wrote takes s as written: its workflow is the runner's, as stored; then
// whoever waits on it is woken.
func (r *runner) wrote(ctx context.Context, s *saved) {
	r.w, r.status = s.w, s.w.Status
	if s.cp != nil {
		r.stored = s.cpTasks.apply(r.stored, s.cp.w.Tasks)
		if r.checkpoints >= 0 {
			r.checkpoints = min(r.checkpoints+1, KeepCheckpoints)
		}
	}
	r.stored = s.tasks.apply(r.stored, s.w.Tasks)
	if r.e.written != nil {
		r.e.written(ctx, s.w, s.cp, s.events)
	}
	last := s.w.copy()
	r.last.Store(last)
	r.e.fireWith(s.w.ID, last)
}

// interrupted handles a workflow taken over from an engine that died
// while it ran: with the automatic policy it resumes at once; otherwise
// it waits for checkpoint_response.
func (r *runner) interrupted(ctx context.Context) error {
	w := r.w
	cps, err := r.e.j.checkpoints(ctx, w.ID)
	if err != nil {
		return err
	}
	var inFlight []string
	for _, t := range w.running() {
		inFlight = append(inFlight, t.ID)
	}
	ev := r.event(w, EventInterrupted)
	if len(cps) > 0 {
		ev.CheckpointID = cps[len(cps)-1].ID
	}
	evs := []Event{ev}
	if w.ResumePolicy == ResumeAutomatic {
		rec, err := r.recover(ctx)
		if err != nil {
			return err
		}
		evs = append(evs, rec...)
		res := r.event(w, EventResumed)
		res.CheckpointID, res.Reason = ev.CheckpointID, "resume policy automatic"
		evs = append(evs, res)
	} else {
		ids := make([]string, len(cps))
		for i, c := range cps {
			ids[i] = c.ID
		}
		w.Status = StatusInterrupted
		w.Interruption = &Interruption{ID: r.e.pauseID(), CheckpointID: ev.CheckpointID, Checkpoints: ids, InFlight: inFlight}
		ev.DecisionID = w.Interruption.ID
		evs[0] = ev
	}
	return r.save(ctx, evs, nil, nil)
}

// recover settles the tasks that were in flight when the workflow's last
// engine died. One whose request finished in the gate takes that result
// (it is not run again); one that never reached the gate runs again; one
// that may have been running runs again only when its tool is read-only,
// internal or idempotent by key (an HTTP tool: the same Idempotency-Key),
// and fails otherwise.
func (r *runner) recover(ctx context.Context) ([]Event, error) {
	w := r.w
	var evs []Event
	for _, t := range w.running() {
		req, ok, err := r.e.st.Request(ctx, store.RequestKey{SessionID: w.SessionID, Principal: w.Principal, RequestID: t.RequestID})
		if err != nil {
			return nil, err
		}
		switch {
		case ok && req.State == store.RequestDone && req.Result != nil:
			if r.retries(w, t, *req.Result) {
				t.Status = TaskPending // the recorded attempt failed as runTask would have retried
				continue
			}
			evs = append(evs, r.finish(w, t, *req.Result))
		case !ok || r.e.rerunnable(t.Tool):
			t.Status = TaskPending
		default:
			t.Status = TaskFailed
			t.Error = &agentplane.ResultError{Code: agentplane.CodeInterrupted, Detail: fmt.Sprintf("%s was in flight when its engine died and may have run; %s is neither read-only nor idempotent by key, so it is not run again", t.ID, t.Tool)}
			ev := r.event(w, EventTaskFailed)
			ev.Task, ev.Tool, ev.Error, ev.Attempts = t.ID, t.Tool, t.Error, t.Attempts
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// spec returns a tool's spec and whether it is idempotent by key
// (tool.ByKey); ok false when it is not registered now.
func (e *Engine) spec(name string) (s tool.Spec, byKey, ok bool) {
	t, ok := e.core.View().Tool(name)
	return t.Spec, t.ByKey, ok
}

// safeToFail reports whether a tool's failure leaves the world as it was:
// read-only or internal impact. An unknown tool is not.
func (e *Engine) safeToFail(name string) bool {
	s, _, ok := e.spec(name)
	return ok && (s.Impact == tool.ImpactRead || s.Impact == tool.ImpactInternal)
}

// rerunnable reports whether a call that may have run can run again:
// safe to fail, or idempotent by key downstream.
func (e *Engine) rerunnable(name string) bool {
	_, byKey, ok := e.spec(name)
	return ok && (e.safeToFail(name) || byKey)
}

// needsApproval reports whether a task needs the human's approval before
// its layer runs: the gate would ask a workflow to confirm it.
func (e *Engine) needsApproval(name string) bool {
	s, _, ok := e.spec(name)
	return !ok || gate.NeedsConfirmation(nil, &s, gate.OriginWorkflow)
}

// finish records a task's result: completed on success, failed
// otherwise; it returns the event.
func (r *runner) finish(w *Workflow, t *TaskRun, res agentplane.ExecutionResult) Event {
	var ev Event
	if res.Status == agentplane.StatusSuccess {
		t.Status, t.Output, t.Error = TaskCompleted, res.Output, nil
		ev = r.event(w, EventTaskCompleted)
		ev.Output = res.Output
	} else {
		t.Status, t.Error = TaskFailed, res.Error
		if t.Error == nil {
			t.Error = &agentplane.ResultError{Code: string(res.Status), Detail: res.Message}
		}
		ev = r.event(w, EventTaskFailed)
		ev.Error = t.Error
	}
	ev.Task, ev.Tool, ev.Layer, ev.Attempts = t.ID, t.Tool, t.Layer, t.Attempts
	return ev
}

// requestID is the gate's request id of a task's attempt.
func requestID(w *Workflow, t *TaskRun) string {
	return w.ID + "-" + t.ID + "-" + strconv.Itoa(t.Attempts)
}
