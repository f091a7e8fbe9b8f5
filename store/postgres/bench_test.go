package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentplane/agentplane/internal/storebench"
	"github.com/agentplane/agentplane/store/postgres"
)

// BenchmarkDurable compares durable gate executions per second with the raw
// one-row-per-transaction insert rate of the same server, one session and
// 32 concurrent sessions: interleaved in 100 ms slices (run with
// -benchtime 20x: 2 s of each), then each alone.
func BenchmarkDurable(b *testing.B) {
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("interleaved/sessions=%d", n), func(b *testing.B) {
			url := freshDB(b)
			storebench.Compare(b, open(b, url), n, 100*time.Millisecond, rawInsert(b, url))
		})
	}
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("raw-insert/workers=%d", n), func(b *testing.B) {
			insert := rawInsert(b, freshDB(b))
			b.ResetTimer()
			storebench.Insert(b, n, insert)
		})
		b.Run(fmt.Sprintf("execute/sessions=%d", n), func(b *testing.B) {
			storebench.Execute(b, open(b, freshDB(b)), n)
		})
	}
}

// open opens a store on the database, closed when the benchmark ends.
func open(b *testing.B, url string) *postgres.Store {
	s, err := postgres.Open(context.Background(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// rawInsert returns a one-row insert transaction on the database: the
// physical limit the store's commits compare with.
func rawInsert(b *testing.B, url string) func() error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE t (id BIGSERIAL PRIMARY KEY, v TEXT)`); err != nil {
		b.Fatal(err)
	}
	return func() error {
		_, err := pool.Exec(ctx, `INSERT INTO t (v) VALUES ('x')`)
		return err
	}
}
