package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentplane/agentplane/internal/testkit/storebench"
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

// BenchmarkEventsAcrossInstances measures how another instance learns of
// a commit: with NOTIFY (Options.Notify and Listen) and by polling the
// audit table every 50 ms. It reports the commit rate with each (NOTIFY
// adds a statement and serializes commits on PostgreSQL's notification
// queue) and the delay from a commit's return to the other instance
// knowing of it, p50 and p99.
func BenchmarkEventsAcrossInstances(b *testing.B) {
	for _, notify := range []bool{false, true} {
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("commit/notify=%v/sessions=%d", notify, n), func(b *testing.B) {
				s, err := postgres.Open(context.Background(), freshDB(b), &postgres.Options{Notify: notify})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				storebench.Execute(b, s, n)
			})
		}
	}
	b.Run("delay/notify", func(b *testing.B) {
		url := freshDB(b)
		a, _ := postgres.Open(context.Background(), url, &postgres.Options{Notify: true})
		other := open(b, url)
		defer a.Close()
		heard := make(chan string, 1024)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go other.Listen(ctx, func(s string) { heard <- s })
		time.Sleep(100 * time.Millisecond) // LISTEN is in place
		storebench.Delay(b, a, 0, func(session string, seq int64) {
			for s := range heard {
				if s == session {
					return
				}
			}
		})
	})
	b.Run("delay/poll-heads-50ms", func(b *testing.B) {
		url := freshDB(b)
		a, other := open(b, url), open(b, url)
		var head atomic.Int64
		var session atomic.Value
		session.Store("")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { // the other instance's poller, on its own phase
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if id := session.Load().(string); id != "" {
					if heads, err := other.Heads(ctx, []string{id}); err == nil {
						head.Store(heads[id])
					}
				}
			}
		}()
		storebench.Delay(b, a, 50*time.Millisecond, func(id string, seq int64) {
			session.Store(id)
			for head.Load() < seq {
				time.Sleep(100 * time.Microsecond)
			}
		})
	})
}
