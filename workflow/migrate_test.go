package workflow_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentplane/agentplane/store"
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
	open(workflow.Extension)
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
