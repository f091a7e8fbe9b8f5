package workflow_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/agentplane/agentplane/workflow"
)

// TestWatchAcrossInstances: a workflow stream on one instance waits on
// Changes; the workflow is answered and runs on another instance (another
// engine on the same database). With Watch running, the waiting instance
// is woken each time; the delay from the write to the wake-up is measured
// and logged. Without Watch nothing would wake it but its own poll.
func TestWatchAcrossInstances(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		other := e.engine(t, &workflow.Options{Poll: time.Hour}) // no polling of its own: only Watch wakes it
		go other.Watch(ctx, 50*time.Millisecond)
		var lat []time.Duration
		for range 16 {
			w := e.start(t, threeLayers, "")
			if w.Status != workflow.StatusAwaitingApproval {
				t.Fatalf("%+v", w)
			}
			woke := other.Changes(w.ID)
			time.Sleep(120 * time.Millisecond) // the watcher has seen it waiting: only a new event wakes it now
			select {
			case <-woke:
				woke = other.Changes(w.ID) // a first sight's wake-up
				time.Sleep(120 * time.Millisecond)
			default:
			}
			time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond) // a write at any point of the watcher's interval
			start := time.Now()
			if _, err := e.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: yes()}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-woke:
				lat = append(lat, time.Since(start))
			case <-time.After(10 * time.Second):
				t.Fatal("the other instance was not woken by the answer written here")
			}
			e.wait(t, w.ID, w.Seq)
		}
		slices.Sort(lat)
		t.Logf("%s: write on one engine → waiter on another woken, %d writes: p50 %v, p90 %v, max %v", kind, len(lat), lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1])
	})
}
