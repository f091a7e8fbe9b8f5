package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store"
)

// step runs the workflow's layers, from the next one on, while nothing
// pauses it: each layer's end is written with the next layer's start.
func (r *runner) step(ctx context.Context) error {
	layer := r.started
	r.started = nil
	if layer == nil {
		// a layer written as started that no runner ran: Start's, when its
		// engine stopped before its runner's first turn and released the
		// workflow (a released workflow has nothing in flight); next would
		// skip its tasks, running
		for _, t := range r.w.running() {
			layer = append(layer, t.ID)
		}
	}
	var err error
	if layer == nil { // not started with the write before (Start's, a layer's end)
		var evs []Event
		evs, layer = r.next(r.w)
		err = r.save(ctx, evs, nil, nil)
	}
	for err == nil && layer != nil {
		var next []string
		var ended bool
		if next, ended, err = r.runLayer(ctx, layer); err == nil && !ended {
			next, err = r.endLayer(ctx, layer)
		}
		layer = next
	}
	return err
}

// next decides what follows on w, running: the workflow fails (a task
// that is not safe to fail failed, settled so after a crash), completes
// (nothing is left to run), pauses for the approval of the next layer, or
// starts it. It returns the events, and the started layer's task ids (nil
// when none started). Tasks blocked by a failed or skipped dependency are
// skipped first; a task whose arguments do not resolve fails without
// running.
func (r *runner) next(w *Workflow) ([]Event, []string) {
	if ev, ok := r.failed(w); ok {
		return []Event{ev}, nil
	}
	evs, layer := r.settle(w)
	if w.Status == StatusCompleted {
		return evs, nil
	}
	calls := make([]TaskCall, 0, len(layer))
	approve := false
	for _, t := range layer {
		args, err := resolveArgs(t.Task.Args, w)
		if err != nil {
			args = nil
			t.Error = &agentplane.ResultError{Code: agentplane.CodeInvalidArgs, Detail: err.Error()}
		}
		t.Resolved = args
		s, _, _ := r.e.spec(t.Tool)
		calls = append(calls, TaskCall{ID: t.ID, Tool: t.Tool, Args: args, Impact: string(s.Impact)})
		if t.Approval == "" && r.e.needsApproval(t.Tool) {
			approve = true
		}
	}
	if approve {
		w.Status = StatusAwaitingApproval
		w.Approval = &Approval{ID: r.e.pauseID(), CheckpointID: w.nextID("a"), Layer: w.Layer + 1, Tasks: calls}
		ev := r.event(w, EventApprovalRequired)
		ev.CheckpointID, ev.Layer, ev.Tasks, ev.DecisionID = w.Approval.CheckpointID, w.Approval.Layer, calls, w.Approval.ID
		return append(evs, ev), nil
	}
	w.Layer++
	ev := r.event(w, EventLayerStarted)
	ev.Layer, ev.Tasks = w.Layer, calls
	evs = append(evs, ev)
	ids := make([]string, 0, len(layer))
	for _, t := range layer {
		t.Layer = w.Layer
		ids = append(ids, t.ID)
		if t.Error != nil { // its arguments did not resolve: it fails without running
			t.Attempts++
			evs = append(evs, r.finish(w, t, agentplane.ExecutionResult{Status: agentplane.StatusRejected, Error: t.Error}))
			continue
		}
		t.Status, t.Attempts = TaskRunning, t.Attempts+1
		t.RequestID = requestID(w, t)
	}
	return evs, ids
}

