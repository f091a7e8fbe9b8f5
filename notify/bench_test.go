package notify_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
)

// BenchmarkNotify measures notifications accepted, routed and dispatched
// per second end to end (Bus.Emit of inbox notifications, each user with
// an inbox stream open, so each is published and marked DISPATCHED: two
// transactions) with 1 and 32 producers, on SQLite (FULL) and PostgreSQL,
// the emit → dispatched latency p50 and p99, and the raw one-row insert
// rate of the same database measured just before (the ratio).
func BenchmarkNotify(b *testing.B) {
	for name, open := range drivers(b) {
		for _, producers := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/producers=%d", name, producers), func(b *testing.B) {
				st := open(b)
				raw := rawRate(b, name, st, producers)
				c := demotest.Core(b, &core.Options{Store: st})
				l, _ := notify.NewLedger(st, nil)
				hub := events.NewHub(st.Records, nil)
				bus := notify.NewBus(l, c, hub, nil)
				var readers sync.WaitGroup // the streams' readers, until the hub closes
				defer readers.Wait()
				defer hub.Close("done")
				defer bus.Close(0)
				for p := range producers {
					sub := hub.Subscribe(notify.UserTopic(fmt.Sprintf("user-%d", p)), 0)
					readers.Go(func() {
						for {
							select {
							case <-sub.Events():
							case <-sub.Done():
								return
							}
						}
					})
				}
				var mu sync.Mutex
				var lat []time.Duration
				per := (b.N + producers - 1) / producers
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for p := range producers {
					wg.Go(func() {
						mine := make([]time.Duration, 0, per)
						for range per {
							t := time.Now()
							e, err := bus.Emit(context.Background(), notify.Notification{Address: notify.AddressUser, UserID: fmt.Sprintf("user-%d", p),
								Target: notify.TargetUser, Handler: notify.HandlerSystem, Title: "build finished"}, 0)
							if err != nil || e.State != notify.StateDispatched {
								b.Error(e.State, err)
								return
							}
							mine = append(mine, time.Since(t))
						}
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
					})
				}
				wg.Wait()
				rate := float64(len(lat)) / time.Since(start).Seconds()
				slices.Sort(lat)
				b.ReportMetric(rate, "notifications/s")
				b.ReportMetric(raw, "raw-insert/s")
				b.ReportMetric(rate/raw, "ratio")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}

// rawRate measures one-row insert transactions per second on the same
// database (a table of its own) for a second, with the given writers.
func rawRate(b *testing.B, driver string, _ store.Store, writers int) float64 {
	ctx := context.Background()
	var insert func() error
	switch driver {
	case "sqlite":
		db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "raw.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`)
		insert = func() error { _, err := db.Exec(`INSERT INTO t (v) VALUES ('x')`); return err }
	default:
		pool, err := pgxpool.New(ctx, os.Getenv("AGENTPLANE_TEST_POSTGRES"))
		if err != nil {
			b.Skip("raw insert: ", err)
		}
		table := fmt.Sprintf("notify_raw_%d", time.Now().UnixNano())
		b.Cleanup(func() { pool.Exec(ctx, `DROP TABLE `+table); pool.Close() })
		pool.Exec(ctx, `CREATE TABLE `+table+` (id BIGSERIAL PRIMARY KEY, v TEXT)`)
		insert = func() error { _, err := pool.Exec(ctx, `INSERT INTO `+table+` (v) VALUES ('x')`); return err }
	}
	var n sync.WaitGroup
	var mu sync.Mutex
	count := 0
	deadline := time.Now().Add(time.Second)
	start := time.Now()
	for range writers {
		n.Go(func() {
			k := 0
			for time.Now().Before(deadline) {
				if insert() == nil {
					k++
				}
			}
			mu.Lock()
			count += k
			mu.Unlock()
		})
	}
	n.Wait()
	return float64(count) / time.Since(start).Seconds()
}
