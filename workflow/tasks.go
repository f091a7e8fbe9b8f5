package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
)

// A workflow's task states are rows of workflow_task_history, each from
// a checkpoint on (since): a task's current state is its newest row, a
// checkpoint's its newest row from at or before the checkpoint — unless a
// write ended it (until) by then: the task was dropped. A write carries
// only what changed since the last one, so it does not cost the
// workflow's size.

// taskDiff is what changed in a workflow's tasks since an earlier state.
type taskDiff struct {
	at    []int    // the places of the tasks new or changed, in order
	gone  []string // ids no longer there
	all   bool     // the earlier state is unknown: at holds every task
	moved bool     // tasks changed places (apply copies them all)
}

// taskStates is the tasks as they were at a write or a checkpoint:
// shallow copies, compared with sameTask; nil is not known.
type taskStates struct{ tasks []TaskRun }

// diffTasks numbers the new tasks (after the last one's n; tasks are only
// ever appended) and returns what differs from before. Tasks are found
// in before at their own place first, so the usual diff reads each task
// once and hashes nothing.
func diffTasks(tasks []TaskRun, before *taskStates) taskDiff {
	prev := 0
	for i := range tasks {
		if tasks[i].n == 0 {
			tasks[i].n = prev + 1
		}
		prev = tasks[i].n
	}
	var d taskDiff
	if before == nil {
		d.all = true
		for i := range tasks {
			d.at = append(d.at, i)
		}
		return d
	}
	old := before.tasks
	var place map[string]int // built when a task is not at its place
	kept := 0
	for i := range tasks {
		var b *TaskRun
		if i < len(old) && old[i].ID == tasks[i].ID {
			b = &old[i]
		} else {
			if i < len(old) {
				d.moved = true
			}
			if place == nil {
				place = make(map[string]int, len(old))
				for j := range old {
					place[old[j].ID] = j
				}
			}
			if j, ok := place[tasks[i].ID]; ok {
				b = &old[j]
			}
		}
		if b != nil {
			kept++
		}
		if b == nil || !sameTask(b, &tasks[i]) {
			d.at = append(d.at, i)
		}
	}
	if kept < len(old) {
		d.moved = true
		now := make(map[string]bool, len(tasks))
		for _, t := range tasks {
			now[t.ID] = true
		}
		for _, t := range old {
			if !now[t.ID] {
				d.gone = append(d.gone, t.ID)
			}
		}
	}
	return d
}

// apply brings states up to date with the diff that was written.
func (d taskDiff) apply(states *taskStates, tasks []TaskRun) *taskStates {
	if d.all || d.moved || states == nil {
		return &taskStates{tasks: slices.Clone(tasks)}
	}
	for _, i := range d.at {
		if i < len(states.tasks) {
			states.tasks[i] = tasks[i]
		} else {
			states.tasks = append(states.tasks, tasks[i])
		}
	}
	return states
}

// sameTask reports whether a task is as it was. The runner replaces what
// a task's fields hold and never changes what they point to (see
// Workflow.copy), so the error and the arguments' map are compared by
// identity: holding the same ones, they are unchanged.
func sameTask(a, b *TaskRun) bool {
	return a.ID == b.ID && a.Tool == b.Tool && a.Status == b.Status && a.Layer == b.Layer && a.Attempts == b.Attempts &&
		a.RequestID == b.RequestID && a.Key == b.Key && a.Added == b.Added && a.Approval == b.Approval && a.Error == b.Error &&
		reflect.ValueOf(a.Args).UnsafePointer() == reflect.ValueOf(b.Args).UnsafePointer() &&
		slices.Equal(a.DependsOn, b.DependsOn) && bytes.Equal(a.Resolved, b.Resolved) && bytes.Equal(a.Output, b.Output)
}