// runLayer runs the layer's tasks that are in flight, each on a
// goroutine of its own, at most the engine's concurrency at once; the
// runner takes their attempts' results as messages (result) and answers
// commands meanwhile. A layer of one task in flight ends in the commit
// of its result (ended): then next is the layer that end started.
func (r *runner) runLayer(ctx context.Context, layer []string) (next []string, ended bool, err error) {
	var ids []string
	for _, id := range layer {
		if r.w.task(id).Status == TaskRunning {
			ids = append(ids, id)
		}
	}
	var alone []string // the layer, when its end is written with its one task's result
	if len(ids) == 1 {
		alone = layer
	}
	msgs := make(chan taskMsg)
	var tasks sync.WaitGroup
	defer tasks.Wait()
	running := 0
	// committing: the gate may be committing the layer's end with its one
	// task's result; until that task reports, the stored workflow may be
	// ahead of the runner's, and commands wait (they answer the workflow
	// as stored)
	committing := false
	for len(ids) > 0 || running > 0 {
		for running < r.e.concurrency && len(ids) > 0 && ctx.Err() == nil {
			id, inv := ids[0], r.invocation(ids[0])
			ids, running = ids[1:], running+1
			tasks.Add(1)
			r.e.workers.run(func() {
				defer tasks.Done()
				r.runTask(ctx, id, inv, alone, msgs)
			})
		}
		if running == 0 {
			break // stopped hard before the rest began: they stay in flight
		}
		cmds := r.cmds
		if committing {
			cmds = nil
		}
		select {
		case m := <-msgs:
			if m.ending {
				a := r.ending(ctx, m.id, alone, m.res)
				committing = committing || a.ops != nil
				m.reply <- a
				continue
			}
			committing = false
			a, out := r.result(ctx, m)
			m.reply <- a
			if a.again != nil {
				continue
			}
			running--
			if out.err != nil && err == nil {
				err = out.err
			}
			if out.ended {
				next, ended = out.next, true
			}
		case q := <-cmds:
			r.serve(ctx, q)
		}
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return next, ended, err
}

// settle skips the tasks blocked by a failed or skipped dependency and
// returns the next layer; with none, the workflow is completed. It
// returns the events of both.
func (r *runner) settle(w *Workflow) ([]Event, []*TaskRun) {
	var evs []Event
	for _, t := range w.skipBlocked() {
		ev := r.event(w, EventTaskSkipped)
		ev.Task, ev.Tool, ev.Error = t.ID, t.Tool, t.Error
		evs = append(evs, ev)
	}
	layer := w.ready()
	if len(layer) == 0 {
		w.Status = StatusCompleted
		evs = append(evs, r.event(w, EventCompleted))
	}
	return evs, layer
}

// endLayer decides what follows a layer, in one write with the result of
// the task that finished last: the workflow fails (a task that is not
// safe to fail failed), or a checkpoint is saved and the workflow pauses
// for a decision (per-layer validation) or goes on as next decides — the
// next layer started in the same write, unless the engine is stopping or
// a command waits (then the runner's loop takes it first). It returns the
// layer started, if any.
func (r *runner) endLayer(ctx context.Context, layer []string) ([]string, error) {
	s, next := r.layerEnd(ctx, r.w, layer, r.held)
	r.held = nil
	if err := r.write(ctx, s); err != nil {
		return nil, err
	}
	return next, nil
}

// layerEnd is endLayer's write of w, with the events evs before it, and
// the layer it starts.
func (r *runner) layerEnd(ctx context.Context, w *Workflow, layer []string, evs []Event) (*saved, []string) {
	if ev, ok := r.failed(w); ok {
		return &saved{events: append(evs, ev)}, nil
	}
	ev := r.event(w, EventLayerComplete)
	ev.Layer = w.Layer
	for _, id := range layer {
		t := w.task(id)
		ev.Results = append(ev.Results, TaskResult{ID: t.ID, Tool: t.Tool, Status: t.Status, Output: t.Output, Error: t.Error})
	}
	cp := r.checkpoint(w)
	kept := r.event(w, EventCheckpointSaved)
	kept.Layer, kept.CheckpointID = w.Layer, cp.ID
	evs = append(slices.Grow(evs, 4), ev, kept) // and the next layer's start, usually
	var next []string
	switch {
	case w.PerLayerValidation:
		w.Status = StatusAwaitingDecision
		w.Decision = &DecisionRequest{ID: r.e.pauseID(), Layer: w.Layer, Options: []string{CommandContinue, CommandAbort, CommandReplan}}
		d := r.event(w, EventDecisionRequired)
		d.Layer, d.Options, d.Results, d.DecisionID = w.Layer, w.Decision.Options, ev.Results, w.Decision.ID
		evs = append(evs, d)
	case r.mayGoOn(ctx):
		cp.w = w.copy() // what the checkpoint keeps: the layer's end
		var more []Event
		more, next = r.next(w)
		evs = append(evs, more...)
	default:
		more, _ := r.settle(w)
		evs = append(evs, more...)
	}
	return &saved{events: evs, cp: cp}, next
}

// ending builds the write of a layer's end with its one task's result,
// for the gate to commit with that result: on a copy of the workflow,
// kept in the reply's end, which becomes the runner's only once the gate
// reports it written. A result worth another attempt, or one of a stop,
// ends nothing.
func (r *runner) ending(ctx context.Context, id string, layer []string, res agentplane.ExecutionResult) taskReply {
	if ctx.Err() != nil {
		return taskReply{} // stopped hard: the result may be the stop's, and the task stays in flight
	}
	if r.retries(r.w, r.w.task(id), res) {
		return taskReply{}
	}
	w := r.w.copy()
	// room for layerEnd's events after it: the layer's end, the checkpoint, the next layer's start
	evs := append(make([]Event, 0, 5), r.finish(w, w.task(id), res))
	s, next := r.layerEnd(ctx, w, layer, evs)
	r.prepare(w, s)
	op := r.e.j.op(s)
	if op == nil {
		return taskReply{}
	}
	if !r.gating {
		r.gating = true // until the task's result is back (result)
		r.writing.Add(1)
	}
	return taskReply{ops: []store.Op{op}, end: &layerEnded{s: s, next: next}}
}

// layerEnded is a layer's end the gate committed with its last result.
type layerEnded struct {
	s    *saved
	next []string
}

// mayGoOn reports whether the runner may start the next layer without
// returning to its loop: the engine is not stopping, and no command is
// queued for the workflow (it goes first).
func (r *runner) mayGoOn(ctx context.Context) bool {
	select {
	case <-r.e.stop:
		return false
	default:
	}
	_, _, queued, err := r.nextCommand(ctx)
	return err == nil && !queued
}

// taskMsg is a message from a task's goroutine to the runner: an
// attempt's result (answered with another attempt, or the task's end),
// or — ending, from within the gate's commit of the layer's one task —
// the result about to be committed, answered with the layer's end to
// commit with it.
type taskMsg struct {
	id      string
	res     agentplane.ExecutionResult
	err     error // Execute's
	ending  bool
	written *layerEnded // the layer's end the gate committed with the result
	stopped bool        // ctx ended during a backoff: the task stays in flight
	reply   chan taskReply
}

// taskReply is the runner's answer to a taskMsg.
type taskReply struct {
	again *gate.Invocation // the next attempt, after wait; nil: the task is done
	wait  time.Duration
	ops   []store.Op  // ending: the layer's end, for the gate's commit
	end   *layerEnded // what ops write
}

// taskDone is what became of a task: the layer's end written with it
// (ended, next), or the error that stopped it.
type taskDone struct {
	next  []string
	ended bool
	err   error
}

// invocation is the gate's invocation of a task's attempt now.
func (r *runner) invocation(id string) gate.Invocation {
	w := r.w
	t := w.task(id)
	return gate.Invocation{SessionID: w.SessionID, Tool: t.Tool, Args: t.Resolved, RequestID: t.RequestID, IdempotencyKey: t.Key,
		Origin: gate.OriginWorkflow, Principal: w.Principal, Roles: w.Roles, Approval: t.Approval}
}

// runTask runs a task's attempts through the gate, on the task's own
// goroutine, reporting each to the runner (msgs) and doing as it
// answers: a failure worth retrying (a tool that failed, timed out or
// was unavailable, a session changed underneath) is tried again after a
// backoff under a new request id with the task's one idempotency key, up
// to the workflow's attempts. It touches nothing of the runner's.
//
// With layer (the task is its layer's one in flight), the layer's end is
// written in the gate's commit of the task's last result.
func (r *runner) runTask(ctx context.Context, id string, inv gate.Invocation, layer []string, msgs chan<- taskMsg) {
	reply := make(chan taskReply, 1)
	for {
		var end *layerEnded
		if layer != nil {
			inv.Also = &gate.Also{Keeps: true, Ops: func(res agentplane.ExecutionResult) []store.Op {
				msgs <- taskMsg{id: id, res: res, ending: true, reply: reply}
				a := <-reply
				end = a.end
				return a.ops
			}}
		}
		res, err := r.e.core.Execute(ctx, inv)
		m := taskMsg{id: id, res: res, err: err, reply: reply}
		if inv.Also != nil && inv.Also.Written {
			m.written = end
		}
		msgs <- m
		a := <-reply
		if a.again == nil {
			return
		}
		t := time.NewTimer(a.wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			msgs <- taskMsg{id: id, stopped: true, reply: reply}
			<-reply
			return
		}
		inv = *a.again
	}
}

// result takes an attempt's result on the runner: the layer's end the
// gate wrote with it, another attempt (its new request id written), or
// the task's end — written, or held for endLayer when it is the layer's
// last in flight (the gate has its result already, for a resume).
func (r *runner) result(ctx context.Context, m taskMsg) (taskReply, taskDone) {
	if r.gating { // the gate's commit is decided: written (taken below) or not
		defer func() { r.gating = false; r.writing.Add(-1) }()
	}
	switch {
	case m.written != nil:
		r.wrote(ctx, m.written.s)
		return taskReply{}, taskDone{next: m.written.next, ended: true, err: ctx.Err()}
	case m.stopped || ctx.Err() != nil:
		return taskReply{}, taskDone{err: ctx.Err()} // stopped hard: the task stays in flight, for whoever resumes it
	}
	res := m.res
	if m.err != nil {
		res = agentplane.ExecutionResult{Status: agentplane.StatusFailed, Error: &agentplane.ResultError{Code: agentplane.CodeInternal, Detail: m.err.Error()}}
	}
	w, t := r.w, r.w.task(m.id)
	retry := r.retries(w, t, res)
	var evs []Event
	if retry {
		t.Attempts++
		t.RequestID = requestID(w, t)
	} else {
		evs = append(evs, r.finish(w, t, res))
	}
	var err error
	if !retry && len(w.running()) == 0 {
		r.held = append(r.held, evs...)
	} else {
		err = r.save(ctx, evs, nil, nil)
	}
	if err != nil || !retry {
		return taskReply{}, taskDone{err: err}
	}
	inv := r.invocation(m.id)
	return taskReply{again: &inv, wait: min(r.e.backoff<<min(t.Attempts-2, 6), 5*time.Second)}, taskDone{}
}

// retries reports whether the task's result gets another attempt: it is
// worth one, and the workflow allows it.
func (r *runner) retries(w *Workflow, t *TaskRun, res agentplane.ExecutionResult) bool {
	return retryable(res, r.e.rerunnable(t.Tool)) && t.Attempts < w.MaxAttempts
}

// retryable reports whether a result is worth another attempt: a failure
// where nothing ran (the tool was not connected, the session changed
// underneath, the request was still held), or — when the tool may run
// again (rerunnable: read-only, internal, or idempotent by key) — one
// where it may have (it failed, timed out, or the gate could not record).
// An external tool without a key that may have acted is not tried again.
func retryable(res agentplane.ExecutionResult, rerunnable bool) bool {
	if res.Status == agentplane.StatusSuccess || res.Error == nil {
		return false
	}
	switch res.Error.Code {
	case agentplane.CodeToolUnavailable, agentplane.CodeVersionConflict, agentplane.CodeRequestInProgress:
		return true
	case agentplane.CodeToolFailed, agentplane.CodeTimeout, agentplane.CodeInternal, agentplane.CodeSourceUnavailable:
		return rerunnable
	}
	return false
}

// failed fails the workflow when one of its tasks failed that is not safe
// to fail; it returns the event.
func (r *runner) failed(w *Workflow) (Event, bool) {
	for _, t := range w.Tasks {
		if t.Status == TaskFailed && !r.e.safeToFail(t.Tool) {
			w.Status = StatusFailed
			w.Reason = fmt.Sprintf("task %s (%s) failed and is not safe to fail: %s", t.ID, t.Tool, t.Error.Detail)
			ev := r.event(w, EventFailed)
			ev.Task, ev.Tool, ev.Reason = t.ID, t.Tool, w.Reason
			return ev, true
		}
	}
	return Event{}, false
}

// TaskResult is a task's outcome in a layer_complete or decision_required
// event.
type TaskResult struct {
	ID     string                  `json:"id"`
	Tool   string                  `json:"tool"`
	Status string                  `json:"status"`
	Output json.RawMessage         `json:"output,omitempty"`
	Error  *agentplane.ResultError `json:"error,omitempty"`
}

// resolveArgs replaces ${task.output.path} references with the outputs of
// completed tasks: a string that is one reference becomes the value
// itself, any JSON; a reference inside a longer string is replaced by the
// value's text.
func resolveArgs(args map[string]any, w *Workflow) (json.RawMessage, error) {
	if len(args) == 0 {
		return json.RawMessage("{}"), nil
	}
	v, err := resolveValue(args, w)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func resolveValue(v any, w *Workflow) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := resolveValue(e, w)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := resolveValue(e, w)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case string:
		ms := refPattern.FindAllStringSubmatchIndex(x, -1)
		if len(ms) == 0 {
			return x, nil
		}
		if len(ms) == 1 && ms[0][0] == 0 && ms[0][1] == len(x) {
			return lookup(x[ms[0][2]:ms[0][3]], w)
		}
		var b strings.Builder
		last := 0
		for _, m := range ms {
			b.WriteString(x[last:m[0]])
			val, err := lookup(x[m[2]:m[3]], w)
			if err != nil {
				return nil, err
			}
			if s, ok := val.(string); ok {
				b.WriteString(s)
			} else {
				j, _ := json.Marshal(val)
				b.Write(j)
			}
			last = m[1]
		}
		b.WriteString(x[last:])
		return b.String(), nil
	}
	return v, nil
}

