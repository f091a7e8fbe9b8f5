package workflow_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/workflow"
)

// The runner owns its workflow: commands reach it as messages. Many
// goroutines command a paused workflow at once — naming its decision,
// copies under one idempotency key, and (on a shared database) through
// another engine's queue — while the runner steps its layers and readers
// look; under the race detector. Each pause is answered exactly once:
// one command applied, the others refused as answering a decision
// answered already, the keyed copies all with one answer.
func TestRunnerOwnsItsWorkflow(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, &workflow.Options{Poll: time.Millisecond}) // the paused runner looks at its queue all the time
		var other *workflow.Engine                                        // holds nothing: its commands go through the queue
		if kind != "memory" {
			other = e.engine(t, &workflow.Options{Poll: time.Millisecond})
		}
		const layers, senders = 6, 12
		src := "per_layer_validation: true\ntasks:\n  - {id: t0, tool: noop}\n"
		for i := 1; i < layers; i++ {
			src += fmt.Sprintf("  - {id: t%d, tool: noop, depends_on: [t%d]}\n", i, i-1)
		}
		ctx := t.Context()
		w := e.start(t, src, "")
		for round := 1; w.Status == workflow.StatusAwaitingDecision; round++ {
			d := w.Decision.ID
			var wg sync.WaitGroup
			seqs := make([]int64, senders)
			errs := make([]error, senders)
			keyed := func(i int) bool { return i%4 == 3 }
			for i := range senders {
				wg.Go(func() {
					eng, c := e.eng, workflow.Command{Type: "continue", DecisionID: d}
					if keyed(i) {
						c.RequestID = fmt.Sprint("k", round)
					}
					if other != nil && i%4 == 1 {
						eng = other
					}
					seqs[i], errs[i] = eng.Command(ctx, w.ID, "alice", c)
				})
				wg.Go(func() { // a reader beside them
					if _, err := e.eng.Get(ctx, w.ID, "alice"); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			applied, keyedSeq := 0, int64(-1)
			var keyedErr error
			for i, err := range errs {
				switch {
				case keyed(i) && keyedSeq < 0:
					keyedSeq, keyedErr = seqs[i], err
					if err == nil {
						applied++
					}
					continue
				case keyed(i):
					if seqs[i] != keyedSeq || agentplane.ErrorCode(err) != agentplane.ErrorCode(keyedErr) {
						t.Fatalf("round %d: keyed copies answered apart: seq %d (%v), first seq %d (%v)", round, seqs[i], err, keyedSeq, keyedErr)
					}
					continue
				case err == nil:
					applied++
					continue
				}
				if !answered(err, d) {
					t.Fatalf("round %d: command %d refused for %v", round, i, err)
				}
			}
			if keyedErr != nil && !answered(keyedErr, d) {
				t.Fatalf("round %d: the keyed command refused for %v", round, keyedErr)
			}
			if applied != 1 {
				t.Fatalf("round %d: decision %s answered %d times: %v", round, d, applied, errs)
			}
			next := e.wait(t, w.ID, w.Seq)
			if next.Layer != min(w.Layer+1, layers) {
				t.Fatalf("round %d: one continue, layer %d after %d", round, next.Layer, w.Layer)
			}
			w = next
		}
		if w.Status != workflow.StatusCompleted || w.Layer != layers {
			t.Fatalf("%s after %d layers", w.Status, w.Layer)
		}
		if q, ok := e.store.(store.Querier); ok { // one applied command per pause, as stored
			var pauses, applied int
			if err := q.Query(ctx, `SELECT COUNT(DISTINCT pause), COUNT(*) FROM workflow_commands WHERE workflow_id = ? AND status = 'applied'`,
				[]any{w.ID}, func(scan func(...any) error) error { return scan(&pauses, &applied) }); err != nil {
				t.Fatal(err)
			}
			if pauses != layers || applied != layers {
				t.Fatalf("%d commands applied to %d pauses; want %d each", applied, pauses, layers)
			}
		}
	})
}

// answered reports whether err refuses a command for answering decision d
// answered already (or, after the last, a workflow that has ended).
func answered(err error, d string) bool {
	switch agentplane.ErrorCode(err) {
	case agentplane.CodeAlreadyAnswered:
		return strings.Contains(err.Error(), d)
	case agentplane.CodeInvalidState:
		return strings.Contains(err.Error(), "takes no more commands")
	}
	return false
}
