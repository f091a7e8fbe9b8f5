package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/router"
)

// BenchExecute measures durable gate executions per second on store with
// the given number of sessions executing concurrently, one goroutine each,
// each execution a state-changing built-in command (set_mode, alternating).
// It reports exec/s.
func BenchExecute(b *testing.B, store gate.Store, sessions int) {
	cfg, err := demo.Config(nil)
	if err != nil {
		b.Fatal(err)
	}
	reg, err := router.NewRegistry(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	g, err := gate.New(reg, store, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	prefix := fmt.Sprintf("b%d-%d", time.Now().UnixNano(), sessions)
	for i := 0; i < sessions; i++ {
		if _, err := g.Open(ctx, fmt.Sprintf("%s-%d", prefix, i), ""); err != nil {
			b.Fatal(err)
		}
	}
	modes := []string{"ddr", "general"}
	b.ResetTimer()
	rate := parallel(b, sessions, func(worker, op int) error {
		r, err := g.Execute(ctx, gate.Invocation{SessionID: fmt.Sprintf("%s-%d", prefix, worker), CommandID: "set_mode",
			ResolvedID: modes[op%2], Origin: gate.OriginUser})
		if err == nil && r.Status != agentplane.StatusSuccess {
			err = fmt.Errorf("%s: %s", r.Status, r.Message)
		}
		return err
	})
	b.ReportMetric(rate, "exec/s")
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

// BenchInsert measures the raw rate of one-row insert transactions, one
// per commit, with the given concurrency: the physical limit the gate's
// durable executions compare with. insert inserts one row in its own
// transaction.
func BenchInsert(b *testing.B, workers int, insert func() error) {
	b.ReportMetric(parallel(b, workers, func(int, int) error { return insert() }), "insert/s")
}