// lookup finds task.output.a.0.b in a completed task's output.
func lookup(ref string, w *Workflow) (any, error) {
	m := refForm.FindStringSubmatch(ref)
	if m == nil {
		return nil, fmt.Errorf("${%s}: not a reference", ref)
	}
	t := w.task(m[1])
	if t == nil || t.Status != TaskCompleted {
		return nil, fmt.Errorf("${%s}: task %s has not completed", ref, m[1])
	}
	var v any
	if len(t.Output) > 0 {
		if err := json.Unmarshal(t.Output, &v); err != nil {
			return nil, fmt.Errorf("${%s}: the output of %s is not JSON", ref, m[1])
		}
	}
	path := strings.TrimPrefix(m[2], ".")
	if path == "" {
		return v, nil
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[k]
			if !ok {
				return nil, fmt.Errorf("${%s}: the output of %s has no %q", ref, m[1], k)
			}
			v = e
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) || strconv.Itoa(i) != k {
				return nil, fmt.Errorf("${%s}: the output of %s has no element %s (%d elements)", ref, m[1], k, len(x))
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("${%s}: the output of %s has no %q", ref, m[1], k)
		}
	}
	return v, nil
}

// command processes the workflow's oldest queued command, if any: applied
// (the workflow changed, events written, all in one transaction with the
// command's outcome) or rejected with the reason (nothing changed).
func (r *runner) command(ctx context.Context) (bool, error) {
	seq, cmd, ok, err := r.nextCommand(ctx)
	if err != nil || !ok {
		return false, err
	}
	evs, o := r.answer(ctx, cmd)
	o.Seq = seq
	if o.Status == CommandRejected {
		err := r.e.j.reject(ctx, r.w.ID, r.lease, *o, r.e.core.Now())
		if err == nil {
			r.e.fire(r.w.ID)
		}
		return true, err
	}
	return true, r.save(ctx, evs, nil, o)
}

