package core_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
)

// TestReloadUnderLoad measures (AGENTPLANE_MEASURE_RELOAD=1) 64 clients
// sending turns while the configuration is reloaded: every turn must be
// answered, and it reports the p99 turn latency before and during the
// reloads. A measurement, not a timing assertion.
func TestReloadUnderLoad(t *testing.T) {
	if os.Getenv("AGENTPLANE_MEASURE_RELOAD") == "" {
		t.Skip("a measurement: set AGENTPLANE_MEASURE_RELOAD=1")
	}
	c := demotest.Core(t, nil)
	ctx := context.Background()
	cfgs := []*configT{parse(t, demo.YAML), parse(t, changed)}
	const clients = 64
	stop := make(chan struct{})
	var mu sync.Mutex
	var before, during []time.Duration
	var reloading bool
	failed := 0
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			s, err := c.Start(ctx, core.Start{Principal: fmt.Sprint("p", i)})
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
				_, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: fmt.Sprint("p", i), Input: agentplane.TurnInput{Text: text}})
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					failed++
				} else if reloading {
					during = append(during, d)
				} else if len(during) == 0 {
					before = append(before, d)
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // a measurement: let the load settle before reloading
	mu.Lock()
	reloading = true
	mu.Unlock()
	took := time.Now()
	for k := range 20 {
		if _, err := c.Reload(ctx, cfgs[(k+1)%2]); err != nil {
			t.Fatal(err)
		}
	}
	took2 := time.Since(took)
	mu.Lock()
	reloading = false
	mu.Unlock()
	close(stop)
	wg.Wait()
	p99 := func(l []time.Duration) time.Duration {
		if len(l) == 0 {
			return 0
		}
		slices.Sort(l)
		return l[len(l)*99/100]
	}
	t.Logf("64 clients: %d turns failed; before: %d turns, p99 %v; during 20 reloads (%v): %d turns, p99 %v",
		failed, len(before), p99(before), took2, len(during), p99(during))
	if failed > 0 {
		t.Fatalf("%d turns failed", failed)
	}
}
