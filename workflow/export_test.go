package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/store"
)

// OpenUntil is the until of a task state no write has ended.
const OpenUntil = openUntil

// TaskStates reads a workflow's task states from st as the journal does:
// the current ones, or with checkpointID those the kept checkpoint holds.
func TaskStates(ctx context.Context, st store.Store, id, checkpointID string) ([]TaskRun, error) {
	j := newSQLJournal(st, st.(store.Querier))
	if checkpointID != "" {
		w, err := j.restore(ctx, id, checkpointID)
		if err != nil {
			return nil, err
		}
		return w.Tasks, nil
	}
	w := &Workflow{ID: id}
	err := j.attachTasks(ctx, []*Workflow{w})
	return w.Tasks, err
}

// CheckWrites makes the engine read back every workflow it writes, and
// at every checkpoint each checkpoint kept, and fail t where what was
// stored differs from what the runner held: the rows written are exactly
// what changed, and the task history restores every kept checkpoint.
// Get, asked once a write is in the database and before the runner took
// it as written (its events can be read already), must answer that
// write too, not the runner's last.
func CheckWrites(t testing.TB, e *Engine) {
	var mu sync.Mutex
	saved := map[string][]byte{} // checkpoint id -> the workflow when it was saved
	e.written = func(ctx context.Context, w *Workflow, cp *Checkpoint, events []Event) {
		checkEvents(ctx, t, e, w.ID, events)
		want, _ := json.Marshal(w)
		r, err := e.j.load(ctx, w.ID)
		if err != nil {
			t.Errorf("read back %s: %v", w.ID, err)
			return
		}
		if got, _ := json.Marshal(r.w); !bytes.Equal(got, want) {
			t.Errorf("workflow %s read back differs:\n got %s\nwant %s", w.ID, got, want)
		}
		if g, err := e.Get(ctx, w.ID, w.Principal); err != nil {
			t.Errorf("get %s: %v", w.ID, err)
		} else if got, _ := json.Marshal(g); !bytes.Equal(got, want) {
			t.Errorf("workflow %s: Get, after the write reached the database, answered another:\n got %s\nwant %s", w.ID, got, want)
		}
		if cp == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		saved[cp.ID], _ = json.Marshal(cp.w)
		cps, err := e.j.checkpoints(ctx, w.ID)
		if err != nil {
			t.Errorf("checkpoints of %s: %v", w.ID, err)
		}
		for _, c := range cps {
			old, err := e.j.restore(ctx, w.ID, c.ID)
			if err != nil {
				t.Errorf("restore %s: %v", c.ID, err)
				continue
			}
			if got, _ := json.Marshal(old); saved[c.ID] != nil && !bytes.Equal(got, saved[c.ID]) {
				t.Errorf("checkpoint %s restored differs:\n got %s\nwant %s", c.ID, got, saved[c.ID])
			}
		}
	}
}

// checkEvents reads back a write's events from each one on, as many as
// there are and one fewer: the events as written, in order, each with
// its seq, wherever in a stored row the read starts and ends.
func checkEvents(ctx context.Context, t testing.TB, e *Engine, id string, events []Event) {
	for k := range events {
		for _, limit := range []int{len(events) - k, len(events) - k - 1} {
			if limit == 0 {
				continue
			}
			raws, seqs, err := e.j.events(ctx, id, events[k].Seq-1, limit)
			if err != nil {
				t.Errorf("events of %s after %d: %v", id, events[k].Seq-1, err)
				return
			}
			if len(raws) != limit || len(seqs) != limit {
				t.Errorf("events of %s after %d, at most %d: got %d", id, events[k].Seq-1, limit, len(raws))
				return
			}
			for i := range limit {
				want, _ := appendEvent(nil, &events[k+i])
				if seqs[i] != events[k+i].Seq || !bytes.Equal(raws[i], want) {
					t.Errorf("event %d of %s read back as %d %s, want %s", events[k+i].Seq, id, seqs[i], raws[i], want)
				}
			}
		}
	}
}

// Restore reads a workflow as one of its kept checkpoints saved it.
func Restore(ctx context.Context, e *Engine, id, checkpointID string) (*Workflow, error) {
	return e.j.restore(ctx, id, checkpointID)
}

// Signals is how many workflows' change signals the engine keeps.
func Signals(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.changed)
}

// SweepAt sweeps the engine's change signals as it would at the time
// given (a test need not wait a Poll for it).
func SweepAt(e *Engine, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sweep(now)
}

// LeaseUntil is when the engine's claim on a workflow runs out, as its
// journal holds it (zero: released).
func LeaseUntil(e *Engine, id string) time.Time {
	row, err := e.j.load(context.Background(), id)
	if err != nil || row.leaseUntil == 0 {
		return time.Time{}
	}
	return time.Unix(0, row.leaseUntil)
}

// Steal claims a workflow of the engine's memory journal as another
// engine would once its lease ran out: the runner's lease has moved on.
func Steal(e *Engine, id string) {
	j := e.j.(*memJournal)
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.workflows[id]
	m.owner, m.lease = "thief", m.lease+1
}

// LiveStatuses is liveStatuses: every status but the terminal ones,
// quoted for SQL.
const LiveStatuses = liveStatuses

// Looping runs f as each of the engine's runners begins its loop, before
// its first turn.
func Looping(e *Engine, f func()) { e.looping = f }

// Stopping is closed once the engine's Close began.
func Stopping(e *Engine) <-chan struct{} { return e.stop }
