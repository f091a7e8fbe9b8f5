package workflow_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/workflow"
)

// crash leaves the workflow's engine hung on a call (as a process that
// stopped answering, or died, does): its lease is no longer renewed, and
// another engine, running as serve runs it, takes the workflow over once
// the lease ran out. It returns that engine and the workflow as it took
// it over — interrupted, or with the automatic policy resumed and run to
// its end — waited for on the engine's change signal; done is closed
// when the hung engine has stopped (after unhold).
func crash(t *testing.T, e *env, id string, policy string) (*workflow.Engine, *workflow.Workflow, chan struct{}) {
	t.Helper()
	before, err := e.eng.Get(context.Background(), id, "alice")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { e.eng.Close(time.Millisecond); close(done) }()
	other := e.engine(t, &workflow.Options{Lease: 300 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { other.Run(ctx) })
	t.Cleanup(func() { stop(); running.Wait() })
	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	w, err := other.Wait(wait, id, "alice", before.Seq)
	if err != nil {
		t.Fatalf("the workflow was not taken over: %v", err)
	}
	if policy == workflow.ResumeAutomatic && !hasEvent(e, t, id, workflow.EventResumed) || policy != workflow.ResumeAutomatic && w.Status != workflow.StatusInterrupted {
		t.Fatalf("taken over as %s", w.Status)
	}
	return other, w, done
}

func hasEvent(e *env, t *testing.T, id, typ string) bool {
	for _, ev := range e.events(t, id) {
		if ev.Type == typ {
			return true
		}
	}
	return false
}

// startHeld starts a workflow whose approved layer hangs in flight:
// it answers each approval until arrived says the call is in flight
// (the next approval, if any, comes on the engine's change signal).
func startHeld(t *testing.T, e *env, src, policy string, arrived <-chan struct{}) *workflow.Workflow {
	t.Helper()
	w := e.start(t, src, policy)
	for w != nil && w.Status == workflow.StatusAwaitingApproval {
		if _, err := e.eng.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: yes()}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		next := make(chan *workflow.Workflow, 1)
		var waiting sync.WaitGroup
		waiting.Go(func() {
			n, _ := e.eng.Wait(ctx, w.ID, "alice", w.Seq) // the next layer asks too
			next <- n
		})
		select {
		case <-arrived:
		case w = <-next:
		}
		cancel()
		waiting.Wait()
		select {
		case <-arrived:
			return w
		default:
		}
	}
	t.Fatalf("nothing in flight: %+v", w)
	return nil
}

// A task in flight when its engine stopped whose tool may have acted and
// is not idempotent by key is not run again: it fails, and being
// external, fails the workflow. The stopped engine's late writes change
// nothing. (Here the gate records the cancelled call as timed out; a
// process killed outright leaves the request claimed and unfinished,
// which resumes the same way: the SIGKILL test in cmd/agentplane.)
func TestInFlightExternalIsNotRunAgain(t *testing.T) {
	e := newEnv(t, &workflow.Options{Lease: 300 * time.Millisecond})
	w := startHeld(t, e, "tasks: [{id: letter, tool: hold}, {id: after, tool: noop, depends_on: [letter]}]", "", e.held)
	other, w, done := crash(t, e, w.ID, "")
	if w.Interruption == nil || len(w.Interruption.InFlight) != 1 || w.Interruption.InFlight[0] != "letter" {
		t.Fatalf("interruption %+v", w.Interruption)
	}
	if _, err := other.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "checkpoint_response", CheckpointID: "nope", Decision: "continue"}); err == nil {
		t.Fatal("an unknown checkpoint was accepted")
	}
	if _, err := other.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "checkpoint_response", CheckpointID: w.Interruption.CheckpointID, Decision: "continue"}); err != nil {
		t.Fatal(err)
	}
	w, _ = other.Wait(context.Background(), w.ID, "alice", w.Seq)
	if w.Status != workflow.StatusFailed || !strings.Contains(w.Reason, "task letter (hold) failed") || e.holds.Load() != 1 {
		t.Fatalf("%+v; %d calls", w, e.holds.Load())
	}
	seq := w.Seq
	e.unhold()
	<-done
	if after, _ := other.Get(context.Background(), w.ID, "alice"); after.Seq != seq || after.Status != workflow.StatusFailed {
		t.Fatalf("the hung engine wrote after losing its lease: %+v", after)
	}
	e.events(t, w.ID) // numbered without a gap
}

