package workflow_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/workflow"
)

// TestLeanMigrationKeepsCheckpoints: migration 5 rebuilds SQLite's
// workflow_checkpoints without its unique index on id; every row a
// database of version 4 holds is there after it, column for column, and
// the table has its primary key's index only.
func TestLeanMigrationKeepsCheckpoints(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	v4 := workflow.Extension
	v4.Migrations = map[string][]string{store.SQLite: workflow.Extension.Migrations[store.SQLite][:4]}
	open := func(ext store.Extension) {
		st, err := sqlite.Open(ctx, path, &sqlite.Options{Extensions: []store.Extension{ext}})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	open(v4)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO workflow_checkpoints (workflow_id, n, id, layer, state, created) VALUES
		('wf_a', 1, 'wf_a-c1', 2, '{"id":"wf_a","layer":2}', 42), ('wf_a', 2, 'wf_a-c2', 3, '{"id":"wf_a","layer":3}', 43), ('wf_b', 1, 'wf_b-c1', 0, '{}', 44)`); err != nil {
		t.Fatal(err)
	}
	read := func() [][]any {
		rows, err := db.Query(`SELECT workflow_id, n, id, layer, state, created FROM workflow_checkpoints ORDER BY workflow_id, n`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out [][]any
		for rows.Next() {
			var wf, id, state string
			var n, layer, created int64
			if err := rows.Scan(&wf, &n, &id, &layer, &state, &created); err != nil {
				t.Fatal(err)
			}
			out = append(out, []any{wf, n, id, layer, state, created})
		}
		return out
	}
	before := read()
	v6 := workflow.Extension
	v6.Migrations = map[string][]string{store.SQLite: workflow.Extension.Migrations[store.SQLite][:6]}
	open(v6) // migration 7 moves the checkpoints into workflow_events: TestCheckpointsMoveIntoEvents
	if after := read(); !reflect.DeepEqual(before, after) || len(after) != 3 {
		t.Fatalf("checkpoints before migration 5:\n%v\nafter:\n%v", before, after)
	}
	var indexes int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'workflow_checkpoints'`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if indexes != 1 {
		t.Fatalf("workflow_checkpoints has %d indexes after migration 5, want its primary key's alone", indexes)
	}
}

// TestStatesMoveIntoHistory: migration 6 drops workflow_tasks, and a
// task's current state becomes its open row of workflow_task_history.
// A database of version 5 holds a workflow with two checkpoints whose
// tasks moved on after the last one — a changed, b changed again, c gone,
// d new — and one whose tasks did not. After it, the current states are
// workflow_tasks' (the new rows from one past the last checkpoint), and
// every checkpoint still holds the states it held.
func TestStatesMoveIntoHistory(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		st := migrated(t, kind, 5, 6,
			`INSERT INTO workflow_checkpoints (workflow_id, n, id, layer, state, created) VALUES
					('wf_a', 1, 'wf_a-c1', 0, '{}', 1), ('wf_a', 3, 'wf_a-c3', 1, '{}', 2), ('wf_b', 1, 'wf_b-c1', 0, '{}', 3)`,
			`INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state) VALUES
					('wf_a', 'a', 1, 4611686018427387904, 1, 'a1'),
					('wf_a', 'b', 1, 3, 2, 'b1'), ('wf_a', 'b', 3, 4611686018427387904, 2, 'b3'),
					('wf_a', 'c', 1, 4611686018427387904, 3, 'c1'),
					('wf_b', 'x', 1, 4611686018427387904, 1, 'x1')`,
			`INSERT INTO workflow_tasks (workflow_id, id, n, state) VALUES
					('wf_a', 'a', 1, 'a4'), ('wf_a', 'b', 2, 'b4'), ('wf_a', 'd', 4, 'd4'), ('wf_b', 'x', 1, 'x1')`,
		)
		q := st.(store.Querier)
		states := func(where string, args ...any) string {
			var out []string
			if err := q.Query(ctx, `SELECT workflow_id, id, state FROM workflow_task_history WHERE `+where+` ORDER BY workflow_id, n`, args,
				func(scan func(...any) error) error {
					var wf, id, state string
					err := scan(&wf, &id, &state)
					out = append(out, wf+"/"+id+"="+state)
					return err
				}); err != nil {
				t.Fatal(err)
			}
			return strings.Join(out, " ")
		}
		if got, want := states(`until = ?`, workflow.OpenUntil), "wf_a/a=a4 wf_a/b=b4 wf_a/d=d4 wf_b/x=x1"; got != want {
			t.Errorf("current states after migration 6: %s, want %s", got, want)
		}
		for _, c := range []struct {
			wf   string
			n    int64
			want string
		}{{"wf_a", 1, "wf_a/a=a1 wf_a/b=b1 wf_a/c=c1"}, {"wf_a", 3, "wf_a/a=a1 wf_a/b=b3 wf_a/c=c1"}, {"wf_b", 1, "wf_b/x=x1"}} {
			if got := states(`workflow_id = ? AND since <= ? AND until > ?`, c.wf, c.n, c.n); got != c.want {
				t.Errorf("checkpoint %s-c%d holds %s after migration 6, want %s", c.wf, c.n, got, c.want)
			}
		}
		if err := q.Query(ctx, `SELECT COUNT(*) FROM workflow_tasks`, nil, func(scan func(...any) error) error { return nil }); err == nil {
			t.Error("workflow_tasks is still there after migration 6")
		}
	})
}

