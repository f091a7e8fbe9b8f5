// Command river runs, side by side on the same database, River
// (riverqueue/river) inserting and working jobs and agentplane's
// notification bus emitting and delivering notifications: N of each, from
// P producers, on SQLite (FULL) and on PostgreSQL. A River job is inserted
// and worked (completed) by a no-op worker; an agentplane notification is
// emitted to a user with an inbox stream open (accepted, routed,
// dispatched) and acknowledged by the client (DELIVERED). It prints one
// line per run: items/s end to end.
//
// agentplane runs twice: with each producer acknowledging its own
// notification before it emits the next (an emit and an ack, each
// committed, one after the other: the figures of docs/performance.md),
// and with the user's client acknowledging what its inbox stream shows
// it, one ack at a time, while the producer goes on emitting — as River's
// workers complete jobs while its producers insert. River's rate counts a
// job once its worker returned (its completion is committed later, in a
// batch); agentplane's, a notification once its ack is committed. Both
// ack as a stream's client does (Ledger.Acknowledge: nothing sent back,
// as River's completions return nothing to the worker); -acks-whole acks
// as the HTTP API's POST does (Ledger.Ack, the notification sent back).
//
// -dbs, -counts, -river and -acks choose what runs (the databases, the
// producer counts, River or not, who acknowledges).
//
//	go run . -n 20000 -producers 32 -postgres postgres://postgres@127.0.0.1:5432/test?sslmode=disable
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/sqlite"
)

// NoopArgs is the job River works: nothing.
type NoopArgs struct{ N int }

// Kind names the job.
func (NoopArgs) Kind() string { return "noop" }

// NoopWorker completes every job.
type NoopWorker struct {
	river.WorkerDefaults[NoopArgs]
	done *atomic.Int64
}

// Work completes the job.
func (w *NoopWorker) Work(ctx context.Context, job *river.Job[NoopArgs]) error {
	w.done.Add(1)
	return nil
}

func main() {
	n := flag.Int("n", 10000, "items per run")
	producers := flag.Int("producers", 32, "concurrent producers")
	pg := flag.String("postgres", os.Getenv("AGENTPLANE_TEST_POSTGRES"), "PostgreSQL URL; empty skips PostgreSQL")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of agentplane's first SQLite run with -producers to this file")
	dbs := flag.String("dbs", "sqlite,postgres", "the databases to run on, comma-separated")
	counts := flag.String("counts", "", "the producer counts to run, comma-separated; empty: 1 and -producers")
	withRiver := flag.Bool("river", true, "run River too")
	acks := flag.String("acks", "producer,client", "who acknowledges in agentplane's runs: the producer, the client, or both (comma-separated)")
	whole := flag.Bool("acks-whole", false, "agentplane's acks return the notification (Ledger.Ack, as the HTTP API's POST), not nothing (Ledger.Acknowledge, as a stream's client)")
	backlog := flag.Int("backlog", 0, "notifications left undelivered, to 1,000 users with no stream open, before each agentplane run")
	flag.Parse()
	on := map[string]bool{}
	for _, d := range strings.Split(*dbs, ",") {
		on[strings.TrimSpace(d)] = true
	}
	ps := []int{1, *producers}
	if *counts != "" {
		ps = nil
		for _, c := range strings.Split(*counts, ",") {
			p, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil || p < 1 {
				log.Fatalf("-counts: %q is not a producer count", c)
			}
			ps = append(ps, p)
		}
	}
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "river-peer")
	defer os.RemoveAll(dir)

	var modes []bool // client acks?
	for _, a := range strings.Split(*acks, ",") {
		switch strings.TrimSpace(a) {
		case "producer":
			modes = append(modes, false)
		case "client":
			modes = append(modes, true)
		default:
			log.Fatalf("-acks: %q is neither producer nor client", a)
		}
	}
	bus := busOptions{backlog: *backlog, whole: *whole}
	for _, p := range ps {
		if on["sqlite"] {
			runSQLite(ctx, dir, *n, p, *producers, *cpuprofile, *withRiver, modes, bus)
		}
		if *pg == "" || !on["postgres"] {
			continue
		}
		// PostgreSQL: River, then agentplane, on the same database
		if *withRiver {
			pool, err := pgxpool.New(ctx, *pg)
			must(err)
			pool.Exec(ctx, `DROP SCHEMA IF EXISTS river_peer CASCADE; CREATE SCHEMA river_peer`)
			pool.Close()
			cfg, _ := pgxpool.ParseConfig(*pg)
			cfg.ConnConfig.RuntimeParams["search_path"] = "river_peer"
			pool, err = pgxpool.NewWithConfig(ctx, cfg)
			must(err)
			rate, cpu, err := runRiver(ctx, riverpgxv5.New(pool), *n, p)
			must(err)
			fmt.Printf("postgres   producers=%-3d river         %8.0f jobs/s, %4.0f µs CPU each (inserted and worked)\n", p, rate, us(cpu))
			pool.Exec(ctx, `DROP SCHEMA river_peer CASCADE`)
			pool.Close()
		}
		for _, client := range modes {
			pst, err := postgres.Open(ctx, withSearchPath(*pg, "agentplane_peer"), &postgres.Options{Extensions: []store.Extension{notify.Extension}})
			must(err)
			before := pst.Stats()
			rate, cpu, err := runBus(ctx, pst, *n, p, client, bus)
			must(err)
			after := pst.Stats()
			who := "the producer acks"
			if client {
				who = "the client acks from its stream"
			}
			who += bus.String()
			fmt.Printf("postgres   producers=%-3d agentplane    %8.0f notifications/s, %4.0f µs CPU each (emitted, dispatched and delivered; %s; %.2f round trips, %.2f statements each)\n",
				p, rate, us(cpu), who, float64(after.RoundTrips-before.RoundTrips)/float64(*n), float64(after.Statements-before.Statements)/float64(*n))
			pst.Close()
		}
	}
}

