package workflow

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/telemetry"
)

// runner runs one workflow the engine holds. Its goroutine (loop) owns
// the workflow: only it reads or changes w and what follows w below.
// Others reach it by messages with a reply: a command through cmds (ask),
// a task's attempt through its layer's channel (runLayer). Whoever makes
// a runner (Start, ClaimDue) owns it until adopt starts its loop.
type runner struct {
	e     *Engine
	id    string // the workflow's id, fixed
	lease int64  // the claim's fencing token, fixed
	cmds  chan *request
	wake  chan struct{} // a command was queued in the journal here (cap 1)
	done  chan struct{} // closed once the loop returned: it takes no more commands
	// gone is closed by renew when another engine took the workflow over;
	// lost is set then too, and by the runner when a write failed: it
	// stops at its next turn
	gone chan struct{}
	lost atomic.Bool
	// queued says a command may wait in the journal's queue: set by poke
	// (one queued here) and while the runner knows of one it has not
	// taken yet; without it the runner looks at the queue only once a Poll
	// after it last did (a command another instance queued)
	queued atomic.Bool
	// writing counts the runner's writes under way: each from before it
	// reaches the database until the runner took it as written (last) or
	// knows it failed — the gate's commit of a layer's end from ending
	// until the task's result is back. While it is not zero the database
	// may hold more than last, and Get reads the database.
	writing atomic.Int32

	// the runner's own, from here on
	w    *Workflow
	held []Event // the layer's last task's events, for endLayer's write
	// started is a layer Start began in the workflow's first write, for
	// the runner to run
	started []string
	// stored is w's tasks as last written; nil: not known (all are
	// written again).
	stored *taskStates
	// gating: a layer's end was handed to the gate's commit (ending) and
	// the task's result is not back yet (writing counts it once)
	gating bool
	// status is w's status as last written ("": not written yet)
	status string
	// checkpoints is how many checkpoints the workflow has stored, as far
	// as the runner knows (-1: not known; a write prunes every time)
	checkpoints int
	// polled is when the runner last looked at its queue
	polled time.Time
	// ended: the runner has looked at its queue once since the workflow
	// finished
	ended bool
	// last is the workflow as the runner last committed it (a copy
	// nobody changes), for waiters here to read instead of the database;
	// nil before its first write
	last atomic.Pointer[Workflow]
	// stamped is when Start's write stamped the lease (the engine's
	// clock), for renew; zero for a workflow taken over
	stamped time.Time
}

// newRunner makes the runner of w; stored says its tasks are as stored
// (a workflow read back in rows), false for a new one.
func (e *Engine) newRunner(w *Workflow, lease int64, stored bool) *runner {
	r := &runner{e: e, id: w.ID, w: w, lease: lease, cmds: make(chan *request), wake: make(chan struct{}, 1),
		done: make(chan struct{}), gone: make(chan struct{})}
	if stored {
		r.status = w.Status
		r.stored = &taskStates{tasks: slices.Clone(w.Tasks)}
		r.checkpoints = -1
		r.queued.Store(true) // taken over: whatever was queued meanwhile is its
	} else {
		r.stored = &taskStates{}
		r.polled = time.Now() // new: nothing was queued before it
	}
	return r
}