// apply carries a command out on the workflow, or returns why it does not
// fit the workflow's state (then nothing changed): it answers a pause
// that is not the one pending, or the state takes no such command.
func (r *runner) apply(ctx context.Context, c Command) ([]Event, *agentplane.Error) {
	if err := r.answers(ctx, c); err != nil {
		return nil, err
	}
	evs, reason := r.carryOut(ctx, c)
	if reason != "" {
		return nil, agentplane.Errorf(agentplane.CodeInvalidState, "%s", reason)
	}
	return evs, nil
}

// answers checks that a command answers the pause the workflow waits at:
// the one it names (or the one pending when it was received). A pause
// answered already is already_answered.
func (r *runner) answers(ctx context.Context, c Command) *agentplane.Error {
	w := r.w
	now := w.pause()
	if c.DecisionID == now {
		return nil
	}
	waits := fmt.Sprintf("it waits for decision %s (%s)", now, w.Status)
	if now == "" {
		waits = fmt.Sprintf("it waits for no decision (%s)", w.Status)
	}
	if c.DecisionID == "" { // it came while the workflow waited for nothing
		if c.Type == CommandContinue || c.Type == CommandReplan {
			return agentplane.Errorf(agentplane.CodeInvalidState, "%s came while workflow %s waited for no decision; %s: answer it by its decision_id", c.Type, w.ID, waits)
		}
		return nil // abort needs no pause, approval_response and checkpoint_response name theirs
	}
	seq, typ, found, err := r.e.j.answeredBy(ctx, w.ID, c.DecisionID)
	switch {
	case err != nil:
		return agentplane.Errorf(agentplane.CodeInvalidState, "decision %s is not pending in workflow %s (%v); %s", c.DecisionID, w.ID, err, waits)
	case found:
		return agentplane.Errorf(agentplane.CodeAlreadyAnswered, "decision %s of workflow %s was answered already (command %d, %s); %s", c.DecisionID, w.ID, seq, typ, waits)
	}
	return agentplane.Errorf(agentplane.CodeInvalidState, "workflow %s has no decision %s; %s", w.ID, c.DecisionID, waits)
}

