package workflow_test

import (
	"context"
	"testing"

	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/workflow"
)

// historyRow is a row of workflow_task_history: a task's state from a
// checkpoint on (since), unless a write ended it (until).
type historyRow struct {
	id           string
	since, until int64
	state        string
}

// historyOf reads a workflow's rows of workflow_task_history.
func historyOf(t *testing.T, q store.Querier, workflowID string) []historyRow {
	t.Helper()
	var rows []historyRow
	err := q.Query(context.Background(), `SELECT id, since, until, state FROM workflow_task_history WHERE workflow_id = ?`, []any{workflowID},
		func(scan func(...any) error) error {
			var r historyRow
			err := scan(&r.id, &r.since, &r.until, &r.state)
			rows = append(rows, r)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// heldAt is, by task, the row holding its state at checkpoint n — its
// newest from at or before n, unless ended by n — or, with n < 0, its
// current state: its newest row, unless ended. It is the rule the reads
// follow, written out in Go to check them against.
func heldAt(rows []historyRow, n int64) map[string]historyRow {
	newest := map[string]historyRow{}
	for _, r := range rows {
		if n >= 0 && r.since > n {
			continue
		}
		if b, ok := newest[r.id]; !ok || r.since > b.since {
			newest[r.id] = r
		}
	}
	for id, r := range newest {
		if n < 0 && r.until != workflow.OpenUntil || n >= 0 && r.until <= n {
			delete(newest, id)
		}
	}
	return newest
}