// A task in flight whose tool is idempotent by key (HTTP) runs again
// under a new request id with the same Idempotency-Key; the service acts
// once. With the automatic policy nobody has to answer.
func TestInFlightByKeyResumesAutomatically(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		for _, policy := range []string{workflow.ResumeManual, workflow.ResumeAutomatic} {
			t.Run(policy, func(t *testing.T) {
				e := newEnvOn(t, kind, &workflow.Options{Lease: 300 * time.Millisecond})
				e.down.stall = make(chan struct{})
				w := startHeld(t, e, "tasks: [{id: pub, tool: publish}, {id: after, tool: noop, depends_on: [pub]}]", policy, e.down.arrived)
				other, w, done := crash(t, e, w.ID, policy)
				if policy == workflow.ResumeManual {
					if _, err := other.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "checkpoint_response", CheckpointID: w.Interruption.CheckpointID, Decision: "continue"}); err != nil {
						t.Fatal(err)
					}
				}
				for !workflow.Terminal(w.Status) {
					w, _ = other.Wait(context.Background(), w.ID, "alice", w.Seq)
				}
				close(e.down.stall)
				e.unhold()
				<-done
				if w.Status != workflow.StatusCompleted || w.Tasks[0].Attempts != 2 {
					t.Fatalf("%+v", w)
				}
				keys, requests, _ := e.down.counts()
				e.down.mu.Lock()
				seen := e.down.seen[gate.DownstreamKey("alice", w.SessionID, w.ID+"-pub")] // the task's key, as the gate derives it
				e.down.mu.Unlock()
				if keys != 1 || requests != 2 || seen != 2 {
					t.Fatalf("downstream: %d keys, %d requests (%d with the task's key)", keys, requests, seen)
				}
				if !hasEvent(e, t, w.ID, workflow.EventInterrupted) || !hasEvent(e, t, w.ID, workflow.EventResumed) {
					t.Fatal("no interrupted and resumed events")
				}
			})
		}
	})
}

// rollback returns read tasks to a checkpoint (they run again, under new
// request ids) while what changed the world keeps its result.
func TestRollbackKeepsExternalResults(t *testing.T) {
	e := newEnv(t, &workflow.Options{Lease: 300 * time.Millisecond})
	e.down.stall = make(chan struct{})
	w := startHeld(t, e, `tasks:
  - {id: files, tool: list_files}
  - {id: del, tool: delete_files, depends_on: [files]}
  - {id: n, tool: noop, depends_on: [files]}
  - {id: pub, tool: publish, depends_on: [del, n]}
`, "", e.down.arrived)
	other, w, done := crash(t, e, w.ID, "")
	cps := w.Interruption.Checkpoints
	if len(cps) != 3 { // start, after layer 1, after layer 2
		t.Fatalf("checkpoints %v", cps)
	}
	if _, err := other.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "checkpoint_response", CheckpointID: cps[1], Decision: "rollback"}); err != nil {
		t.Fatal(err)
	}
	w, _ = other.Wait(context.Background(), w.ID, "alice", w.Seq)
	close(e.down.stall)
	e.unhold()
	<-done
	byID := map[string]workflow.TaskRun{}
	for _, t := range w.Tasks {
		byID[t.ID] = t
	}
	if w.Status != workflow.StatusCompleted || e.deletes.Load() != 1 || byID["n"].Attempts != 2 || byID["del"].Attempts != 1 || byID["files"].Attempts != 1 {
		t.Fatalf("%+v; %d deletes", w, e.deletes.Load())
	}
}

func TestModifyBeforeResuming(t *testing.T) {
	e := newEnv(t, &workflow.Options{Lease: 300 * time.Millisecond})
	e.down.stall = make(chan struct{})
	w := startHeld(t, e, `tasks:
  - {id: pub, tool: publish}
  - {id: words, tool: count_words, args: {text: "one"}, depends_on: [pub]}
  - {id: other, tool: noop, depends_on: [pub]}
`, "", e.down.arrived)
	other, w, done := crash(t, e, w.ID, "")
	bad := []workflow.Modifications{
		{Args: map[string]map[string]any{"pub": {"x": 1}}},                   // pub is in flight, not pending
		{Skip: []string{"ghost"}},                                            // no such task
		{Args: map[string]map[string]any{"words": {"text": "${pub.outpt}"}}}, // a malformed reference
	}
	for _, m := range bad {
		if _, err := other.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "checkpoint_response", CheckpointID: w.Interruption.CheckpointID, Decision: "modify", Modifications: &m}); err == nil {
			t.Fatalf("modifications %+v accepted", m)
		}
	}
	m := workflow.Modifications{Args: map[string]map[string]any{"words": {"text": "one two three"}}, Skip: []string{"other"}}
	if _, err := other.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "checkpoint_response", CheckpointID: w.Interruption.CheckpointID, Decision: "modify", Modifications: &m}); err != nil {
		t.Fatal(err)
	}
	w, _ = other.Wait(context.Background(), w.ID, "alice", w.Seq)
	close(e.down.stall)
	e.unhold()
	<-done
	if w.Status != workflow.StatusCompleted || string(w.Tasks[1].Output) != `{"words":3}` || w.Tasks[2].Status != workflow.TaskSkipped {
		t.Fatalf("%+v", w)
	}
}