// writeStates records a write's task states in workflow_task_history,
// after the checkpoint's own row: with a checkpoint, the states it holds
// that differ from the current ones (rows from its n: the checkpoint holds
// them), then the workflow's states that differ from those (rows from
// one past its counter, above every checkpoint so far and at or below the
// next one's n: no checkpoint holds them yet). A new row replaces its
// task's older ones by being newer (nothing writes them); a row no
// checkpoint holds yet is replaced in place (the upsert); the rows of
// tasks no longer there are ended. With prune (older checkpoints were
// pruned), it then drops the states no kept checkpoint holds. buf is room
// to encode the states in.
func (j *sqlJournal) writeStates(ctx context.Context, tx store.Tx, s *saved, buf []byte) error {
	id := s.w.ID
	next := int64(s.w.Counter) + 1
	vals := make([]any, 0, 6*(len(s.cpTasks.at)+len(s.tasks.at)))
	var err error
	if s.cp != nil {
		n := int64(s.cp.n)
		if err := endStates(ctx, tx, id, s.cpTasks, n); err != nil {
			return err
		}
		if vals, buf, err = appendStates(vals, buf, id, s.cp.w.Tasks, s.cpTasks, n); err != nil {
			return err
		}
	}
	if s.tasks.all { // without a checkpoint only: with one, they differ from its states, which are known
		if err := endStates(ctx, tx, id, s.tasks, next); err != nil {
			return err
		}
	}
	if vals, _, err = appendStates(vals, buf, id, s.w.Tasks, s.tasks, next); err != nil {
		return err
	}
	if err := j.insertStates.insert(ctx, tx, vals); err != nil {
		return err
	}
	if err := endStates(ctx, tx, id, taskDiff{gone: s.tasks.gone}, next); err != nil {
		return err
	}
	if s.cp == nil || !s.prune {
		return nil // the oldest kept checkpoint is the same: every state that ended ends after it
	}
	// a state no kept checkpoint holds ended, or was replaced, at or
	// before the oldest kept one (only a state from before it can be:
	// the others are not probed)
	_, err = tx.Exec(ctx, `WITH oldest AS (SELECT MIN(cp_n) AS n FROM `+keptCheckpoints+`)
		DELETE FROM workflow_task_history WHERE workflow_id = ?
		AND (until <= (SELECT n FROM oldest) OR since < (SELECT n FROM oldest) AND EXISTS (SELECT 1 FROM workflow_task_history x
			WHERE x.workflow_id = workflow_task_history.workflow_id AND x.id = workflow_task_history.id
			AND x.since > workflow_task_history.since AND x.since <= (SELECT n FROM oldest)))`, id, KeepCheckpoints, id)
	return err
}

// stateRows inserts state rows (appendStates'), a row no checkpoint
// holds yet replaced in place.
func stateRows() *rows {
	return newRows(`INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state) VALUES `, 6,
		` ON CONFLICT (workflow_id, id, since) DO UPDATE SET until = excluded.until, n = excluded.n, state = excluded.state`)
}

// endStates ends, at until, the current states of the tasks d says are
// gone — of every task when d does not know the states before (d.all:
// the caller then writes them all again).
func endStates(ctx context.Context, tx store.Tx, id string, d taskDiff, until int64) error {
	if d.all {
		_, err := tx.Exec(ctx, `UPDATE workflow_task_history SET until = ? WHERE workflow_id = ? AND until = ?`, until, id, openUntil)
		return err
	}
	for _, g := range d.gone {
		if _, err := tx.Exec(ctx, `UPDATE workflow_task_history SET until = ? WHERE workflow_id = ? AND id = ? AND until = ?`, until, id, g, openUntil); err != nil {
			return err
		}
	}
	return nil
}

// appendStates appends the rows of the states d says changed, from since
// on, to vals.
func appendStates(vals []any, buf []byte, id string, tasks []TaskRun, d taskDiff, since int64) ([]any, []byte, error) {
	for _, i := range d.at {
		t := &tasks[i]
		var err error
		if buf, err = appendTaskRun(buf[:0], t); err != nil {
			return vals, buf, err
		}
		vals = append(vals, id, t.ID, since, openUntil, t.n, string(buf))
	}
	return vals, buf, nil
}

// maxRows is how many rows one statement writes at most: a write of more
// is several statements, so a statement's text takes one of few forms
// (each prepared once).
const maxRows = 16

// rows is an INSERT of rows of width values each, its statement written
// out once for every count of rows up to maxRows (a write builds none).
type rows struct {
	width int
	texts [maxRows]string // texts[k-1]: the statement of k rows
}

// newRows makes the INSERT whose statement is head (up to VALUES), the
// rows, then tail.
func newRows(head string, width int, tail string) *rows {
	r := &rows{width: width}
	row := "(" + store.Params(width) + ")"
	var q strings.Builder
	for k := range maxRows {
		q.Reset()
		q.WriteString(head)
		for i := range k + 1 {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(row)
		}
		q.WriteString(tail)
		r.texts[k] = q.String()
	}
	return r
}

