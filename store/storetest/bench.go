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
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		n := b.N / sessions
		if i < b.N%sessions {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("%s-%d", prefix, i)
			for j := 0; j < n; j++ {
				r, err := g.Execute(ctx, gate.Invocation{SessionID: id, CommandID: "set_mode", ResolvedID: modes[j%2], Origin: gate.OriginUser})
				if err != nil || r.Status != agentplane.StatusSuccess {
					b.Error(r.Message, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "exec/s")
}

// BenchInsert measures the raw rate of one-row insert transactions, one
// per commit, with the given concurrency: the physical limit the gate's
// durable executions compare with. insert inserts one row in its own
// transaction.
func BenchInsert(b *testing.B, workers int, insert func() error) {
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		n := b.N / workers
		if i < b.N%workers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < n; j++ {
				if err := insert(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "insert/s")
}
