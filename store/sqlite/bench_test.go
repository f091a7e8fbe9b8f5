package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/testkit/storebench"
	"github.com/agentplane/agentplane/store/sqlite"
)

// BenchmarkDurable compares durable gate executions per second with the raw
// one-row-per-transaction insert rate of the same kind of SQLite file, for
// synchronous FULL and NORMAL, one session and 32 concurrent sessions:
// interleaved in 100 ms slices (run with -benchtime 20x: 2 s of each),
// then each alone.
func BenchmarkDurable(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, n := range []int{1, 32} {
			b.Run(fmt.Sprintf("interleaved/%s/sessions=%d", sync, n), func(b *testing.B) {
				storebench.Compare(b, open(b, sync), n, 100*time.Millisecond, rawInsert(b, sync))
			})
		}
	}
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, n := range []int{1, 32} {
			b.Run(fmt.Sprintf("raw-insert/%s/workers=%d", sync, n), func(b *testing.B) {
				insert := rawInsert(b, sync)
				b.ResetTimer()
				storebench.Insert(b, n, insert)
			})
			b.Run(fmt.Sprintf("execute/%s/sessions=%d", sync, n), func(b *testing.B) {
				storebench.Execute(b, open(b, sync), n)
			})
		}
	}
}

// open opens a store on a new file, closed when the benchmark ends.
func open(b *testing.B, sync string) *sqlite.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "a.db"), &sqlite.Options{Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// rawInsert returns a one-row insert transaction on a new file with the
// store's settings: the physical limit the store's commits compare with.
func rawInsert(b *testing.B, sync string) func() error {
	db, err := sqlite.OpenRaw(filepath.Join(b.TempDir(), "raw.db") +
		fmt.Sprintf("?_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_pragma=busy_timeout(10000)&_txlock=immediate", sync))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		b.Fatal(err)
	}
	return func() error {
		_, err := db.Exec(`INSERT INTO t (v) VALUES ('x')`)
		return err
	}
}
