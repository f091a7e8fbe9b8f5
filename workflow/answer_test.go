package workflow_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/workflow"
)

const fourLayers = "per_layer_validation: true\ntasks:\n  - {id: t0, tool: noop}\n" +
	"  - {id: t1, tool: noop, depends_on: [t0]}\n  - {id: t2, tool: noop, depends_on: [t1]}\n  - {id: t3, tool: noop, depends_on: [t2]}\n"

// Two instances on one database answer one decision at once (issue 33:
// two continues ran two layers): one is applied, the other is refused
// as answering a decision answered already, naming it — whichever
// instance it came through. (They name it: without, each answers the
// decision pending as it came, which TestCommandQueueConcurrent covers.)
func TestDecisionAnsweredOnceAcrossInstances(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		other := e.engine(t, nil) // holds nothing: its commands go through the queue
		for round := range 5 {
			w := e.start(t, fourLayers, "")
			d := w.Decision.ID
			if w.Status != workflow.StatusAwaitingDecision || !strings.HasPrefix(d, "d_") {
				t.Fatalf("round %d: %+v", round, w)
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, eng := range []*workflow.Engine{e.eng, other} {
				wg.Go(func() {
					_, errs[i] = eng.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "continue", DecisionID: d})
				})
			}
			wg.Wait()
			refused := 0
			for _, err := range errs {
				switch {
				case err == nil:
				case agentplane.ErrorCode(err) == agentplane.CodeAlreadyAnswered && strings.Contains(err.Error(), d):
					refused++
				default:
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if refused != 1 {
				t.Fatalf("round %d: %d of 2 refused: %v", round, refused, errs)
			}
			if w := e.wait(t, w.ID, w.Seq); w.Layer != 2 || w.Status != workflow.StatusAwaitingDecision || w.Decision.ID == d {
				t.Fatalf("round %d: one continue, yet layer %d, %s", round, w.Layer, w.Status)
			}
		}
	})
}

// A command naming a decision answered already is refused with
// already_answered, naming that decision and the pending one, and
// changes nothing; one naming a decision the workflow never had is
// invalid_state. An approval answered twice at once runs its layer once.
func TestStaleDecisionID(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		ctx := context.Background()
		w := e.start(t, fourLayers, "")
		d1 := w.Decision.ID
		w = e.command(t, w, workflow.Command{Type: "continue", DecisionID: d1})
		d2 := w.Decision.ID
		for _, c := range []workflow.Command{{Type: "continue", DecisionID: d1}, {Type: "abort", Reason: "late", DecisionID: d1},
			{Type: "replan_dag", NewRequirement: "count the words", DecisionID: d1}} {
			_, err := e.eng.Command(ctx, w.ID, "alice", c)
			if agentplane.ErrorCode(err) != agentplane.CodeAlreadyAnswered || !strings.Contains(err.Error(), d1) || !strings.Contains(err.Error(), d2) {
				t.Fatalf("%s with the answered %s: %v", c.Type, d1, err)
			}
		}
		if _, err := e.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "continue", DecisionID: "d_never"}); agentplane.ErrorCode(err) != agentplane.CodeInvalidState ||
			!strings.Contains(err.Error(), "d_never") {
			t.Fatalf("an unknown decision: %v", err)
		}
		if now, _ := e.eng.Get(ctx, w.ID, "alice"); now.Seq != w.Seq || now.Layer != 2 || now.Status != workflow.StatusAwaitingDecision {
			t.Fatalf("refused commands changed the workflow: %+v", now)
		}

		a := e.start(t, "tasks:\n  - {id: rm, tool: delete_files}\n", "")
		if a.Status != workflow.StatusAwaitingApproval || a.Approval.ID == "" {
			t.Fatalf("%+v", a)
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = e.eng.Command(ctx, a.ID, "alice", workflow.Command{Type: "approval_response", CheckpointID: a.Approval.CheckpointID, Approved: yes()})
			})
		}
		wg.Wait()
		applied := 0
		for _, err := range errs {
			switch code := agentplane.ErrorCode(err); {
			case err == nil:
				applied++
			case code == agentplane.CodeAlreadyAnswered && strings.Contains(err.Error(), a.Approval.ID):
			case code == agentplane.CodeInvalidState && (strings.Contains(err.Error(), "no approval is pending") || strings.Contains(err.Error(), "no more commands")):
				// came after the approval was applied (or the workflow ended)
			default:
				t.Fatalf("a second approval: %v", err)
			}
		}
		if a = e.wait(t, a.ID, a.Seq); applied != 1 || a.Status != workflow.StatusCompleted || e.deletes.Load() != 1 {
			t.Fatalf("%d approvals applied, %d deletes, %s: %v", applied, e.deletes.Load(), a.Status, errs)
		}
	})
}

// A command sent again under its idempotency key gets the first one's
// answer — its seq, applied or the same refusal — and is applied once,
// also when the copies come at once; another command under the key is
// request_conflict.
func TestCommandIdempotencyKey(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		ctx := context.Background()
		w := e.start(t, fourLayers, "")
		d1 := w.Decision.ID
		first, err := e.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "continue", RequestID: "k1"})
		if err != nil {
			t.Fatal(err)
		}
		w = e.wait(t, w.ID, w.Seq)
		again, err := e.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "continue", RequestID: "k1"})
		if err != nil || again != first {
			t.Fatalf("sent again: seq %d (first %d), %v", again, first, err)
		}
		if _, err := e.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "abort", Reason: "x", RequestID: "k1"}); agentplane.ErrorCode(err) != agentplane.CodeRequestConflict {
			t.Fatalf("another command under the key: %v", err)
		}
		if _, err := e.eng.Command(ctx, w.ID, "bob", workflow.Command{Type: "continue", RequestID: "k1"}); agentplane.ErrorCode(err) != agentplane.CodeNotFound {
			t.Fatalf("another principal's key: %v", err)
		}
		if now, _ := e.eng.Get(ctx, w.ID, "alice"); now.Layer != 2 || now.Seq != w.Seq {
			t.Fatalf("the repeat ran on: layer %d", now.Layer)
		}

		// eight copies at once: one application, one seq
		var wg sync.WaitGroup
		seqs := make([]int64, 8)
		errs := make([]error, 8)
		for i := range seqs {
			wg.Go(func() {
				seqs[i], errs[i] = e.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "continue", RequestID: "k2"})
			})
		}
		wg.Wait()
		for i := range seqs {
			if errs[i] != nil || seqs[i] != seqs[0] {
				t.Fatalf("copy %d: seq %d (first %d), %v", i, seqs[i], seqs[0], errs[i])
			}
		}
		if w = e.wait(t, w.ID, w.Seq); w.Layer != 3 {
			t.Fatalf("eight copies of one continue ran %d layers", w.Layer-2)
		}

		// a refusal is the answer too
		stale := workflow.Command{Type: "continue", DecisionID: d1, RequestID: "k3"}
		for i := range 2 {
			if _, err := e.eng.Command(ctx, w.ID, "alice", stale); agentplane.ErrorCode(err) != agentplane.CodeAlreadyAnswered {
				t.Fatalf("%d: %v", i, err)
			}
		}
		if now, _ := e.eng.Get(ctx, w.ID, "alice"); now.Seq != w.Seq {
			t.Fatal(fmt.Sprint("a refused command changed the workflow: ", now.Status))
		}
	})
}