// TestCheckpointsMoveIntoEvents: migration 7 drops workflow_checkpoints;
// each checkpoint a database of version 6 holds moves into the cp_
// columns of the row of its checkpoint_saved event (there, one event a
// row), column for column, and no other row holds one.
func TestCheckpointsMoveIntoEvents(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		st := migrated(t, kind, 6, 7,
			`INSERT INTO workflow_checkpoints (workflow_id, n, id, layer, state, created) VALUES
					('wf_a', 2, 'wf_a-c2', 1, '{"layer":1}', 11), ('wf_a', 5, 'wf_a-c5', 2, '{"layer":2}', 12), ('wf_b', 1, 'wf_b-c1', 0, '{}', 13)`,
			`INSERT INTO workflow_events (workflow_id, seq, type, data) VALUES
					('wf_a', 1, 'workflow_started', '{"seq":1,"type":"workflow_started"}'),
					('wf_a', 2, 'checkpoint_saved', '{"seq":2,"type":"checkpoint_saved","checkpoint_id":"wf_a-c1"}'),
					('wf_a', 3, 'checkpoint_saved', '{"seq":3,"type":"checkpoint_saved","layer":1,"checkpoint_id":"wf_a-c2"}'),
					('wf_a', 4, 'task_completed', '{"seq":4,"type":"task_completed","checkpoint_id":"wf_a-c5"}'),
					('wf_a', 5, 'checkpoint_saved', '{"seq":5,"type":"checkpoint_saved","layer":2,"checkpoint_id":"wf_a-c5"}'),
					('wf_b', 1, 'workflow_started', '{"seq":1,"type":"workflow_started"}'),
					('wf_b', 2, 'checkpoint_saved', '{"seq":2,"type":"checkpoint_saved","checkpoint_id":"wf_b-c1"}')`,
		)
		var got []string
		if err := st.(store.Querier).Query(ctx, `SELECT workflow_id, seq, cp_n, cp_id, cp_layer, cp_state, cp_created FROM workflow_events ORDER BY workflow_id, seq`, nil,
			func(scan func(...any) error) error {
				var wf, id, state string
				var seq, n, layer, created int64
				err := scan(&wf, &seq, &n, &id, &layer, &state, &created)
				got = append(got, fmt.Sprintf("%s/%d:%d,%s,%d,%s,%d", wf, seq, n, id, layer, state, created))
				return err
			}); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"wf_a/1:0,,0,,0",
			"wf_a/2:0,,0,,0", // its checkpoint was pruned before
			`wf_a/3:2,wf_a-c2,1,{"layer":1},11`,
			"wf_a/4:0,,0,,0", // names a checkpoint, but did not save it
			`wf_a/5:5,wf_a-c5,2,{"layer":2},12`,
			"wf_b/1:0,,0,,0",
			"wf_b/2:1,wf_b-c1,0,{},13",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("workflow_events after migration 7:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if err := st.(store.Querier).Query(ctx, `SELECT COUNT(*) FROM workflow_checkpoints`, nil, func(scan func(...any) error) error { return nil }); err == nil {
			t.Error("workflow_checkpoints is still there after migration 7")
		}
	})
}

