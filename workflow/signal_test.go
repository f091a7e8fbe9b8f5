package workflow_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/workflow"
)

// The engine keeps a workflow's change signal only while someone waits
// on it, on SQLite too (where Watch, which used to prune them, does not
// run): after many workflows, each waited on and commanded from several
// goroutines, none is left; a channel Changes handed out is forgotten a
// Poll after it was asked for.
func TestSignalsAreForgotten(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				w, err := e.eng.Start(ctx, workflow.Start{SessionID: e.session, Principal: "alice", Definition: def(t, fourLayers)})
				if err != nil {
					t.Error(err)
					return
				}
				for w.Status != workflow.StatusCompleted {
					if w, err = e.eng.Wait(ctx, w.ID, "alice", w.Seq); err != nil {
						t.Error(err)
						return
					}
					if w.Status == workflow.StatusAwaitingDecision {
						if _, err := e.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "continue", DecisionID: w.Decision.ID}); err != nil {
							t.Error(err)
							return
						}
					}
				}
				waitCtx, cancel := context.WithCancel(ctx) // a waiter that gives up
				cancel()
				e.eng.Wait(waitCtx, w.ID, "alice", w.Seq)
			}
		})
	}
	wg.Wait()
	if n := workflow.Signals(e.eng); n != 0 {
		t.Fatalf("%d change signals kept after 40 workflows ended with nobody waiting", n)
	}
	// Changes hands out channels nobody counts back in: they are closed
	// and forgotten once a Poll went by
	var ids []string
	for range 3 {
		w := e.start(t, fourLayers, "")
		ids = append(ids, w.ID)
	}
	var chans []<-chan struct{}
	for _, id := range ids {
		chans = append(chans, e.eng.Changes(id))
	}
	if n := workflow.Signals(e.eng); n != 3 {
		t.Fatalf("%d signals, want the 3 asked for", n)
	}
	workflow.SweepAt(e.eng, time.Now().Add(e.eng.Poll()/2)) // too early: kept
	if n := workflow.Signals(e.eng); n != 3 {
		t.Fatalf("%d signals half a Poll later, want 3", n)
	}
	workflow.SweepAt(e.eng, time.Now().Add(2*e.eng.Poll()))
	if n := workflow.Signals(e.eng); n != 0 {
		t.Fatalf("%d signals two Polls later, want 0", n)
	}
	for i, ch := range chans {
		select {
		case <-ch:
		default:
			t.Fatalf("the channel of %s was forgotten, not closed: its holder would not look again", ids[i])
		}
	}
}
