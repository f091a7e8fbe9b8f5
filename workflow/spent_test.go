package workflow_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/workflow"
)

// sending is the env's core, recording each request id a workflow sends
// to the gate, and holding a call whose request id contains hold until
// its context ends (a hung tool; arrived is closed when it is held).
type sending struct {
	*core.Core
	hold    string
	arrived chan struct{}
	once    sync.Once
	mu      sync.Mutex
	sent    []string
}

func (c *sending) Execute(ctx context.Context, inv gate.Invocation) (agentplane.ExecutionResult, error) {
	c.mu.Lock()
	c.sent = append(c.sent, inv.RequestID)
	c.mu.Unlock()
	if strings.Contains(inv.RequestID, c.hold) {
		c.once.Do(func() { close(c.arrived) })
		<-ctx.Done()
		return agentplane.ExecutionResult{}, ctx.Err()
	}
	return c.Core.Execute(ctx, inv)
}

// naming is a suggester whose every answer is one task of a tool, named
// by name from the workflow as it is.
type naming struct {
	n     atomic.Int32
	tools []string
	deps  []string
	name  func(w *workflow.Workflow, tool string) string
}

func (s *naming) Suggest(_ context.Context, r workflow.Replan) (workflow.Plan, error) {
	i := int(s.n.Add(1)) - 1
	tool := s.tools[i%len(s.tools)]
	args := map[string]any{}
	if tool == "parse_xml" {
		args["xml_files"] = []any{"config.xml"}
	}
	return workflow.Plan{Tasks: []workflow.Task{{ID: s.name(r.Workflow, tool), Tool: tool, Args: args, DependsOn: []string{s.deps[i%len(s.deps)]}}}, Why: "asked"}, nil
}