// TestReplacedStatesStayUntouched: migration 8 drops migration 4's
// trigger. A database of version 7 holds a workflow with two kept
// checkpoints (1 and 3) whose rows the trigger ended — a changed twice, c
// dropped at 4. After it, a write of new states (a and b again, d new)
// leaves the rows they replace as they are, and the reads answer the
// states the rule says (heldAt: a task's newest row, unless ended),
// before that write and after it.
func TestReplacedStatesStayUntouched(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		state := func(id, v string) string { return `'{"id":"` + id + `","tool":"` + v + `"}'` }
		st := migrated(t, kind, 7, 8,
			`INSERT INTO workflow_events (workflow_id, seq, type, data, cp_n, cp_id, cp_layer, cp_state, cp_created) VALUES
					('wf_a', 1, 'checkpoint_saved', '{}', 1, 'wf_a-c1', 0, '{"id":"wf_a"}', 1),
					('wf_a', 2, 'checkpoint_saved', '{}', 3, 'wf_a-c3', 1, '{"id":"wf_a","layer":1}', 2)`,
			// one by one, as writes inserted them: the trigger ends a@1 at 3
			`INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state) VALUES ('wf_a', 'a', 1, 4611686018427387904, 1, `+state("a", "a1")+`)`,
			`INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state) VALUES ('wf_a', 'b', 1, 4611686018427387904, 2, `+state("b", "b1")+`)`,
			`INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state) VALUES ('wf_a', 'c', 1, 4611686018427387904, 3, `+state("c", "c1")+`)`,
			`INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state) VALUES ('wf_a', 'a', 3, 4611686018427387904, 1, `+state("a", "a3")+`)`,
			`UPDATE workflow_task_history SET until = 4 WHERE workflow_id = 'wf_a' AND id = 'c' AND until = 4611686018427387904`,
			`INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state) VALUES ('wf_a', 'a', 4, 4611686018427387904, 1, `+state("a", "a4")+`)`,
		)
		q := st.(store.Querier)
		read := func(cp string) string {
			tasks, err := workflow.TaskStates(ctx, st, "wf_a", cp)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, tr := range tasks {
				out = append(out, tr.ID+"="+tr.Tool)
			}
			return strings.Join(out, " ")
		}
		rule := func(n int64) string {
			held := heldAt(historyOf(t, q, "wf_a"), n)
			var out []string
			for _, id := range []string{"a", "b", "c", "d"} {
				if r, ok := held[id]; ok {
					var tr workflow.TaskRun
					if err := json.Unmarshal([]byte(r.state), &tr); err != nil {
						t.Fatal(err)
					}
					out = append(out, id+"="+tr.Tool)
				}
			}
			return strings.Join(out, " ")
		}
		check := func(when string, want map[string]string) {
			t.Helper()
			for cp, w := range want {
				n := int64(-1)
				if cp != "" {
					n = int64(cp[len(cp)-1] - '0')
				}
				if got, byRule := read(cp), rule(n); got != w || byRule != w {
					t.Errorf("%s, checkpoint %q: the reads answer %q, the rule %q; want %q", when, cp, got, byRule, w)
				}
			}
		}
		check("after migration 8", map[string]string{"": "a=a4 b=b1", "wf_a-c1": "a=a1 b=b1 c=c1", "wf_a-c3": "a=a3 b=b1 c=c1"})
		write := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state) VALUES
					('wf_a', 'a', 5, 4611686018427387904, 1, `+state("a", "a5")+`),
					('wf_a', 'b', 5, 4611686018427387904, 2, `+state("b", "b5")+`),
					('wf_a', 'd', 5, 4611686018427387904, 4, `+state("d", "d5")+`)`)
			return err
		})
		if err := st.Commit(ctx, &store.Commit{Ops: []store.Op{write}}); err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, r := range historyOf(t, q, "wf_a") {
			if r.until == workflow.OpenUntil {
				open++
			}
		}
		if open != 5 { // a@4, b@1, a@5, b@5, d@5: nothing ended the replaced ones
			t.Errorf("%d open rows after the write; want 5 (the trigger is gone)", open)
		}
		check("after a write", map[string]string{"": "a=a5 b=b5 d=d5", "wf_a-c1": "a=a1 b=b1 c=c1", "wf_a-c3": "a=a3 b=b1 c=c1"})
	})
}

// migrated opens a database of kind (SQLite, or a PostgreSQL schema of
// the test's own) with the workflow tables at migration at, runs fill in
// one commit, and opens it again migrated to to (closed when t ends).
func migrated(t *testing.T, kind string, at, to int, fill ...string) store.Store {
	ctx := context.Background()
	path, dsn := filepath.Join(t.TempDir(), "w.db"), ""
	if kind == "postgres" {
		dsn = pgtest.Schema(t)
	}
	open := func(n int) store.Store {
		ext := workflow.Extension
		ext.Migrations = map[string][]string{kind: workflow.Extension.Migrations[kind][:n]}
		var st store.Store
		var err error
		if kind == "postgres" {
			st, err = postgres.Open(ctx, dsn, &postgres.Options{Extensions: []store.Extension{ext}})
		} else {
			st, err = sqlite.Open(ctx, path, &sqlite.Options{Extensions: []store.Extension{ext}})
		}
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open(at)
	op := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		for _, q := range fill {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err := st.Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = open(to)
	t.Cleanup(func() { st.Close() })
	return st
}
