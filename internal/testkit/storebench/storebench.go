// Package storebench measures durable gate executions on a store beside
// the raw insert rate of the same database: the benchmarks of the sqlite
// and postgres packages.
package storebench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store"
)

// Execute measures durable gate executions per second on store with
// the given number of sessions executing concurrently, one goroutine each,
// each execution a state-changing built-in command (set_mode, alternating).
// It reports exec/s.
func Execute(b *testing.B, st store.Store, sessions int) {
	exec := executor(b, st, sessions)
	b.ResetTimer()
	b.ReportMetric(parallel(b, sessions, exec), "exec/s")
}

// Compare alternates, b.N rounds of slice each, raw one-row insert
// transactions from one writer and durable gate executions from sessions
// concurrent sessions, so both meet the same disk (whose speed drifts on a
// shared machine), and reports both rates and their ratio.
func Compare(b *testing.B, st store.Store, sessions int, slice time.Duration, insert func() error) {
	exec := executor(b, st, sessions)
	var raw, execs int
	var rawTime, execTime time.Duration
	rawNext, execNext := make([]int, 1), make([]int, sessions)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, d := runFor(b, rawNext, slice, func(int, int) error { return insert() })
		raw, rawTime = raw+n, rawTime+d
		n, d = runFor(b, execNext, slice, exec)
		execs, execTime = execs+n, execTime+d
	}
	rawRate, execRate := float64(raw)/rawTime.Seconds(), float64(execs)/execTime.Seconds()
	b.ReportMetric(rawRate, "insert/s")
	b.ReportMetric(execRate, "exec/s")
	b.ReportMetric(execRate/rawRate, "ratio")
}

// executor opens sessions sessions through a gate on store and returns
// the benchmark's operation: the op-th execution of a worker's session.
func executor(b *testing.B, st store.Store, sessions int) func(worker, op int) error {
	exec, _ := executorOn(b, st, sessions)
	return exec
}

// executorOn is executor, with the ids of the sessions it opened.
func executorOn(b *testing.B, st store.Store, sessions int) (func(worker, op int) error, []string) {
	ctx := context.Background()
	// the store belongs to the benchmark, which closes it: the core is not closed
	c, err := core.New(ctx, core.Source{YAML: demo.YAML, Name: demo.Name}, &core.Options{Store: st, Programs: demo.Programs(nil)})
	if err != nil {
		b.Fatal(err)
	}
	g := c // the core: each execution on its configuration in force, as a front end runs it
	prefix := fmt.Sprintf("b%d-%d", time.Now().UnixNano(), sessions)
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		if _, err := g.Open(ctx, gate.Opening{SessionID: ids[i]}); err != nil {
			b.Fatal(err)
		}
	}
	modes := []string{"ddr", "general"}
	return func(worker, op int) error {
		r, err := g.Execute(ctx, gate.Invocation{SessionID: ids[worker], CommandID: "set_mode",
			ResolvedID: modes[op%2], Origin: gate.OriginUser})
		if err == nil && r.Status != agentplane.StatusSuccess {
			err = fmt.Errorf("%s: %s", r.Status, r.Message)
		}
		return err
	}, ids
}

// runFor runs op on len(next) goroutines until d has passed and returns
// how many operations completed and how long that took. next[w] is worker
// w's next operation number; it carries over to the next call, so a
// session's executions keep alternating modes.
func runFor(b *testing.B, next []int, d time.Duration, op func(worker, i int) error) (int, time.Duration) {
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	done := make([]int, len(next))
	for w := range next {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := op(w, next[w]); err != nil {
					b.Error(err)
					return
				}
				next[w]++
				done[w]++
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range done {
		total += n
	}
	return total, time.Since(start)
}

// parallel runs b.N operations split over workers goroutines, op(worker,
// i) for the i-th operation of a worker, and returns operations per second.
func parallel(b *testing.B, workers int, op func(worker, i int) error) float64 {
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		n := b.N / workers
		if w < b.N%workers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := op(w, i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(b.N) / time.Since(start).Seconds()
}

// Insert measures the raw rate of one-row insert transactions, one
// per commit, with the given concurrency: the physical limit the gate's
// durable executions compare with. insert inserts one row in its own
// transaction.
func Insert(b *testing.B, workers int, insert func() error) {
	b.ReportMetric(parallel(b, workers, func(int, int) error { return insert() }), "insert/s")
}

// Delay measures how long after an execution starts another reader
// knows of its record: b.N executions on one session of st, each followed
// by wait (which returns once the other side has seen the record with that
// sequence number). It reports the p50 and p99 delays, and the p50 of the
// execution alone, in milliseconds.
// A pause of up to jitter (not counted) before each execution keeps it
// out of step with a poller's period.
func Delay(b *testing.B, st store.Store, jitter time.Duration, wait func(session string, seq int64)) {
	exec, ids := executorOn(b, st, 1)
	var delays, execs []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if jitter > 0 {
			b.StopTimer()
			time.Sleep(rand.N(jitter))
			b.StartTimer()
		}
		start := time.Now()
		if err := exec(0, i); err != nil {
			b.Fatal(err)
		}
		execs = append(execs, time.Since(start))
		wait(ids[0], int64(i+2)) // the open record is 1
		delays = append(delays, time.Since(start))
	}
	ms := func(d []time.Duration, q float64) float64 {
		slices.Sort(d)
		return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(ms(delays, .5), "p50-ms")
	b.ReportMetric(ms(delays, .99), "p99-ms")
	b.ReportMetric(ms(execs, .5), "exec-p50-ms")
}
