package workflow_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentplane/agentplane/store"
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
			if _, err := tx.Exec(ctx, `INSERT INTO workflow_checkpoints (workflow_id, n, id, layer, state, created) VALUES (?, 1, 'wf_legacy-c1', 0, ?, ?)`,
				w.ID, string(cpDoc), now.UnixNano()); err != nil {
				return err
			}
			for _, ev := range events {
				ev.WorkflowID, ev.Time = w.ID, now
				data, _ := json.Marshal(ev)
				if _, err := tx.Exec(ctx, `INSERT INTO workflow_events (workflow_id, seq, type, data) VALUES (?, ?, ?, ?)`, w.ID, ev.Seq, ev.Type, string(data)); err != nil {
					return err
				}
			}
			return nil
		})
		if err := e.core.Store().Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
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
		var rows int
		var state string
		q := e.core.Store().(store.Querier)
		if err := q.Query(ctx, `SELECT (SELECT COUNT(*) FROM workflow_tasks WHERE workflow_id = ?), state FROM workflows WHERE id = ?`, []any{w.ID, w.ID},
			func(scan func(...any) error) error { return scan(&rows, &state) }); err != nil {
			t.Fatal(err)
		}
		var head struct{ Tasks []workflow.TaskRun }
		json.Unmarshal([]byte(state), &head)
		if rows != 2 || head.Tasks != nil {
			t.Fatalf("%d task rows, and the document holds %d tasks; want 2 rows and none inside", rows, len(head.Tasks))
		}
	})
}
