package workflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/workflow"
)

// BenchmarkTaskStatesAtSize reads the task states of a workflow of 1,000
// tasks each changed at its 8 checkpoints (the 5 newest kept: 6,000
// rows), as a takeover or another instance's Get reads them (current)
// and as a rollback does (checkpoint).
func BenchmarkTaskStatesAtSize(b *testing.B) {
	const tasks, checkpoints = 1000, 8
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			ctx := context.Background()
			exts := &[]store.Extension{workflow.Extension}
			var st store.Store
			var err error
			if kind == "postgres" {
				if os.Getenv("AGENTPLANE_TEST_POSTGRES") == "" {
					b.Skip("AGENTPLANE_TEST_POSTGRES is not set")
				}
				st, err = postgres.Open(ctx, pgtest.Schema(b), &postgres.Options{Extensions: *exts})
			} else {
				st, err = sqlite.Open(ctx, filepath.Join(b.TempDir(), "w.db"), &sqlite.Options{Extensions: *exts})
			}
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			fill := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
				for c := 4; c <= checkpoints; c++ { // the kept ones
					if _, err := tx.Exec(ctx, `INSERT INTO workflow_events (workflow_id, seq, type, data, cp_n, cp_id, cp_layer, cp_state, cp_created) VALUES ('wf', ?, 'x', '{}', ?, ?, 0, '{"id":"wf"}', 1)`,
						c, c, fmt.Sprint("wf-c", c)); err != nil {
						return err
					}
				}
				var rows []string
				for i := range tasks {
					for c := 3; c <= checkpoints; c++ { // the oldest kept holds each task's state from 3 (older ones pruned)
						rows = append(rows, fmt.Sprintf(`('wf', 't%04d', %d, %d, %d, '{"id":"t%04d","tool":"noop","status":"completed","layer":%d,"attempts":1,"output":{"n":%d}}')`,
							i, c, int64(1)<<62, i+1, i, c, c))
					}
				}
				for len(rows) > 0 {
					k := min(len(rows), 500)
					if _, err := tx.Exec(ctx, `INSERT INTO workflow_task_history (workflow_id, id, since, until, n, state) VALUES `+strings.Join(rows[:k], ", ")); err != nil {
						return err
					}
					rows = rows[k:]
				}
				return nil
			})
			if err := st.Commit(ctx, &store.Commit{Ops: []store.Op{fill}}); err != nil {
				b.Fatal(err)
			}
			for _, at := range []string{"", "wf-c5"} {
				name := "current"
				if at != "" {
					name = "checkpoint"
				}
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						got, err := workflow.TaskStates(ctx, st, "wf", at)
						if err != nil || len(got) != tasks {
							b.Fatalf("%d tasks, %v", len(got), err)
						}
					}
				})
			}
		})
	}
}
