package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/storetest"
)

// BenchmarkDurable compares durable gate executions per second with the raw
// one-row-per-transaction insert rate of the same server, one session and
// 32 concurrent sessions: interleaved in 100 ms slices (run with
// -benchtime 20x: 2 s of each), then each alone.
func BenchmarkDurable(b *testing.B) {
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("interleaved/sessions=%d", n), func(b *testing.B) {
			url := freshDB(b)
			pool, err := pgxpool.New(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			pool.Exec(context.Background(), `CREATE TABLE t (id BIGSERIAL PRIMARY KEY, v TEXT)`)
			s, err := postgres.Open(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchCompare(b, s, n, 100*time.Millisecond, func() error {
				_, err := pool.Exec(context.Background(), `INSERT INTO t (v) VALUES ('x')`)
				return err
			})
		})
	}

	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("raw-insert/workers=%d", n), func(b *testing.B) {
			url := freshDB(b)
			pool, err := pgxpool.New(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			pool.Exec(context.Background(), `CREATE TABLE t (id BIGSERIAL PRIMARY KEY, v TEXT)`)
			b.ResetTimer()
			storetest.BenchInsert(b, n, func() error {
				_, err := pool.Exec(context.Background(), `INSERT INTO t (v) VALUES ('x')`)
				return err
			})
		})
		b.Run(fmt.Sprintf("execute/sessions=%d", n), func(b *testing.B) {
			s, err := postgres.Open(context.Background(), freshDB(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchExecute(b, s, n)
		})
	}
}
