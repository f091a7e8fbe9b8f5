package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/workflow"
)

// benchCore is a core with one no-op read tool, over memory or SQLite,
// its store and a session.
func benchCore(b *testing.B, kind string) (*core.Core, store.Store, string) {
	b.Helper()
	var st store.Store = memstore.New()
	if kind != "memory" {
		sync := "FULL"
		if kind == "sqlite-normal" {
			sync = "NORMAL" // commits survive the process, not a power loss: what LangGraph's SqliteSaver commits do here
		}
		var err error
		st, err = sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), &sqlite.Options{Extensions: []store.Extension{workflow.Extension}, Synchronous: sync})
		if err != nil {
			b.Fatal(err)
		}
	}
	noop := &tool.Func{S: tool.Spec{Name: "noop", Usage: "Does nothing.", Impact: tool.ImpactRead, Risk: tool.RiskLow, InputSchema: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }}
	send := &tool.Func{S: tool.Spec{Name: "send", Usage: "Sends nothing anywhere.", Impact: tool.ImpactExternal, Risk: tool.RiskLow, InputSchema: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"sent":true}`), nil
		}}
	c, err := core.New(context.Background(), core.Source{YAML: []byte(`version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], tools: [noop, send]}]
`), Name: "bench.yaml"}, &core.Options{Store: st, Tools: []tool.Tool{noop, send}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	s, err := c.Start(context.Background(), core.Start{Principal: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return c, st, s.ID
}

// shape is a DAG of no-op tasks: layers of a width, each task depending
// on every task of the layer before.
func shape(layers, width int) *workflow.Definition {
	d := &workflow.Definition{}
	var prev []string
	for l := range layers {
		var cur []string
		for i := range width {
			id := fmt.Sprintf("t%d_%d", l, i)
			d.Tasks = append(d.Tasks, workflow.Task{ID: id, Tool: "noop", DependsOn: prev})
			cur = append(cur, id)
		}
		prev = cur
	}
	return d
}

// BenchmarkWorkflow runs whole workflows of no-op tasks, one after
// another: µs/task is the cost per task, the gate's call included (see
// BenchmarkGateCall for that alone); with SQLite every task's result, and
// every layer's start and end with its checkpoint, are committed
// (synchronous FULL: fsync per commit; NORMAL: the WAL is synced at
// checkpoints only, so commits survive a crash of the process, not of
// the machine).
func BenchmarkWorkflow(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite", "sqlite-normal"} {
		for _, sh := range []struct{ layers, width int }{{3, 1}, {1, 10}, {5, 4}} {
			b.Run(fmt.Sprintf("%s/%dx%d", kind, sh.layers, sh.width), func(b *testing.B) {
				c, st, session := benchCore(b, kind)
				eng, err := workflow.New(c, st, &workflow.Options{Poll: time.Second, Memory: kind == "memory"})
				if err != nil {
					b.Fatal(err)
				}
				defer eng.Close(time.Minute)
				def := shape(sh.layers, sh.width)
				ctx := context.Background()
				b.ResetTimer()
				for range b.N {
					w, err := eng.Start(ctx, workflow.Start{SessionID: session, Principal: "bench", Definition: def})
					if err != nil {
						b.Fatal(err)
					}
					if w, err = eng.Wait(ctx, w.ID, "bench", 0); err != nil || w.Status != workflow.StatusCompleted {
						b.Fatalf("%+v %v", w, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(def.Tasks)), "µs/task")
			})
		}
	}
}

// BenchmarkGateCall is one no-op tool call through the gate with origin
// workflow and a request id, as a task's attempt makes it: subtracted
// from BenchmarkWorkflow's µs/task, the engine's own cost per task.
func BenchmarkGateCall(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite", "sqlite-normal"} {
		b.Run(kind, func(b *testing.B) {
			c, _, session := benchCore(b, kind)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				res, err := c.Execute(ctx, gate.Invocation{SessionID: session, Tool: "noop", Args: json.RawMessage(`{}`), RequestID: fmt.Sprint("r", i),
					Origin: gate.OriginWorkflow, Principal: "bench"})
				if err != nil || res.Status != "success" {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}

// BenchmarkApprovalAtSize is one approval (approval_response, applied and
// committed) of a workflow that is a chain of external sends, each its
// own layer and approval, with 10 and 1,000 tasks, on SQLite (FULL): what
// an approval writes does not grow with the workflow. The wait for the
// next approval is not timed.
func BenchmarkApprovalAtSize(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			c, st, session := benchCore(b, "sqlite")
			eng, err := workflow.New(c, st, &workflow.Options{Poll: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close(time.Minute)
			def := &workflow.Definition{}
			for i := range n {
				t := workflow.Task{ID: fmt.Sprint("s", i), Tool: "send"}
				if i > 0 {
					t.DependsOn = []string{fmt.Sprint("s", i-1)}
				}
				def.Tasks = append(def.Tasks, t)
			}
			ctx := context.Background()
			var w *workflow.Workflow
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for w == nil || w.Approval == nil {
					if w == nil || w.Status == workflow.StatusCompleted {
						// Start may return it awaiting its first approval already
						if w, err = eng.Start(ctx, workflow.Start{SessionID: session, Principal: "bench", Definition: def}); err != nil {
							b.Fatal(err)
						}
						continue
					}
					if w, err = eng.Wait(ctx, w.ID, "bench", w.Seq); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if _, err := eng.Command(ctx, w.ID, "bench", workflow.Command{Type: workflow.CommandApprovalResponse, CheckpointID: w.Approval.CheckpointID, Approved: yes()}); err != nil {
					b.Fatal(err)
				}
				w.Approval = nil
			}
		})
	}
}

// BenchmarkConcurrentWorkflows runs 32 workflows at a time, each a chain
// of three no-op tasks, on SQLite at synchronous FULL (what LangGraph JS
// runs beside it in bench/peers: 32 runs of its SqliteSaver at once):
// runs/s.
func BenchmarkConcurrentWorkflows(b *testing.B) {
	c, st, session := benchCore(b, "sqlite")
	eng, err := workflow.New(c, st, &workflow.Options{Poll: time.Second, Concurrency: 32})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close(time.Minute)
	def := shape(3, 1)
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				w, err := eng.Start(ctx, workflow.Start{SessionID: session, Principal: "bench", Definition: def})
				if err != nil {
					b.Error(err)
					return
				}
				if w, err = eng.Wait(ctx, w.ID, "bench", 0); err != nil || w.Status != workflow.StatusCompleted {
					b.Errorf("%+v %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}