// carryOut carries a command out on the workflow, or returns why it does
// not fit the workflow's state.
func (r *runner) carryOut(ctx context.Context, c Command) ([]Event, string) {
	w := r.w
	switch c.Type {
	case CommandContinue:
		if w.Status != StatusAwaitingDecision {
			return nil, fmt.Sprintf("continue answers decision_required; workflow %s is %s", w.ID, w.Status)
		}
		w.Status, w.Decision = StatusRunning, nil
		return nil, ""
	case CommandAbort:
		if Terminal(w.Status) {
			return nil, fmt.Sprintf("workflow %s is %s already", w.ID, w.Status)
		}
		w.Status, w.Reason, w.Approval, w.Decision, w.Interruption = StatusAborted, c.Reason, nil, nil, nil
		ev := r.event(w, EventAborted)
		ev.Reason = c.Reason
		return []Event{ev}, ""
	case CommandApprovalResponse:
		if w.Status != StatusAwaitingApproval || w.Approval == nil {
			return nil, fmt.Sprintf("no approval is pending: workflow %s is %s", w.ID, w.Status)
		}
		if c.CheckpointID != w.Approval.CheckpointID {
			return nil, fmt.Sprintf("checkpoint %q is not the pending approval of workflow %s (%s)", c.CheckpointID, w.ID, w.Approval.CheckpointID)
		}
		if !*c.Approved {
			w.Status, w.Approval = StatusAborted, nil
			w.Reason = "approval " + c.CheckpointID + " rejected"
			if c.Feedback != "" {
				w.Reason += ": " + c.Feedback
			}
			ev := r.event(w, EventAborted)
			ev.CheckpointID, ev.Reason = c.CheckpointID, w.Reason
			return []Event{ev}, ""
		}
		for _, call := range w.Approval.Tasks {
			if t := w.task(call.ID); t != nil {
				t.Approval = c.CheckpointID
			}
		}
		w.Status, w.Approval = StatusRunning, nil
		return nil, ""
	case CommandReplan:
		if w.Status != StatusAwaitingDecision {
			return nil, fmt.Sprintf("replan_dag answers decision_required; workflow %s is %s", w.ID, w.Status)
		}
		plan, err := r.e.suggest.Suggest(ctx, Replan{Workflow: w.copy(), Requirement: c.NewRequirement, Context: c.AvailableContext})
		if err != nil {
			return nil, "replan_dag: " + err.Error()
		}
		if reason := r.addTasks(w, plan.Tasks); reason != "" {
			return nil, "replan_dag: " + reason
		}
		ev := r.event(w, EventReplanned)
		ev.Reason = plan.Why
		for _, t := range plan.Tasks {
			s, _, _ := r.e.spec(t.Tool)
			args, _ := json.Marshal(t.Args)
			ev.Tasks = append(ev.Tasks, TaskCall{ID: t.ID, Tool: t.Tool, Args: args, Impact: string(s.Impact)})
		}
		w.Status, w.Decision = StatusRunning, nil
		return []Event{ev}, ""
	case CommandCheckpointResponse:
		return r.resume(ctx, c)
	}
	return nil, fmt.Sprintf("unknown command %q", c.Type)
}