// insert inserts vals (row after row) with as few statements as maxRows
// allows.
func (r *rows) insert(ctx context.Context, tx store.Tx, vals []any) error {
	if len(vals)%r.width != 0 {
		return fmt.Errorf("workflow: %d values are not rows of %d", len(vals), r.width)
	}
	for len(vals) > 0 {
		k := min(len(vals)/r.width, maxRows)
		if _, err := tx.Exec(ctx, r.texts[k-1], vals[:k*r.width]...); err != nil {
			return err
		}
		vals = vals[k*r.width:]
	}
	return nil
}

// scanTask reads a task row (n, state).
func scanTask(scan func(...any) error, dst *TaskRun) error {
	var n int
	var state string
	if err := scan(&n, &state); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(state), dst); err != nil {
		return agentplane.Errorf(agentplane.CodeInternal, "workflow: a stored task is corrupt: %v", err)
	}
	dst.n = n
	return nil
}

// newestStates is a query of each task's newest row of
// workflow_task_history where cond holds (migration 8: the newest is its
// state, unless until says a write ended it), with its columns cols and
// until: SQLite takes a group's bare columns from the row of its MAX,
// PostgreSQL keeps the first of each task's rows newest first (DISTINCT
// ON). Either reads each of the workflow's rows once, in the primary
// key's order; a probe of each row for a newer one cost twice as much at
// a thousand tasks, and PostgreSQL's plan of it 30 times.
func newestStates(dialect, cols, cond string) string {
	if dialect == store.Postgres {
		return `(SELECT DISTINCT ON (workflow_id, id) ` + cols + `, until FROM workflow_task_history WHERE ` + cond +
			` ORDER BY workflow_id DESC, id DESC, since DESC) AS newest`
	}
	return `(SELECT ` + cols + `, until, MAX(since) FROM workflow_task_history WHERE ` + cond + ` GROUP BY workflow_id, id) AS newest`
}

// attachTasks reads the current task states of the workflows whose tasks
// are not in their document, in one read per hundred workflows.
func (j *sqlJournal) attachTasks(ctx context.Context, ws []*Workflow) error {
	byID := map[string]*Workflow{}
	var ids []any
	for _, w := range ws {
		if w.Tasks == nil {
			byID[w.ID] = w
			ids = append(ids, w.ID)
		}
	}
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 100)]
		ids = ids[len(batch):]
		err := j.q.Query(ctx, `SELECT workflow_id, n, state FROM `+newestStates(j.q.Dialect(), `workflow_id, n, state`, `workflow_id IN (`+store.Params(len(batch))+`)`)+`
			WHERE until = `+strconv.FormatInt(openUntil, 10)+` ORDER BY workflow_id, n`, batch, func(scan func(...any) error) error {
			var wid string
			var t TaskRun
			err := scanTask(func(dst ...any) error { return scan(append([]any{&wid}, dst...)...) }, &t)
			if err == nil {
				byID[wid].Tasks = append(byID[wid].Tasks, t)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// restore reads the workflow as a kept checkpoint saved it.
func (j *sqlJournal) restore(ctx context.Context, id, checkpointID string) (*Workflow, error) {
	var w *Workflow
	var n int64
	err := j.q.Query(ctx, `SELECT cp_n, cp_state FROM `+keptCheckpoints+` WHERE cp_id = ?`, []any{id, KeepCheckpoints, checkpointID},
		func(scan func(...any) error) error {
			var doc string
			if err := scan(&n, &doc); err != nil {
				return err
			}
			var err error
			w, err = unmarshalWorkflow([]byte(doc))
			return err
		})
	switch {
	case err != nil:
		return nil, err
	case w == nil:
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "checkpoint %q is no longer kept", checkpointID)
	case w.Tasks != nil:
		return w, nil // saved with its tasks inside, before the task rows
	}
	err = j.q.Query(ctx, `SELECT n, state FROM `+newestStates(j.q.Dialect(), `n, state`, `workflow_id = ? AND since <= ?`)+` WHERE until > ? ORDER BY n`,
		[]any{id, n, n}, func(scan func(...any) error) error {
			var t TaskRun
			err := scanTask(scan, &t)
			w.Tasks = append(w.Tasks, t)
			return err
		})
	return w, err
}
