// Command temporal measures Temporal on the DAG shapes of agentplane's
// BenchmarkWorkflow (workflow/bench_test.go) — layers of no-op
// activities, each layer after the one before, a whole workflow run per
// iteration — and an approval as a workflow update, against a running
// dev server (temporal server start-dev). Run by bench/peers/workflows.sh.
//
//	go run . -addr 127.0.0.1:7233 -n 200
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const queue = "agentplane-bench"

// Noop is the activity: it does nothing.
func Noop(ctx context.Context) error { return nil }

// Layers runs layers of width no-op activities, a layer's concurrently.
func Layers(ctx workflow.Context, layers, width int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	for range layers {
		var fs []workflow.Future
		for range width {
			fs = append(fs, workflow.ExecuteActivity(ctx, Noop))
		}
		for _, f := range fs {
			if err := f.Get(ctx, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// Approvals waits for n approvals, each an update answered at once.
func Approvals(ctx workflow.Context, n int) error {
	got := 0
	if err := workflow.SetUpdateHandler(ctx, "approve", func(ctx workflow.Context, checkpoint string) (string, error) {
		got++
		return "approved " + checkpoint, nil
	}); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return got >= n })
}

func main() {
	addr := flag.String("addr", "127.0.0.1:7233", "the Temporal server")
	n := flag.Int("n", 200, "runs per shape, and approvals")
	flag.Parse()
	quiet := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.Dial(client.Options{HostPort: *addr, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(Layers)
	w.RegisterWorkflow(Approvals)
	w.RegisterActivity(Noop)
	if err := w.Start(); err != nil {
		log.Fatal(err)
	}
	defer w.Stop()
	ctx := context.Background()
	for _, sh := range [][2]int{{3, 1}, {1, 10}, {5, 4}} {
		run := func(i int) time.Duration {
			t0 := time.Now()
			r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("layers-%dx%d-%d-%d", sh[0], sh[1], i, time.Now().UnixNano()), TaskQueue: queue}, Layers, sh[0], sh[1])
			if err == nil {
				err = r.Get(ctx, nil)
			}
			if err != nil {
				log.Fatal(err)
			}
			return time.Since(t0)
		}
		for i := range 10 {
			run(-i) // warm-up
		}
		var lat []time.Duration
		t0 := time.Now()
		for i := range *n {
			lat = append(lat, run(i))
		}
		total := time.Since(t0)
		slices.Sort(lat)
		tasks := sh[0] * sh[1]
		fmt.Printf("temporal/%dx%d\t%.0f µs/run\t%.1f µs/task\tp50 %.0f µs\tp99 %.0f µs\n", sh[0], sh[1],
			float64(total.Microseconds())/float64(*n), float64(total.Microseconds())/float64(*n*tasks),
			float64(lat[len(lat)/2].Microseconds()), float64(lat[len(lat)*99/100].Microseconds()))
	}
	// approvals: updates of a waiting workflow, each until its result
	id := fmt.Sprintf("approvals-%d", time.Now().UnixNano())
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, Approvals, *n); err != nil {
		log.Fatal(err)
	}
	var lat []time.Duration
	for i := range *n {
		t0 := time.Now()
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: "approve", Args: []any{fmt.Sprint("cp", i)},
			WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			var out string
			err = h.Get(ctx, &out)
		}
		if err != nil {
			log.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	fmt.Printf("temporal/approval-update\tp50 %.2f ms\tp99 %.2f ms\n", float64(lat[len(lat)/2].Microseconds())/1000, float64(lat[len(lat)*99/100].Microseconds())/1000)
}