// addTasks adds replanned tasks after checking them as a definition with
// the workflow's tasks.
func (r *runner) addTasks(w *Workflow, tasks []Task) string {
	if len(tasks) == 0 {
		return "no tasks to add"
	}
	def := &Definition{}
	for _, t := range w.Tasks {
		def.Tasks = append(def.Tasks, t.Task)
	}
	def.Tasks = append(def.Tasks, tasks...)
	if err := Check(def, "replan", r.e.known); err != nil {
		return err.Error()
	}
	for i, t := range tasks {
		if slices.Contains(w.Dropped, t.ID) {
			return fmt.Sprintf("replan: tasks[%d].id: %q named a task a rollback dropped: its request ids and idempotency key are spent; name the task anew", len(w.Tasks)+i, t.ID)
		}
	}
	for _, t := range tasks {
		w.Tasks = append(w.Tasks, TaskRun{Task: t, Status: TaskPending, Key: w.ID + "-" + t.ID, Added: "replan_dag"})
	}
	return ""
}

// resume answers checkpoint_response: continue from where the workflow
// was, roll back to a kept checkpoint, or modify tasks that have not run,
// then settle what was in flight and run on.
func (r *runner) resume(ctx context.Context, c Command) ([]Event, string) {
	w := r.w
	if w.Status != StatusInterrupted || w.Interruption == nil {
		return nil, fmt.Sprintf("checkpoint_response answers an interruption; workflow %s is %s", w.ID, w.Status)
	}
	if !slices.Contains(w.Interruption.Checkpoints, c.CheckpointID) {
		return nil, fmt.Sprintf("workflow %s has no checkpoint %q; it keeps %s", w.ID, c.CheckpointID, strings.Join(w.Interruption.Checkpoints, ", "))
	}
	switch c.Decision {
	case ResumeRollback:
		old, err := r.e.j.restore(ctx, w.ID, c.CheckpointID)
		if err != nil {
			return nil, "rollback: " + err.Error()
		}
		r.rollback(w, old)
	case ResumeModify:
		if reason := r.modify(w, c.Modifications); reason != "" {
			return nil, reason
		}
	}
	rec, err := r.recover(ctx)
	if err != nil {
		return nil, "resume: " + err.Error()
	}
	w.Status, w.Interruption = StatusRunning, nil
	ev := r.event(w, EventResumed)
	cmd := c
	ev.CheckpointID, ev.Reason, ev.Command = c.CheckpointID, c.Decision, &cmd
	return append(rec, ev), ""
}

