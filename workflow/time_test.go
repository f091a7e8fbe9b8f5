package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/workflow"
)

// bubbled is a core over memory with Go tools only (no network: it runs
// inside a synctest bubble, on the bubble's clock), and an engine over
// it; both close when the test ends, inside the bubble.
type bubbled struct {
	core    *core.Core
	eng     *workflow.Engine
	session string
	flaky   atomic.Int32  // failures flaky has left
	release chan struct{} // hold returns when it is closed
}

func newBubbled(t *testing.T, opts *workflow.Options) *bubbled {
	t.Helper()
	b := &bubbled{release: make(chan struct{})}
	tools := []tool.Tool{
		jsonTool("noop", "Does nothing.", tool.ImpactRead, "", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true}`), nil
		}),
		jsonTool("flaky", "Fails a few times, then works.", tool.ImpactRead, "", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			if b.flaky.Add(-1) >= 0 {
				return nil, tool.Errorf("unreachable", "not yet")
			}
			return json.RawMessage(`{"ok":true}`), nil
		}),
		jsonTool("hold", "Sends a letter; holds until released.", tool.ImpactRead, "", func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			<-b.release
			return json.RawMessage(`{"sent":true}`), nil
		}),
	}
	yaml := `version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], tools: [noop, flaky, hold]}]
`
	ctx := context.Background()
	st := memstore.New()
	c, err := core.New(ctx, core.Source{YAML: []byte(yaml), Name: "wf.yaml"}, &core.Options{Store: st, Tools: tools, ToolTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.Start(ctx, core.Start{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &workflow.Options{}
	}
	opts.Memory = true
	b.core, b.session = c, s.ID
	if b.eng, err = workflow.New(c, st, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
		b.eng.Close(time.Minute)
	})
	return b
}

func (b *bubbled) start(t *testing.T, src string) *workflow.Workflow {
	t.Helper()
	w, err := b.eng.Start(t.Context(), workflow.Start{SessionID: b.session, Principal: "alice", Definition: def(t, src)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A failed attempt waits its backoff before the next — 100 ms, then
// twice that — on the bubble's clock: exactly, and without the test
// waiting for it.
func TestBackoffOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubbled(t, &workflow.Options{Backoff: 100 * time.Millisecond})
		b.flaky.Store(2)
		begun := time.Now()
		w := b.start(t, "tasks: [{id: f, tool: flaky}]")
		w, err := b.eng.Wait(t.Context(), w.ID, "alice", 0)
		if err != nil {
			t.Fatal(err)
		}
		if w.Status != workflow.StatusCompleted || w.Tasks[0].Attempts != 3 {
			t.Fatalf("%s, %d attempts", w.Status, w.Tasks[0].Attempts)
		}
		if took := time.Since(begun); took != 300*time.Millisecond {
			t.Fatalf("three attempts took %v; want the backoffs, 100 ms + 200 ms", took)
		}
	})
}

// The runner keeps its lease while it waits — paused for a command, and
// while a task hangs — renewing it every third of the lease on a
// goroutine of its own: an hour later the claim still runs out in the
// future. Once the engine closes, the paused workflow is released.
func TestLeaseRenewedWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 300 * time.Millisecond
		b := newBubbled(t, &workflow.Options{Lease: lease, Poll: time.Hour}) // the runner looks at its queue only when poked
		paused := b.start(t, "per_layer_validation: true\ntasks: [{id: a, tool: noop}, {id: b, tool: noop, depends_on: [a]}]")
		hung := b.start(t, "tasks: [{id: h, tool: hold}]")
		if _, err := b.eng.Wait(t.Context(), paused.ID, "alice", 0); err != nil {
			t.Fatal(err)
		}
		for range 12 {
			time.Sleep(5 * time.Minute) // the bubble's clock: no test waits
			synctest.Wait()
			now := time.Now()
			for _, id := range []string{paused.ID, hung.ID} {
				if until := workflow.LeaseUntil(b.eng, id); !until.After(now) || until.Sub(now) > lease {
					t.Fatalf("at %v the lease of %s runs until %v: not renewed", now, id, until)
				}
			}
		}
		if got := b.eng.Holding(); len(got) != 2 {
			t.Fatalf("the engine holds %v after an hour", got)
		}
		// a command answered after the hour: the runner was there all along
		w, err := b.eng.Get(t.Context(), paused.ID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.eng.Command(t.Context(), paused.ID, "alice", workflow.Command{Type: "continue", DecisionID: w.Decision.ID}); err != nil {
			t.Fatal(err)
		}
		close(b.release)
		if w, err = b.eng.Wait(t.Context(), hung.ID, "alice", 0); err != nil || w.Status != workflow.StatusCompleted {
			t.Fatalf("the hung task's workflow: %+v %v", w, err)
		}
	})
}

// Every command handed to a runner is answered once, and none waits on a
// runner that is gone: commands sent at once to paused workflows while
// the engine closes, or while another engine takes a workflow over (its
// lease moved on), each return — applied, refused, or (queued for
// whoever holds the workflow next) at their deadline — and no pause is
// answered twice. A command left without an answer would hang the bubble.
func TestEveryCommandAnswered(t *testing.T) {
	for _, end := range []string{"close", "lease_lost"} {
		t.Run(end, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBubbled(t, &workflow.Options{Lease: 300 * time.Millisecond})
				var ws []*workflow.Workflow
				for range 4 {
					w := b.start(t, "per_layer_validation: true\ntasks: [{id: a, tool: noop}, {id: b, tool: noop, depends_on: [a]}]")
					w, err := b.eng.Wait(t.Context(), w.ID, "alice", 0)
					if err != nil || w.Status != workflow.StatusAwaitingDecision {
						t.Fatalf("%+v %v", w, err)
					}
					ws = append(ws, w)
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				errs := make([][]error, len(ws))
				var wg sync.WaitGroup
				for i, w := range ws {
					errs[i] = make([]error, 8)
					for k := range errs[i] {
						wg.Go(func() {
							_, errs[i][k] = b.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "continue", DecisionID: w.Decision.ID})
						})
					}
				}
				switch end {
				case "close":
					b.eng.Close(time.Minute)
				case "lease_lost":
					for _, w := range ws {
						workflow.Steal(b.eng, w.ID)
					}
				}
				wg.Wait() // each returned: none hung on a runner that had gone
				for i, w := range ws {
					applied := 0
					for _, err := range errs[i] {
						switch {
						case err == nil:
							applied++
						case errors.Is(err, context.DeadlineExceeded), answered(err, w.Decision.ID):
						case strings.Contains(err.Error(), "lease lost"):
							// the write the lease no longer allowed
						default:
							t.Fatalf("%s: %v", w.ID, err)
						}
					}
					if applied > 1 {
						t.Fatalf("%s: decision %s answered %d times", w.ID, w.Decision.ID, applied)
					}
				}
				if end == "lease_lost" {
					synctest.Wait()
					time.Sleep(time.Second) // a renewal finds the lease gone
					synctest.Wait()
					if got := b.eng.Holding(); len(got) != 0 {
						t.Fatalf("the engine still runs %v after losing their leases", got)
					}
				}
			})
		})
	}
}