func TestAtMostFiveCheckpoints(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		src := "tasks:\n  - {id: t0, tool: noop}\n"
		for i := 1; i < 8; i++ {
			src += "  - {id: t" + string(rune('0'+i)) + ", tool: noop, depends_on: [t" + string(rune('0'+i-1)) + "]}\n"
		}
		w := e.start(t, src, "")
		if w.Status != workflow.StatusCompleted || w.Layer != 8 {
			t.Fatalf("%+v", w)
		}
		cps, err := e.eng.Checkpoints(context.Background(), w.ID)
		if err != nil || len(cps) != workflow.KeepCheckpoints || cps[len(cps)-1].Layer != 8 || cps[0].Layer != 4 {
			t.Fatalf("%+v %v", cps, err)
		}
		// every checkpoint it saved (its events name them): the kept ones
		// restore, the older ones are no longer there
		kept := map[string]bool{}
		for _, c := range cps {
			kept[c.ID] = true
		}
		saved := 0
		for _, ev := range e.events(t, w.ID) {
			if ev.Type != workflow.EventCheckpointSaved {
				continue
			}
			saved++
			old, err := workflow.Restore(context.Background(), e.eng, w.ID, ev.CheckpointID)
			if kept[ev.CheckpointID] != (err == nil) || err != nil && agentplane.ErrorCode(err) != agentplane.CodeNotFound || err == nil && old.Layer != ev.Layer {
				t.Errorf("restore %s (kept: %v): %v", ev.CheckpointID, kept[ev.CheckpointID], err)
			}
		}
		if saved != 9 {
			t.Errorf("%d checkpoints saved; want 9 (the start's and each layer's)", saved)
		}
		if q, ok := e.store.(store.Querier); ok {
			// the task states only pruned checkpoints held are gone too:
			// every row left is a current state or a kept checkpoint's
			rows := historyOf(t, q, w.ID)
			held := map[historyRow]bool{}
			for _, r := range heldAt(rows, -1) {
				held[r] = true
			}
			for _, c := range cps {
				n, _ := strconv.Atoi(strings.TrimPrefix(c.ID, w.ID+"-c"))
				for _, r := range heldAt(rows, int64(n)) {
					held[r] = true
				}
			}
			dead := 0
			for _, r := range rows {
				if !held[r] {
					dead++
				}
			}
			if dead != 0 || len(rows) == 0 {
				t.Fatalf("task states: %d held by no kept checkpoint, %d in all", dead, len(rows))
			}
		}
	})
}

// Several engines on one database: each released workflow is taken by
// exactly one, and a command sent through any engine is processed by
// the one holding the workflow.
func TestExactlyOneEngineHoldsAWorkflow(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		var ids []string
		for range 12 {
			w := e.start(t, "per_layer_validation: true\ntasks: [{id: a, tool: noop}, {id: b, tool: noop, depends_on: [a]}]", "")
			ids = append(ids, w.ID)
		}
		e.eng.Close(5 * time.Second) // releases them all
		engines := []*workflow.Engine{e.engine(t, nil), e.engine(t, nil), e.engine(t, nil)}
		var wg sync.WaitGroup
		for _, eng := range engines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					if err := eng.ClaimDue(context.Background()); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		held := map[string]int{}
		for _, eng := range engines {
			for _, id := range eng.Holding() {
				held[id]++
			}
		}
		for _, id := range ids {
			if held[id] != 1 {
				t.Fatalf("%s is held by %d engines", id, held[id])
			}
		}
		// a command through each engine, whoever holds the workflow
		for i, id := range ids {
			eng := engines[i%3]
			if _, err := eng.Command(context.Background(), id, "alice", workflow.Command{Type: "continue"}); err != nil {
				t.Fatal(err)
			}
			w, err := eng.Wait(context.Background(), id, "alice", 0)
			for err == nil && w.Status == workflow.StatusRunning {
				w, err = eng.Wait(context.Background(), id, "alice", w.Seq)
			}
			if err != nil || w.Status != workflow.StatusAwaitingDecision || w.Layer != 2 {
				t.Fatalf("%+v %v", w, err)
			}
		}
	})
}
