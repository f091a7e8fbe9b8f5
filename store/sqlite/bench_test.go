package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/router"
	"github.com/agentplane/agentplane/store/sqlite"
)

// BenchmarkExecute measures durable gate executions (a built-in no-op tool,
// every execution changing state) on one session, next to the raw rate of
// one-row insert transactions on the same kind of file: the physical limit
// of one fsync per commit.
func BenchmarkExecute(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("raw-insert/"+sync, func(b *testing.B) {
			db, err := sqlite.OpenRaw(filepath.Join(b.TempDir(), "raw.db") + fmt.Sprintf("?_pragma=journal_mode(WAL)&_pragma=synchronous(%s)", sync))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := db.Exec(`INSERT INTO t (v) VALUES (?)`, "x"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("execute/"+sync, func(b *testing.B) {
			s, err := sqlite.Open(filepath.Join(b.TempDir(), "a.db"), &sqlite.Options{Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cfg, _ := demo.Config(nil)
			reg, _ := router.NewRegistry(cfg, nil)
			g, _ := gate.New(reg, s, nil)
			ctx := context.Background()
			g.Open(ctx, "a", "")
			modes := []string{"ddr", "general"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := g.Execute(ctx, gate.Invocation{SessionID: "a", CommandID: "set_mode", ResolvedID: modes[i%2], Origin: gate.OriginUser})
				if err != nil || r.Status != agentplane.StatusSuccess {
					b.Fatal(r, err)
				}
			}
		})
	}
}
