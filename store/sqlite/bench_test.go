package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/store/storetest"
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
				dir := b.TempDir()
				db, err := sqlite.OpenRaw(filepath.Join(dir, "raw.db") +
					fmt.Sprintf("?_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_pragma=busy_timeout(10000)&_txlock=immediate", sync))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`)
				s, err := sqlite.Open(filepath.Join(dir, "a.db"), &sqlite.Options{Synchronous: sync})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				storetest.BenchCompare(b, s, n, 100*time.Millisecond, func() error {
					_, err := db.Exec(`INSERT INTO t (v) VALUES ('x')`)
					return err
				})
			})
		}
	}

	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, n := range []int{1, 32} {
			b.Run(fmt.Sprintf("raw-insert/%s/workers=%d", sync, n), func(b *testing.B) {
				db, err := sqlite.OpenRaw(filepath.Join(b.TempDir(), "raw.db") +
					fmt.Sprintf("?_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_pragma=busy_timeout(10000)&_txlock=immediate", sync))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`)
				b.ResetTimer()
				storetest.BenchInsert(b, n, func() error {
					_, err := db.Exec(`INSERT INTO t (v) VALUES ('x')`)
					return err
				})
			})
			b.Run(fmt.Sprintf("execute/%s/sessions=%d", sync, n), func(b *testing.B) {
				s, err := sqlite.Open(filepath.Join(b.TempDir(), "a.db"), &sqlite.Options{Synchronous: sync})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				storetest.BenchExecute(b, s, n)
			})
		}
	}
}