// runSQLite runs River and agentplane (the producer acks, the client
// acks) on SQLite FULL with p producers; the CPU profile covers
// agentplane's first run with -producers.
func runSQLite(ctx context.Context, dir string, n, p, producers int, cpuprofile string, withRiver bool, modes []bool, bus busOptions) {
	if withRiver {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, fmt.Sprintf("river-%d.db", p))+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate")
		must(err)
		db.SetMaxOpenConns(1)
		rate, cpu, err := runRiver(ctx, riversqlite.New(db), n, p)
		must(err)
		fmt.Printf("sqlite     producers=%-3d river         %8.0f jobs/s, %4.0f µs CPU each (inserted and worked)\n", p, rate, us(cpu))
		db.Close()
	}
	// SQLite: agentplane
	for i, client := range modes {
		st, err := sqlite.Open(ctx, filepath.Join(dir, fmt.Sprintf("agentplane-%d-%v.db", p, client)), &sqlite.Options{Extensions: []store.Extension{notify.Extension}})
		must(err)
		var prof *os.File
		if cpuprofile != "" && p == producers && i == 0 {
			prof, err = os.Create(cpuprofile)
			must(err)
			must(pprof.StartCPUProfile(prof))
		}
		rate, cpu, err := runBus(ctx, st, n, p, client, bus)
		if prof != nil {
			pprof.StopCPUProfile()
			must(prof.Close())
		}
		must(err)
		who := "the producer acks"
		if client {
			who = "the client acks from its stream"
		}
		who += bus.String()
		fmt.Printf("sqlite     producers=%-3d agentplane    %8.0f notifications/s, %4.0f µs CPU each (emitted, dispatched and delivered; %s)\n", p, rate, us(cpu), who)
		st.Close()
	}
}