// TestDroppedTaskIDsAreSpent: a task a rollback drops (a replan added it
// after the checkpoint rolled back to) spends its id — the id names its
// attempts' request ids and its downstream idempotency key. A replan
// that names a task so again is refused, saying why, and changes
// nothing; one that names it anew runs it, and the workflow never sends
// a request id twice (which the gate would answer with the dropped
// task's result, or refuse as request_conflict, without running it).
// Found by review: the default suggester named the new task as the
// dropped one, and it was answered from the old one's record.
func TestDroppedTaskIDsAreSpent(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, &workflow.Options{Lease: 300 * time.Millisecond})
		rec := &sending{Core: e.core, hold: "-noop_r1-", arrived: make(chan struct{})}
		// names the first <tool>_rN no task has; spentToo: nor a dropped
		// one (false: the default suggester's naming before the fix)
		namer := func(spentToo bool) func(w *workflow.Workflow, tool string) string {
			return func(w *workflow.Workflow, tool string) string {
				for n := 1; ; n++ {
					id := fmt.Sprintf("%s_r%d", tool, n)
					if !slices.ContainsFunc(w.Tasks, func(t workflow.TaskRun) bool { return t.ID == id }) && !(spentToo && slices.Contains(w.Dropped, id)) {
						return id
					}
				}
			}
		}
		sug := &naming{tools: []string{"parse_xml", "noop", "parse_xml", "parse_xml"}, deps: []string{"later", "parse_xml_r1", "later", "later"}, name: namer(false)}
		engine := func() *workflow.Engine {
			return e.engineOn(t, rec, &workflow.Options{Lease: 300 * time.Millisecond, Suggester: sug})
		}
		ctx := context.Background()
		wait := func(eng *workflow.Engine, id string, after int64) *workflow.Workflow {
			t.Helper()
			c, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			w, err := eng.Wait(c, id, "alice", after)
			if err != nil {
				t.Fatalf("wait: %v", err)
			}
			return w
		}
		command := func(eng *workflow.Engine, w *workflow.Workflow, c workflow.Command) (*workflow.Workflow, error) {
			t.Helper()
			if _, err := eng.Command(ctx, w.ID, "alice", c); err != nil {
				return w, err
			}
			return wait(eng, w.ID, w.Seq), nil
		}
		must := func(w *workflow.Workflow, err error) *workflow.Workflow {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		a := engine()
		w, err := a.Start(ctx, workflow.Start{SessionID: e.session, Principal: "alice", Definition: def(t, `per_layer_validation: true
tasks:
  - {id: files, tool: list_files}
  - {id: later, tool: noop, depends_on: [files]}
`)})
		if err != nil {
			t.Fatal(err)
		}
		w = wait(a, w.ID, 0) // layer 1 ran: a decision
		replan := workflow.Command{Type: workflow.CommandReplan, NewRequirement: "parse the XML files"}
		w = must(command(a, w, replan))                                           // parse_xml_r1 added; layer 2 (later) ran
		w = must(command(a, w, workflow.Command{Type: workflow.CommandContinue})) // parse_xml_r1 ran, alone in its layer
		if i := slices.IndexFunc(w.Tasks, func(t workflow.TaskRun) bool { return t.ID == "parse_xml_r1" }); i < 0 || w.Tasks[i].Status != workflow.TaskCompleted {
			t.Fatalf("parse_xml_r1 did not run: %+v", w.Tasks)
		}
		if _, err := a.Command(ctx, w.ID, "alice", replan); err != nil { // noop_r1 added; it hangs
			t.Fatal(err)
		}
		<-rec.arrived
		before, err := a.Get(ctx, w.ID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		go func() { a.Close(time.Millisecond); close(closed) }()
		t.Cleanup(func() { <-closed })
		b := engine()
		run, stop := context.WithCancel(ctx)
		var running sync.WaitGroup
		running.Go(func() { b.Run(run) })
		t.Cleanup(func() { stop(); running.Wait() })
		if w = wait(b, w.ID, before.Seq); w.Status != workflow.StatusInterrupted {
			t.Fatalf("taken over as %s", w.Status)
		}
		// back to layer 1's end: the replanned tasks go, their ids spent
		w = must(command(b, w, workflow.Command{Type: workflow.CommandCheckpointResponse, CheckpointID: w.Interruption.Checkpoints[1], Decision: workflow.ResumeRollback}))
		if w.Status != workflow.StatusAwaitingDecision || !slices.Equal(w.Dropped, []string{"parse_xml_r1", "noop_r1"}) {
			t.Fatalf("after the rollback: %s, dropped %q", w.Status, w.Dropped)
		}
		// a replan naming a dropped task again is refused, and changes nothing
		seq := w.Seq
		if _, err := command(b, w, replan); err == nil || !strings.Contains(err.Error(), `"parse_xml_r1" named a task a rollback dropped`) {
			t.Fatalf("a replan reusing a dropped task's id: %v", err)
		}
		if w, _ = b.Get(ctx, w.ID, "alice"); w.Status != workflow.StatusAwaitingDecision || len(w.Tasks) != 2 {
			t.Fatalf("a refused replan changed the workflow: %s, %d tasks (seq %d, was %d)", w.Status, len(w.Tasks), w.Seq, seq)
		}
		// named anew, it runs
		sug.name = namer(true)
		w = must(command(b, w, replan))
		w = must(command(b, w, workflow.Command{Type: workflow.CommandContinue}))
		if i := slices.IndexFunc(w.Tasks, func(t workflow.TaskRun) bool { return t.ID == "parse_xml_r2" }); i < 0 || w.Tasks[i].Status != workflow.TaskCompleted {
			t.Fatalf("parse_xml_r2 did not run: %s %+v", w.Status, w.Tasks)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		seen := map[string]int{}
		for _, id := range rec.sent {
			if seen[id]++; seen[id] == 2 {
				t.Errorf("request id %s sent twice (sent %q)", id, rec.sent)
			}
		}
	})
}

// TestReleasedBeforeItsFirstLayerRuns: an engine closed as a workflow's
// runner begins — after Start's write started the first layer, before
// the runner ran it — releases the workflow, and the engine that takes
// it over runs that layer: it does not complete the workflow without it
// (it stepped from what next finds, and next skips tasks running). Found
// by review.
func TestReleasedBeforeItsFirstLayerRuns(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		rec := &sending{Core: e.core, hold: "-no task is held-", arrived: make(chan struct{})}
		engine := func() *workflow.Engine { return e.engineOn(t, rec, nil) }
		ctx := context.Background()
		a := engine()
		closed := make(chan struct{})
		var once sync.Once
		workflow.Looping(a, func() {
			once.Do(func() {
				go func() { a.Close(5 * time.Second); close(closed) }()
				<-workflow.Stopping(a)
			})
		})
		w, err := a.Start(ctx, workflow.Start{SessionID: e.session, Principal: "alice", Definition: def(t, "tasks: [{id: a, tool: noop}, {id: b, tool: noop, depends_on: [a]}]")})
		if err != nil {
			t.Fatal(err)
		}
		<-closed
		b := engine()
		if err := b.ClaimDue(ctx); err != nil {
			t.Fatal(err)
		}
		wait, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		for err == nil && !workflow.Terminal(w.Status) {
			w, err = b.Wait(wait, w.ID, "alice", w.Seq)
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if w.Status != workflow.StatusCompleted || !slices.Equal(rec.sent, []string{w.ID + "-a-1", w.ID + "-b-1"}) {
			t.Fatalf("taken over: %s, tasks %+v; sent %q; want completed, a then b run once each", w.Status, w.Tasks, rec.sent)
		}
	})
}
