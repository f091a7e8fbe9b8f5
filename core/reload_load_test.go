package core_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/store/sqlite"
)

// TestReloadUnderLoad measures (AGENTPLANE_MEASURE_RELOAD=1) 64 clients
// sending turns while the configuration is reloaded, on the memory store
// and on SQLite (synchronous FULL, as serve runs): every turn must be
// answered. It reports the p99 latency of the turns that overlapped a
// reload (20 single reloads, each after 500 quiet turns) against the p99
// of the turns that overlapped none, then the same for 20 reloads back to
// back. A measurement, not a timing assertion.
func TestReloadUnderLoad(t *testing.T) {
	if os.Getenv("AGENTPLANE_MEASURE_RELOAD") == "" {
		t.Skip("a measurement: set AGENTPLANE_MEASURE_RELOAD=1")
	}
	for _, kind := range []string{"memory", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			var st store.Store = memstore.New()
			if kind == "sqlite" {
				s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "reload.db"), nil)
				if err != nil {
					t.Fatal(err)
				}
				st = s
			}
			c := demotest.Core(t, &core.Options{Store: st})
			cfgs := []*config.Config{parse(t, demo.YAML), parse(t, changed)}
			single, singleQuiet, took := measureReloads(t, c, cfgs, 1)
			t.Logf("%s, 64 clients, 20 single reloads (p50 %v, longest %v): %d turns overlapped one, p99 %v (%.2f× the p99 %v of %d turns that overlapped none)",
				kind, p50(took), slices.Max(took), len(single), p99(single), float64(p99(single))/float64(p99(singleQuiet)), p99(singleQuiet), len(singleQuiet))
			burst, burstQuiet, took := measureReloads(t, c, cfgs, 20)
			t.Logf("%s, 64 clients, 20 reloads back to back (%v): %d turns overlapped them, p99 %v (%.2f× the p99 %v of %d turns that overlapped none)",
				kind, took[0], len(burst), p99(burst), float64(p99(burst))/float64(p99(burstQuiet)), p99(burstQuiet), len(burstQuiet))
		})
	}
}

// measureReloads runs 64 clients sending turns and, once 2,000 turns are
// done, reloads 20 times in groups of burst back to back (500 turns
// between groups). It returns the latencies of the turns that overlapped
// a reload and of those (after the first 2,000) that did not, and how
// long each group of reloads took.
func measureReloads(t *testing.T, c *core.Core, cfgs []*config.Config, burst int) (during, quiet, took []time.Duration) {
	const clients = 64
	type span struct{ from, to time.Time }
	var done atomic.Int64
	progress := make(chan struct{}, 1)
	stop := make(chan struct{})
	turns := make([][]span, clients)
	failed := atomic.Int64{}
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			who := fmt.Sprint("p", i)
			s, err := c.Start(t.Context(), core.Start{Principal: who})
			if err != nil {
				t.Error(err)
				return
			}
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				text := []string{"switch to ddr mode", "open the q1 cfo outreach template", "hello", "/mode general"}[j%4]
				t0 := time.Now()
				if _, err := c.Turn(t.Context(), core.TurnRequest{SessionID: s.ID, Principal: who, Input: agentplane.TurnInput{Text: text}}); err != nil {
					failed.Add(1)
				}
				turns[i] = append(turns[i], span{t0, time.Now()})
				done.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		})
	}
	waitTurns := func(n int64) {
		for goal := done.Load() + n; done.Load() < goal; {
			<-progress
		}
	}
	waitTurns(2000) // warm: sessions started, the first turns done
	warm := time.Now()
	var reloads []span
	for k := 0; k < 20; {
		waitTurns(500)
		r := span{from: time.Now()}
		for range burst {
			if _, err := c.Reload(t.Context(), cfgs[(k+1)%2]); err != nil {
				t.Fatal(err)
			}
			k++
		}
		r.to = time.Now()
		reloads = append(reloads, r)
		took = append(took, r.to.Sub(r.from))
	}
	waitTurns(500)
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d turns failed", n)
	}
	for _, l := range turns {
		for _, s := range l {
			if s.from.Before(warm) {
				continue
			}
			overlapped := slices.ContainsFunc(reloads, func(r span) bool { return s.from.Before(r.to) && s.to.After(r.from) })
			if overlapped {
				during = append(during, s.to.Sub(s.from))
			} else {
				quiet = append(quiet, s.to.Sub(s.from))
			}
		}
	}
	return during, quiet, took
}

// p50 is the median of l (sorted in place), 0 when empty.
func p50(l []time.Duration) time.Duration {
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return l[len(l)/2]
}

// p99 is the 99th percentile of l (sorted in place), 0 when empty.
func p99(l []time.Duration) time.Duration {
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return l[len(l)*99/100]
}