// withSearchPath returns the URL of a fresh schema.
func withSearchPath(url, schema string) string {
	pool, err := pgxpool.New(context.Background(), url)
	must(err)
	pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE; CREATE SCHEMA `+schema)
	pool.Close()
	sep := "?"
	for _, c := range url {
		if c == '?' {
			sep = "&"
		}
	}
	return url + sep + "search_path=" + schema
}

// runRiver migrates River's tables, inserts n jobs from p producers and
// works them, and returns jobs per second from the first insert to the
// last completion.
func runRiver[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], n, p int) (float64, time.Duration, error) {
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		return 0, 0, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return 0, 0, err
	}
	var done atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &NoopWorker{done: &done})
	client, err := river.NewClient(driver, &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}},
		Workers: workers, FetchCooldown: time.Millisecond, FetchPollInterval: 5 * time.Millisecond})
	if err != nil {
		return 0, 0, err
	}
	if err := client.Start(ctx); err != nil {
		return 0, 0, err
	}
	defer client.Stop(ctx)
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	var insertErr atomic.Value
	for w := range p {
		wg.Go(func() {
			for i := w; i < n; i += p {
				if _, err := client.Insert(ctx, NoopArgs{N: i}, nil); err != nil {
					insertErr.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := insertErr.Load().(error); err != nil {
		return 0, 0, err
	}
	for done.Load() < int64(n) {
		time.Sleep(time.Millisecond)
	}
	return float64(n) / time.Since(start).Seconds(), (cpuTime() - cpu0) / time.Duration(n), nil
}

// busOptions are how agentplane's runs go: the notifications left
// undelivered before, and whether the acks want the notification back.
type busOptions struct {
	backlog int
	whole   bool
}

// String says how the run differs from the default, for its line.
func (o busOptions) String() string {
	s := ""
	if o.whole {
		s += ", the ack returns the notification"
	}
	if o.backlog > 0 {
		s += fmt.Sprintf(", %d undelivered before", o.backlog)
	}
	return s
}

// runBus emits n inbox notifications from p producers to users with
// inbox streams open and acknowledges each — the producer right after its
// emit, or (client) the user's client as its stream shows them, one ack
// at a time — and returns notifications per second from the first emit
// to the last delivery. Before it starts, backlog notifications are left
// undelivered to users who hold no stream (what a run must not slow
// down on).
func runBus(ctx context.Context, st store.Store, n, p int, client bool, opts busOptions) (float64, time.Duration, error) {
	backlog := opts.backlog
	ack := func(ctx context.Context, l *notify.Ledger, id, user string) error {
		return l.Acknowledge(ctx, id, user)
	}
	if opts.whole {
		ack = func(ctx context.Context, l *notify.Ledger, id, user string) error {
			_, err := l.Ack(ctx, id, user)
			return err
		}
	}
	c, err := core.New(ctx, core.Source{YAML: demo.YAML, Name: demo.Name}, &core.Options{Store: st, Programs: demo.Programs(nil)})
	if err != nil {
		return 0, 0, err
	}
	l, err := notify.NewLedger(st, nil)
	if err != nil {
		return 0, 0, err
	}
	hub := events.NewHub(st.Records, &events.Options{Queue: n})
	bus := notify.NewBus(l, c, hub, nil)
	var failed atomic.Value
	var delivered atomic.Int64
	all := make(chan struct{})
	var clients sync.WaitGroup
	var subs []*events.Sub
	defer func() { // the clients end with their streams
		for _, sub := range subs {
			sub.Close()
		}
		clients.Wait()
	}()
	for w := range p {
		sub := hub.Subscribe(notify.UserTopic(fmt.Sprintf("user-%d", w)), 0)
		subs = append(subs, sub)
		clients.Go(func() {
			for {
				select {
				case <-sub.Done():
					return
				case f := <-sub.Events():
					if !client {
						continue
					}
					var shown notify.Notification
					if err := json.Unmarshal(f.Data, &shown); err != nil {
						failed.Store(err)
						return
					}
					if err := ack(ctx, l, shown.ID, shown.UserID); err != nil {
						failed.Store(err)
						return
					}
					if delivered.Add(1) == int64(n) {
						close(all)
					}
				}
			}
		})
	}
	var away sync.WaitGroup
	for w := range 32 {
		away.Go(func() {
			for i := w; i < backlog; i += 32 {
				if _, err := bus.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: fmt.Sprintf("away-%d", i%1000),
					Target: notify.TargetUser, Handler: notify.HandlerSystem, Title: "waiting"}, 0); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	away.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return 0, 0, err
	}
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for w := range p {
		wg.Go(func() {
			user := fmt.Sprintf("user-%d", w)
			for i := w; i < n; i += p {
				e, err := bus.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: user, Target: notify.TargetUser,
					Handler: notify.HandlerSystem, Title: "job"}, 0)
				if err == nil && !client {
					err = ack(ctx, l, e.ID, user)
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return 0, 0, err
	}
	if client {
		select {
		case <-all:
		case <-time.After(time.Minute):
			if err, _ := failed.Load().(error); err != nil {
				return 0, 0, err
			}
			return 0, 0, fmt.Errorf("%d of %d notifications delivered after a minute", delivered.Load(), n)
		}
	}
	return float64(n) / time.Since(start).Seconds(), (cpuTime() - cpu0) / time.Duration(n), nil
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// cpuTime is the CPU time the process used so far (user and system):
// its difference over a run is the run's own, as the runs follow one
// another.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
