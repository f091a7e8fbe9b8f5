package workflow_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/workflow"
)

// TestDocumentWithTasksInside: a workflow written before the task rows,
// its tasks inside its document and a checkpoint holding the whole
// document, is taken over, rolled back to that checkpoint and run to the
// end; its first write moves its tasks into rows.
func TestDocumentWithTasksInside(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		ctx := context.Background()
		now := time.Now().UTC()
		w := workflow.Workflow{ID: "wf_legacy", SessionID: e.session, Principal: "alice", Status: workflow.StatusInterrupted,
			ResumePolicy: workflow.ResumeManual, MaxAttempts: 3, Layer: 1, Seq: 3, Counter: 1, Created: now, Updated: now,
			Interruption: &workflow.Interruption{CheckpointID: "wf_legacy-c1", Checkpoints: []string{"wf_legacy-c1"}},
			Tasks: []workflow.TaskRun{
				{Task: workflow.Task{ID: "a", Tool: "noop"}, Status: workflow.TaskCompleted, Layer: 1, Attempts: 1, Key: "wf_legacy-a", Output: json.RawMessage(`{"ok":true}`)},
				{Task: workflow.Task{ID: "b", Tool: "count_words", Args: map[string]any{"text": "one two"}, DependsOn: []string{"a"}}, Status: workflow.TaskPending, Key: "wf_legacy-b"},
			}}
		doc, _ := json.Marshal(w)
		at := w
		at.Tasks = []workflow.TaskRun{{Task: w.Tasks[0].Task, Status: workflow.TaskPending, Key: "wf_legacy-a"}, w.Tasks[1]}
		at.Status, at.Interruption, at.Layer = workflow.StatusRunning, nil, 0
		cpDoc, _ := json.Marshal(at)
		events := []workflow.Event{{Seq: 1, Type: workflow.EventStarted}, {Seq: 2, Type: workflow.EventCheckpointSaved, CheckpointID: "wf_legacy-c1"}, {Seq: 3, Type: workflow.EventInterrupted}}
		op := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO workflows (id, session_id, principal, status, state, seq, commands, owner, lease, lease_until, created, updated)
				VALUES (?, ?, 'alice', ?, ?, 3, 0, 'old', 1, 0, ?, ?)`, w.ID, e.session, w.Status, string(doc), now.UnixNano(), now.UnixNano()); err != nil {
				return err
			}
			for _, ev := range events {
				ev.WorkflowID, ev.Time = w.ID, now
				data, _ := json.Marshal(ev)
				if _, err := tx.Exec(ctx, `INSERT INTO workflow_events (workflow_id, seq, type, data) VALUES (?, ?, ?, ?)`, w.ID, ev.Seq, ev.Type, string(data)); err != nil {
					return err
				}
			}
			// the checkpoint in its event's row, as migration 7 moves it
			if _, err := tx.Exec(ctx, `UPDATE workflow_events SET cp_n = 1, cp_id = 'wf_legacy-c1', cp_layer = 0, cp_state = ?, cp_created = ? WHERE workflow_id = ? AND seq = 2`,
				string(cpDoc), now.UnixNano(), w.ID); err != nil {
				return err
			}
			return nil
		})
		if err := e.store.Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
			t.Fatal(err)
		}
		if err := e.eng.ClaimDue(ctx); err != nil {
			t.Fatal(err)
		}
		got := e.command(t, &w, workflow.Command{Type: workflow.CommandCheckpointResponse, CheckpointID: "wf_legacy-c1", Decision: workflow.ResumeRollback})
		if got.Status != workflow.StatusCompleted {
			got = e.wait(t, w.ID, got.Seq)
		}
		if got.Status != workflow.StatusCompleted || len(got.Tasks) != 2 || got.Tasks[0].Attempts != 2 || string(got.Tasks[1].Output) != `{"words":2}` {
			t.Fatalf("after the rollback: %+v", got)
		}
		var state string
		q := e.store.(store.Querier)
		if err := q.Query(ctx, `SELECT state FROM workflows WHERE id = ?`, []any{w.ID},
			func(scan func(...any) error) error { return scan(&state) }); err != nil {
			t.Fatal(err)
		}
		rows := len(heldAt(historyOf(t, q, w.ID), -1))
		var head struct{ Tasks []workflow.TaskRun }
		json.Unmarshal([]byte(state), &head)
		if rows != 2 || head.Tasks != nil {
			t.Fatalf("%d current task states, and the document holds %d tasks; want 2 rows and none inside", rows, len(head.Tasks))
		}
		// its events: the three written a row each, then those written a
		// commit a row, read as one sequence (env.events checks the seqs)
		evs := e.events(t, w.ID)
		if len(evs) <= len(events) || evs[2].Type != workflow.EventInterrupted || evs[len(evs)-1].Type != workflow.EventCompleted {
			t.Fatalf("events: %s", types(evs))
		}
	})
}

// TestEventsOneRowPerCommit: a commit's events are one row of
// workflow_events. A chain of three tasks is four commits (its start,
// then each task's result with its layer's end and the next layer's
// start) of 15 events.
func TestEventsOneRowPerCommit(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		w := e.start(t, "tasks:\n  - {id: a, tool: noop}\n  - {id: b, tool: noop, depends_on: [a]}\n  - {id: c, tool: noop, depends_on: [b]}\n", "")
		if w.Status != workflow.StatusCompleted {
			t.Fatalf("status %s", w.Status)
		}
		var rows int
		if err := e.store.(store.Querier).Query(context.Background(), `SELECT COUNT(*) FROM workflow_events WHERE workflow_id = ?`, []any{w.ID},
			func(scan func(...any) error) error { return scan(&rows) }); err != nil {
			t.Fatal(err)
		}
		if evs := e.events(t, w.ID); rows != 4 || len(evs) != 15 {
			t.Fatalf("%d events in %d rows; want 15 in 4", len(evs), rows)
		}
	})
}

// countingStore counts the commits made through it, and the statements
// of the last one (when commits come one at a time).
type countingStore struct {
	*sqlite.Store
	commits atomic.Int64
	last    atomic.Int64
}

func (s *countingStore) Commit(ctx context.Context, c *store.Commit) error {
	s.commits.Add(1)
	before := s.Store.Stats().Statements
	err := s.Store.Commit(ctx, c)
	s.last.Store(s.Store.Stats().Statements - before)
	return err
}

// countedEngine is an engine on a counting SQLite store, with one tool
// of the impact given that does nothing, and a session of alice's.
func countedEngine(t *testing.T, name string, impact tool.Impact, poll time.Duration) (*countingStore, *workflow.Engine, *agentplane.Session) {
	t.Helper()
	ctx := context.Background()
	sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"), &sqlite.Options{Extensions: []store.Extension{workflow.Extension}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := &countingStore{Store: sq}
	fn := &tool.Func{S: tool.Spec{Name: name, Usage: "Does nothing.", Impact: impact, Risk: tool.RiskLow, InputSchema: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }}
	c, err := core.New(ctx, core.Source{YAML: []byte("version: 1\nmodes: [{key: m, default: true, toolboxes: [t]}]\ntoolboxes: [{id: t, catalogs: [modes], tools: [" + name + "]}]\n"), Name: "c.yaml"},
		&core.Options{Store: st, Tools: []tool.Tool{fn}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.Start(ctx, core.Start{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	// a lease renewal is a commit too: none falls within a test's counts
	eng, err := workflow.New(c, st, &workflow.Options{Poll: poll, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(time.Minute) })
	return st, eng, s
}

// TestCommitsPerRun counts the commits a chain of three read tasks makes
// from its start to its end: the start (with the first layer's), then
// each task's result in the gate's commit together with its layer's end
// and the next layer's start (the last one's with the completion).
func TestCommitsPerRun(t *testing.T) {
	ctx := context.Background()
	st, eng, s := countedEngine(t, "noop", tool.ImpactRead, time.Second)
	sq := st.Store
	before, ran := st.commits.Load(), sq.Stats().Statements
	w, err := eng.Start(ctx, workflow.Start{SessionID: s.ID, Principal: "alice", Definition: &workflow.Definition{Tasks: []workflow.Task{
		{ID: "a", Tool: "noop"}, {ID: "b", Tool: "noop", DependsOn: []string{"a"}}, {ID: "c", Tool: "noop", DependsOn: []string{"b"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if w, err = eng.Wait(ctx, w.ID, "alice", 0); err != nil || w.Status != workflow.StatusCompleted {
		t.Fatalf("%+v %v", w, err)
	}
	n, stmts := st.commits.Load()-before, sq.Stats().Statements-ran
	t.Logf("a 3×1 run: %d commits, %d statements", n, stmts)
	if n > 5 {
		t.Fatalf("a 3×1 run made %d commits; want at most 5", n)
	}
	// the start's 4 (the session read, the workflow, its events with its
	// first checkpoint, its task states), and per task the gate's 2 (the
	// session with the request key, the record) with the layer's end's 3
	// (the workflow, events with the checkpoint, task states), and the
	// command queue read once at the end — no read of it per layer,
	// nothing read back for Wait, and no request row: the task state
	// keeps a read task's result (23 with it)
	if stmts > 20 {
		t.Fatalf("a 3×1 run ran %d statements; want at most 20", stmts)
	}
	var keyed int
	if err := sq.Query(ctx, `SELECT count(*) FROM requests WHERE request_id LIKE ?`, []any{w.ID + "-%"}, func(scan func(...any) error) error { return scan(&keyed) }); err != nil || keyed != 0 {
		t.Fatalf("%d request rows for the run's read tasks (%v); want none", keyed, err)
	}
	// the layers' ends leave the status column alone (running, as the
	// start wrote it); the last one writes it
	var status string
	if err := sq.Query(ctx, `SELECT status FROM workflows WHERE id = ?`, []any{w.ID}, func(scan func(...any) error) error { return scan(&status) }); err != nil || status != workflow.StatusCompleted {
		t.Fatalf("stored status %q, %v; want completed", status, err)
	}
}

// TestCommandAtOnceStatements counts the statements of the write of a
// command the runner carries out at once (a rejected approval, which
// ends the workflow): the workflow's update, which also numbers the
// command (it took a statement of its own before), its events, the look
// for a command queued before it, and the command's row.
func TestCommandAtOnceStatements(t *testing.T) {
	ctx := context.Background()
	st, eng, s := countedEngine(t, "send", tool.ImpactExternal, time.Minute) // no poll of the queue in between
	w, err := eng.Start(ctx, workflow.Start{SessionID: s.ID, Principal: "alice", Definition: &workflow.Definition{Tasks: []workflow.Task{{ID: "a", Tool: "send"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if w, err = eng.Wait(ctx, w.ID, "alice", 0); err != nil || w.Approval == nil {
		t.Fatalf("want a pause at the approval: %+v %v", w, err)
	}
	commits := st.commits.Load()
	no := false
	if _, err := eng.Command(ctx, w.ID, "alice", workflow.Command{Type: workflow.CommandApprovalResponse, CheckpointID: w.Approval.CheckpointID, Approved: &no}); err != nil {
		t.Fatal(err)
	}
	if n := st.commits.Load() - commits; n != 1 {
		t.Fatalf("the rejection made %d commits; want 1, carried out at once", n)
	}
	n := st.last.Load()
	t.Logf("a rejection carried out at once: %d statements", n)
	if n > 4 {
		t.Fatalf("a rejection carried out at once wrote %d statements; want at most 4", n)
	}
	if w, err = eng.Wait(ctx, w.ID, "alice", w.Seq); err != nil || w.Status != workflow.StatusAborted {
		t.Fatalf("after the rejection: %+v %v", w, err)
	}
}