// rollback returns the workflow's tasks to a checkpoint's: a task that
// completed since and may have changed the world keeps its result (it is
// never run twice); others return to what the checkpoint had, and tasks
// added since are dropped unless they completed that way.
func (r *runner) rollback(w, old *Workflow) {
	var tasks []TaskRun
	for _, t := range w.Tasks {
		keep := (t.Status == TaskCompleted || t.Status == TaskRunning) && !r.e.safeToFail(t.Tool)
		o := old.task(t.ID)
		switch {
		case keep:
			tasks = append(tasks, t)
		case o != nil:
			back := *o
			back.Attempts = max(back.Attempts, t.Attempts) // request ids stay unique
			back.n = t.n                                   // and it keeps its place
			tasks = append(tasks, back)
		default:
			w.Dropped = append(slices.Clip(w.Dropped), t.ID) // its id is spent (a new array: copies share the old)
		}
	}
	w.Tasks = tasks
}

// modify applies a checkpoint_response's modifications to tasks that have
// not run, or says why it cannot.
func (r *runner) modify(w *Workflow, m *Modifications) string {
	for id := range m.Args {
		t := w.task(id)
		if t == nil {
			return fmt.Sprintf("modifications.args: no task %q", id)
		}
		if t.Status != TaskPending {
			return fmt.Sprintf("modifications.args.%s: the task is %s; only pending tasks can change", id, t.Status)
		}
	}
	for i, id := range m.Skip {
		if t := w.task(id); t == nil || t.Status != TaskPending {
			return fmt.Sprintf("modifications.skip[%d]: %q is not a pending task", i, id)
		}
	}
	def := &Definition{}
	for _, t := range w.Tasks {
		if a, ok := m.Args[t.ID]; ok {
			t.Task.Args = a
		}
		def.Tasks = append(def.Tasks, t.Task)
	}
	if err := Check(def, "modifications", r.e.known); err != nil {
		return err.Error()
	}
	for id, a := range m.Args {
		w.task(id).Task.Args = a
	}
	for _, id := range m.Skip {
		t := w.task(id)
		t.Status = TaskSkipped
		t.Error = &agentplane.ResultError{Code: "skipped", Detail: "skipped by checkpoint_response"}
	}
	return ""
}
