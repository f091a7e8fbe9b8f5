package workflow_test

import (
	"context"
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
//
// No sleep orders the steps: the watcher wakes a waiter the first time it
// reads the workflow (an event may have come between a waiter's read and
// its wait), so once that wake-up came the watcher has read the workflow
// waiting, and only the answer written after it can wake the next waiter.
// The answer is written just after the watcher's read: the delay logged
// is about a whole interval, the most a write waits.
func TestWatchAcrossInstances(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		ctx, stop := context.WithCancel(context.Background())
		other := e.engine(t, &workflow.Options{Poll: time.Hour}) // no polling of its own: only Watch wakes it
		watching := make(chan struct{})
		go func() {
			defer close(watching)
			other.Watch(ctx, 50*time.Millisecond)
		}()
		defer func() { stop(); <-watching }()
		woken := func(ch <-chan struct{}, what string) {
			t.Helper()
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal(what)
			}
		}
		var lat []time.Duration
		for range 16 {
			w := e.start(t, threeLayers, "")
			if w.Status != workflow.StatusAwaitingApproval {
				t.Fatalf("%+v", w)
			}
			woken(other.Changes(w.ID), "the watcher never read the waiting workflow")
			woke := other.Changes(w.ID) // only a new event wakes it now
			start := time.Now()
			if _, err := e.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: yes()}); err != nil {
				t.Fatal(err)
			}
			woken(woke, "the other instance was not woken by the answer written here")
			lat = append(lat, time.Since(start))
			e.wait(t, w.ID, w.Seq)
		}
		slices.Sort(lat)
		t.Logf("%s: write on one engine just after the other's watcher read → waiter on the other woken, %d writes: p50 %v, p90 %v, max %v", kind, len(lat), lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1])
	})
}