// poke tells the runner a command was queued for it in the journal.
func (r *runner) poke() {
	r.queued.Store(true)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// request is a command handed to the runner, with the channel its one
// answer comes back on (buffered: the runner never waits to answer).
type request struct {
	principal string
	cmd       Command
	digest    string // what the command asks, for its idempotency key
	reply     chan answer
}

// answer is the runner's answer to a request: handled (the command was
// applied or rejected — seq, o — or err says why it could not be), or
// not (queue it), with the pause the workflow waited at when the runner
// took the command.
type answer struct {
	handled bool
	seq     int64
	o       outcome
	err     error
	pause   string
	w       *Workflow // applied or rejected: the workflow as the runner then held it (a copy nobody changes)
}

// ask hands a command to the runner and waits for its answer. ok false:
// the runner has stopped (the command goes to the queue, for whoever
// holds the workflow next). The runner answers every command it takes,
// once; ctx ending returns its error (the command may still be carried
// out, as one queued is).
func (r *runner) ask(ctx context.Context, principal string, cmd Command, digest string) (a answer, ok bool, err error) {
	q := &request{principal: principal, cmd: cmd, digest: digest, reply: make(chan answer, 1)}
	select {
	case r.cmds <- q:
	case <-r.done:
		return answer{}, false, nil
	case <-ctx.Done():
		return answer{}, false, ctx.Err()
	}
	select {
	case a := <-q.reply:
		return a, true, nil
	case <-ctx.Done():
		return answer{}, false, ctx.Err()
	}
}

// serve answers a command handed to the runner, exactly once.
func (r *runner) serve(ctx context.Context, q *request) {
	q.reply <- r.direct(ctx, q)
}

// direct answers a command at once when the workflow is paused and
// nothing is queued before it: applied (or rejected) and recorded in the
// queue, with the workflow's change, in one write — what the queue would
// do with it, without its round trip. Otherwise it is left to the queue
// (not handled). Without a DecisionID it answers the pause the workflow
// waits at now.
func (r *runner) direct(ctx context.Context, q *request) answer {
	w := r.w
	at := w.pause()
	no := answer{pause: at}
	if r.lost.Load() || w.Principal != q.principal || !Paused(w.Status) {
		return no
	}
	// a command queued before it goes first; one the runner does not know
	// of (another instance's, queued within the last Poll) the write finds
	// (errQueued)
	if _, _, queued, err := r.nextCommand(ctx); err != nil || queued {
		return answer{handled: err != nil, err: err, pause: at}
	}
	cmd := q.cmd
	if cmd.DecisionID == "" {
		cmd.DecisionID = at
	}
	evs, o := r.answer(ctx, cmd)
	if err := r.write(ctx, &saved{events: evs, add: &cmd, cmd: o, digest: q.digest}); err != nil {
		// nothing was written: the workflow is as stored
		if row, lerr := r.e.j.load(ctx, w.ID); lerr == nil && row.lease == r.lease {
			r.w = row.w
		} else {
			r.lost.Store(true)
		}
		// a command queued before it, or the lease moved on: nothing was
		// written, and the queue takes it for whoever holds the workflow
		if errors.Is(err, errQueued) {
			r.queued.Store(true) // the loop takes it next
		}
		if errors.Is(err, errQueued) && !r.lost.Load() || errors.Is(err, errStale) {
			return no
		}
		return answer{handled: true, err: err}
	}
	return answer{handled: true, seq: o.Seq, o: *o, w: r.last.Load()}
}

// nextCommand returns the workflow's oldest queued command, looking at
// the queue only when a command may be there: one was queued here
// (poke), the runner knows of one it has not taken, or a Poll went by
// since it last looked (another instance may have queued one). The queue
// stays the truth; this spares a read of it on every turn of the loop and
// at every layer's end, where nothing was queued.
func (r *runner) nextCommand(ctx context.Context) (int64, Command, bool, error) {
	if !r.queued.Swap(false) && time.Since(r.polled) < r.e.poll {
		return 0, Command{}, false, nil
	}
	r.polled = time.Now()
	seq, cmd, ok, err := r.e.j.nextCommand(ctx, r.id)
	if ok || err != nil {
		r.queued.Store(true) // still there until taken (or look again)
	}
	return seq, cmd, ok, err
}

// answer applies a command to the runner's workflow: its outcome, and the
// events of its change (none when rejected: nothing changed).
func (r *runner) answer(ctx context.Context, cmd Command) ([]Event, *outcome) {
	o := &outcome{Status: CommandApplied, pause: cmd.DecisionID}
	evs, err := r.apply(ctx, cmd)
	if err != nil {
		o.Status, o.Reason, o.Code = CommandRejected, err.Message, err.Code
		evs = nil
	}
	return evs, o
}

// loop runs the workflow until it ends, the engine stops, or the lease is
// lost: queued commands first, one at a time, then the next layer; while
// paused it waits for a command. It answers every command it takes; once
// it returns, commands go to the queue. The lease is renewed beside it,
// whatever the runner waits for.
func (r *runner) loop() {
	e := r.e
	defer close(r.done)
	defer func() {
		e.mu.Lock()
		delete(e.runners, r.id)
		e.mu.Unlock()
	}()
	if e.looping != nil {
		e.looping()
	}
	renewed := make(chan struct{})
	var renewing sync.WaitGroup
	renewing.Go(func() { r.renew(renewed) })
	defer func() { close(renewed); renewing.Wait() }()
	ctx := e.ctx
	for !r.lost.Load() && ctx.Err() == nil {
		select {
		case <-e.stop:
			if err := e.j.release(ctx, r.id, r.lease); err != nil {
				e.log.Warn("workflow: release", "workflow", r.id, "err", err)
			}
			return
		default:
		}
		did, err := r.traced(ctx, "workflow command", r.command)
		if err != nil {
			r.fail(err)
			return
		}
		if did {
			continue
		}
		switch status := r.w.Status; {
		case Terminal(status) && !r.ended:
			// a command another instance queued while the last layer ran
			// is answered (refused: finished) before the runner goes — its
			// sender waits for that answer; after this write none can be
			// queued (enqueue refuses a finished workflow)
			r.ended = true
			r.queued.Store(true)
		case Terminal(status):
			return
		case status == StatusRunning:
			if _, err := r.traced(ctx, "workflow layer", func(ctx context.Context) (bool, error) { return true, r.step(ctx) }); err != nil {
				r.fail(err)
				return
			}
		default:
			r.idle(ctx)
		}
	}
}

// idle waits while the workflow is paused: for a command handed over
// (answered at once), one queued here (poke) or — at the latest after
// Poll — by another instance, the lease lost, or the engine stopping.
func (r *runner) idle(ctx context.Context) {
	e := r.e
	t := time.NewTimer(e.poll)
	defer t.Stop()
	select {
	case q := <-r.cmds:
		r.serve(ctx, q)
	case <-r.wake:
	case <-t.C:
	case <-r.gone:
	case <-e.stop:
	case <-ctx.Done():
	}
}

// traced runs one step of the runner (a layer, a command) in a span when
// tracing; a command span is kept only when a command was there.
func (r *runner) traced(ctx context.Context, name string, step func(context.Context) (bool, error)) (bool, error) {
	if r.e.tracer == nil {
		return step(ctx)
	}
	ctx, span := r.e.tracer.Start(ctx, name, trace.WithAttributes(telemetry.Workflow.String(r.id)))
	did, err := step(ctx)
	span.SetAttributes(telemetry.Layer.Int(r.w.Layer), attribute.String("agentplane.workflow.status", r.w.Status))
	if err != nil {
		telemetry.Fail(span, "workflow", err.Error())
	}
	if did || err != nil {
		span.End()
	}
	return did, err
}

// fail stops the runner after a write failed: the stored workflow is what
// counts, and whoever claims it next (this engine, when the lease runs
// out) resumes from it.
func (r *runner) fail(err error) {
	if errors.Is(err, errStale) {
		r.e.log.Info("workflow: lease lost", "workflow", r.id)
	} else if r.e.ctx.Err() == nil {
		r.e.log.Error("workflow: runner stopped", "workflow", r.id, "err", err)
	}
	r.lost.Store(true)
}

// renew extends the lease at once (the claim, or Start's write, may have
// taken a good part of it on a loaded machine; not when Start's write
// stamped it less than a third of the lease ago) and then every third of
// it until done, on a goroutine of its own (the loop's waits and writes
// never hold it up); when the lease has moved on, it tells the runner
// (gone) and returns.
func (r *runner) renew(done <-chan struct{}) {
	e := r.e
	t := time.NewTicker(e.lease / 3)
	defer t.Stop()
	// Start's write stamped the lease a moment ago: the first renewal is
	// due a third of the lease after it, not at once
	fresh := !r.stamped.IsZero() && e.core.Now().Sub(r.stamped) < e.lease/3
	for first := true; ; first = false {
		if !first || fresh {
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
		ok, err := e.j.renew(e.ctx, r.id, r.lease, e.core.Now().Add(e.lease))
		if err == nil && !ok {
			r.e.log.Info("workflow: lease lost", "workflow", r.id)
			r.lost.Store(true)
			close(r.gone)
			return
		}
	}
}
