package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/workflow"
)

// downstream is an HTTP service that acts once per Idempotency-Key, as a
// well-behaved payment or mail API does, and counts what it received.
type downstream struct {
	mu      sync.Mutex
	seen    map[string]int // key -> requests received
	acted   map[string]int // key -> times it acted (must stay 1)
	noKey   int
	failing atomic.Int32 // answer 503 to this many requests first
	// stall, when set, holds the first request until it is closed (after
	// the client gave up on it, the service still acts on it then).
	stall   chan struct{}
	stalled int
	arrived chan struct{} // closed when the stalled request arrived
	// auth is the last call's authorization, as its invocation context said
	auth map[string]any
}

func newDownstream(t *testing.T) (*downstream, *httptest.Server) {
	d := &downstream{seen: map[string]int{}, acted: map[string]int{}, arrived: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		var body struct {
			Context struct {
				Authorization map[string]any `json:"authorization"`
			} `json:"context"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		d.mu.Lock()
		d.auth = body.Context.Authorization
		if key == "" {
			d.noKey++
		}
		d.seen[key]++
		first := d.stall != nil && d.stalled == 0
		d.stalled++
		stall := d.stall
		d.mu.Unlock()
		if first {
			close(d.arrived)
			<-stall
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.failing.Load() > 0 {
			d.failing.Add(-1)
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		if d.acted[key] == 0 {
			d.acted[key] = 1
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"published": %q}`, key)
	}))
	t.Cleanup(srv.Close)
	return d, srv
}

func (d *downstream) counts() (keys, requests int, doubled []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, n := range d.acted {
		keys++
		if n != 1 {
			doubled = append(doubled, k)
		}
	}
	for _, n := range d.seen {
		requests += n
	}
	return keys, requests, doubled
}

// env is a core over SQLite with the workflow tables, test tools and an
// engine.
type env struct {
	core    *core.Core
	store   store.Store // the core's, which the engines are given too
	eng     *workflow.Engine
	session string
	down    *downstream
	deletes atomic.Int32  // calls of the external Go tool delete_files
	flaky   atomic.Int32  // failures flaky has left
	holds   atomic.Int32  // calls of the external Go tool hold
	held    chan struct{} // closed at hold's first call
	release chan struct{} // hold returns when it is closed
	once    sync.Once
	dbPath  string
}

// unhold lets every hold call return.
func (e *env) unhold() { e.once.Do(func() { close(e.release) }) }

func jsonTool(name, usage string, impact tool.Impact, schema string, fn func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)) tool.Tool {
	if schema == "" {
		schema = `{"type":"object"}`
	}
	return &tool.Func{S: tool.Spec{Name: name, Usage: usage, Impact: impact, Risk: tool.RiskLow, InputSchema: json.RawMessage(schema)}, Fn: fn}
}

func newEnv(t *testing.T, opts *workflow.Options) *env { return newEnvOn(t, "sqlite", opts) }

// eachStore runs a test on SQLite, on PostgreSQL (skipped where
// $AGENTPLANE_TEST_POSTGRES names no server) and in memory.
func eachStore(t *testing.T, test func(t *testing.T, kind string)) {
	for _, kind := range []string{"sqlite", "postgres", "memory"} {
		t.Run(kind, func(t *testing.T) { test(t, kind) })
	}
}

// eachSharedStore runs a test of several engines on one database on
// SQLite and PostgreSQL (in memory, each engine keeps its own).
func eachSharedStore(t *testing.T, test func(t *testing.T, kind string)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { test(t, kind) })
	}
}

// newEnvOn is an env over SQLite or a PostgreSQL schema of the test's own.
func newEnvOn(t *testing.T, kind string, opts *workflow.Options) *env {
	t.Helper()
	e := &env{dbPath: filepath.Join(t.TempDir(), "w.db"), release: make(chan struct{}), held: make(chan struct{})}
	var srv *httptest.Server
	e.down, srv = newDownstream(t)
	ctx := context.Background()
	exts := []store.Extension{workflow.Extension}
	var st store.Store
	var err error
	switch kind {
	case "postgres":
		st, err = postgres.Open(ctx, pgtest.Schema(t), &postgres.Options{Extensions: exts})
	case "memory":
		st = memstore.New()
	default:
		st, err = sqlite.Open(ctx, e.dbPath, &sqlite.Options{Extensions: exts})
	}
	if err != nil {
		t.Fatal(err)
	}
	tools := []tool.Tool{
		jsonTool("noop", "Does nothing.", tool.ImpactRead, "", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true}`), nil
		}),
		jsonTool("list_files", "List the files of a directory.", tool.ImpactRead, "", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"files":["a.txt","config.xml"],"dir":"/srv"}`), nil
		}),
		jsonTool("parse_xml", "Parse XML files into records. Read XML configuration.", tool.ImpactRead,
			`{"type":"object","properties":{"xml_files":{"type":"array","items":{"type":"string"}}},"required":["xml_files"]}`,
			func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`{"parsed":` + string(args) + `}`), nil
			}),
		jsonTool("count_words", "Count the words of a text.", tool.ImpactRead,
			`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
			func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
				var a struct{ Text string }
				json.Unmarshal(args, &a)
				return json.Marshal(map[string]int{"words": len(strings.Fields(a.Text))})
			}),
		jsonTool("flaky", "Fails a few times, then works.", tool.ImpactRead, "", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			if e.flaky.Add(-1) >= 0 {
				return nil, tool.Errorf("unreachable", "not yet")
			}
			return json.RawMessage(`{"ok":true}`), nil
		}),
		jsonTool("broken", "Always fails.", tool.ImpactRead, "", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, tool.Errorf("unreachable", "down")
		}),
		jsonTool("delete_files", "Delete files for good.", tool.ImpactExternal, "", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			e.deletes.Add(1)
			return json.RawMessage(`{"deleted":true}`), nil
		}),
		jsonTool("hold", "Sends a letter; holds until released.", tool.ImpactExternal, "", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			if e.holds.Add(1) == 1 {
				close(e.held)
			}
			<-e.release // a hung call: it ignores its context, as a stuck client library may
			return json.RawMessage(`{"sent":true}`), nil
		}),
	}
	yaml := fmt.Sprintf(`version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], tools: [noop, list_files, parse_xml, count_words, flaky, broken, delete_files, hold, publish]}]
tools:
  - {name: publish, description: "Publish a report to the team's feed.", impact: external, http: {url: %q}, input_schema: {type: object}}
`, srv.URL+"/publish")
	c, err := core.New(ctx, core.Source{YAML: []byte(yaml), Name: "wf.yaml"}, &core.Options{Store: st, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.Start(ctx, core.Start{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	e.core, e.store, e.session = c, st, s.ID
	e.eng = e.engine(t, opts)
	t.Cleanup(e.unhold) // before the engines close
	return e
}

// engine returns another engine over the env's core: another instance.
func (e *env) engine(t *testing.T, opts *workflow.Options) *workflow.Engine {
	t.Helper()
	return e.engineOn(t, e.core, opts)
}

// engineOn is engine calling the gate through c (a core that records or
// holds the calls).
func (e *env) engineOn(t *testing.T, c workflow.Sessions, opts *workflow.Options) *workflow.Engine {
	t.Helper()
	if opts == nil {
		opts = &workflow.Options{}
	}
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	if opts.Backoff == 0 {
		opts.Backoff = time.Millisecond
	}
	opts.Memory = true // the journal in memory, where the env's store is
	eng, err := workflow.New(c, e.store, opts)
	if err != nil {
		t.Fatal(err)
	}
	workflow.CheckWrites(t, eng)
	t.Cleanup(func() { eng.Close(5 * time.Second) })
	return eng
}

func def(t *testing.T, src string) *workflow.Definition {
	t.Helper()
	d, err := workflow.Parse([]byte(src), "test.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (e *env) start(t *testing.T, src string, policy string) *workflow.Workflow {
	t.Helper()
	w, err := e.eng.Start(context.Background(), workflow.Start{SessionID: e.session, Principal: "alice", Definition: def(t, src), ResumePolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return e.wait(t, w.ID, 0)
}

func (e *env) wait(t *testing.T, id string, after int64) *workflow.Workflow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := e.eng.Wait(ctx, id, "alice", after)
	if err != nil {
		t.Fatalf("wait %s: %v", id, err)
	}
	return w
}

// command sends a command and waits for the next pause or the end.
func (e *env) command(t *testing.T, w *workflow.Workflow, c workflow.Command) *workflow.Workflow {
	t.Helper()
	if _, err := e.eng.Command(context.Background(), w.ID, "alice", c); err != nil {
		t.Fatalf("%s: %v", c.Type, err)
	}
	return e.wait(t, w.ID, w.Seq)
}

func (e *env) events(t *testing.T, id string) []workflow.Event {
	t.Helper()
	raws, _, err := e.eng.Events(context.Background(), id, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]workflow.Event, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatal(err)
		}
		if out[i].Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, out[i].Seq)
		}
	}
	return out
}

// types lists the events' types (with their tasks); the tasks of a layer
// finish in any order, so each run of task events is sorted.
func types(evs []workflow.Event) string {
	var b []string
	run := 0
	for _, e := range evs {
		s := e.Type
		if e.Task != "" {
			s += ":" + e.Task
		} else {
			slices.Sort(b[run:])
			run = len(b) + 1
		}
		b = append(b, s)
	}
	slices.Sort(b[min(run, len(b)):])
	return strings.Join(b, " ")
}

func yes() *bool { v := true; return &v }
func no() *bool  { v := false; return &v }

const threeLayers = `name: report
tasks:
  - {id: files, tool: list_files}
  - {id: other, tool: noop}
  - {id: words, tool: count_words, args: {text: "dir ${files.output.dir} has ${files.output.files.1}"}, depends_on: [files]}
  - {id: publish, tool: publish, args: {count: "${words.output.words}", first: "${files.output.files.0}"}, depends_on: [words, other, files]}
`

func TestLayersApprovalAndReferences(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		w := e.start(t, threeLayers, "")
		if w.Status != workflow.StatusAwaitingApproval || w.Approval == nil || w.Approval.Layer != 3 {
			t.Fatalf("want an approval before layer 3: %+v", w)
		}
		call := w.Approval.Tasks[0]
		if call.ID != "publish" || call.Impact != "external" || string(call.Args) != `{"count":4,"first":"a.txt"}` {
			t.Fatalf("approval shows %+v (%s)", call, call.Args)
		}
		if got := string(w.Tasks[2].Resolved); got != `{"text":"dir /srv has config.xml"}` {
			t.Fatalf("words ran with %s", got)
		}
		// an answer naming another checkpoint is refused and changes nothing
		_, err := e.eng.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "approval_response", CheckpointID: "wf_other-a1", Approved: yes()})
		if agentplane.ErrorCode(err) != agentplane.CodeInvalidState || !strings.Contains(err.Error(), "not the pending approval") {
			t.Fatalf("wrong checkpoint: %v", err)
		}
		if again, _ := e.eng.Get(context.Background(), w.ID, "alice"); again.Seq != w.Seq || again.Status != w.Status {
			t.Fatalf("a refused command changed the workflow: %+v", again)
		}
		w = e.command(t, w, workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: yes(), Feedback: "ok"})
		if w.Status != workflow.StatusCompleted {
			t.Fatalf("after approval: %+v", w)
		}
		keys, requests, doubled := e.down.counts()
		if keys != 1 || requests != 1 || len(doubled) != 0 {
			t.Fatalf("downstream: %d keys, %d requests, doubled %v", keys, requests, doubled)
		}
		e.down.mu.Lock()
		auth := e.down.auth // the service was told the call runs under the human's approval of its layer
		e.down.mu.Unlock()
		if auth["kind"] != agentplane.AuthorizedByApproval || auth["approval"] == "" {
			t.Fatalf("the approved call's authorization: %v", auth)
		}
		want := "workflow_started checkpoint_saved layer_started task_completed:files task_completed:other layer_complete checkpoint_saved " +
			"layer_started task_completed:words layer_complete checkpoint_saved approval_required layer_started task_completed:publish " +
			"layer_complete checkpoint_saved completed"
		if got := types(e.events(t, w.ID)); got != want {
			t.Fatalf("events\n got  %s\n want %s", got, want)
		}
		// answering the same approval twice is refused
		_, err = e.eng.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "approval_response", CheckpointID: "x", Approved: yes()})
		if agentplane.ErrorCode(err) != agentplane.CodeInvalidState {
			t.Fatalf("a command for a finished workflow: %v", err)
		}
		// the audit log has the publish call under the approval, origin workflow
		recs, _ := e.core.Records(context.Background(), e.session, 0)
		found := false
		for _, r := range recs {
			if r.Intent != nil && r.Intent.Action == "publish" {
				found = r.Intent.Origin == "workflow" && r.Approval != "" && r.Result.Status == agentplane.StatusSuccess
			}
		}
		if !found {
			t.Fatal("no approved workflow call of publish in the audit log")
		}
		cps, _ := e.eng.Checkpoints(context.Background(), w.ID)
		if len(cps) != 4 {
			t.Fatalf("%d checkpoints", len(cps))
		}
	})
}

func TestRejectedApprovalAborts(t *testing.T) {
	e := newEnv(t, nil)
	w := e.start(t, "tasks: [{id: del, tool: delete_files}]", "")
	w = e.command(t, w, workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: no(), Feedback: "not today"})
	if w.Status != workflow.StatusAborted || !strings.Contains(w.Reason, "not today") || e.deletes.Load() != 0 {
		t.Fatalf("%+v, %d deletes", w, e.deletes.Load())
	}
}

func TestRetriesAndSafeToFail(t *testing.T) {
	e := newEnv(t, nil)
	e.flaky.Store(2)
	w := e.start(t, `tasks:
  - {id: f, tool: flaky}
  - {id: b, tool: broken}
  - {id: after_b, tool: noop, depends_on: [b]}
  - {id: after_f, tool: noop, depends_on: [f]}
`, "")
	if w.Status != workflow.StatusCompleted {
		t.Fatalf("%+v", w)
	}
	byID := map[string]workflow.TaskRun{}
	for _, t := range w.Tasks {
		byID[t.ID] = t
	}
	if f := byID["f"]; f.Status != workflow.TaskCompleted || f.Attempts != 3 || f.RequestID != w.ID+"-f-3" {
		t.Fatalf("flaky: %+v", f)
	}
	if b := byID["b"]; b.Status != workflow.TaskFailed || b.Attempts != 3 {
		t.Fatalf("broken: %+v", b)
	}
	if byID["after_b"].Status != workflow.TaskSkipped || byID["after_f"].Status != workflow.TaskCompleted {
		t.Fatalf("%+v", byID)
	}
}

func TestExternalFailureStops(t *testing.T) {
	e := newEnv(t, nil)
	e.down.failing.Store(100)
	w := e.start(t, `tasks:
  - {id: p, tool: publish}
  - {id: later, tool: noop, depends_on: [p]}
`, "")
	w = e.command(t, w, workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: yes()})
	if w.Status != workflow.StatusFailed || !strings.Contains(w.Reason, "task p (publish) failed") {
		t.Fatalf("%+v", w)
	}
	// every retry carried the task's one key
	e.down.mu.Lock()
	defer e.down.mu.Unlock()
	if len(e.down.seen) != 1 || e.down.seen[gate.DownstreamKey(w.Principal, w.SessionID, w.ID+"-p")] != 3 { // the task's key, as the gate derives it
		t.Fatalf("keys seen %v", e.down.seen)
	}
}

func TestPerLayerDecisions(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		w := e.start(t, `per_layer_validation: true
tasks:
  - {id: files, tool: list_files}
  - {id: n, tool: noop, depends_on: [files]}
`, "")
		if w.Status != workflow.StatusAwaitingDecision || w.Decision == nil || w.Decision.Layer != 1 {
			t.Fatalf("%+v", w)
		}
		// replan: the XML parser, with the files found, after layer 1
		w = e.command(t, w, workflow.Command{Type: "replan_dag", NewRequirement: "parse the XML files we found",
			AvailableContext: json.RawMessage(`{"xml_files":["config.xml"]}`)})
		if w.Status != workflow.StatusAwaitingDecision || len(w.Tasks) != 3 {
			t.Fatalf("after replan: %+v", w)
		}
		added := w.Tasks[2]
		if added.Tool != "parse_xml" || added.Status != workflow.TaskCompleted || string(added.Output) != `{"parsed":{"xml_files":["config.xml"]}}` {
			t.Fatalf("added %+v", added)
		}
		evs := e.events(t, w.ID)
		var replanned *workflow.Event
		for i := range evs {
			if evs[i].Type == workflow.EventReplanned {
				replanned = &evs[i]
			}
		}
		if replanned == nil || !strings.Contains(replanned.Reason, "parse_xml") || len(replanned.Tasks) != 1 {
			t.Fatalf("replanned event %+v", replanned)
		}
		// a requirement nothing matches is refused and changes nothing
		if _, err := e.eng.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "replan_dag", NewRequirement: "zzqx vvbn"}); err == nil {
			t.Fatal("a replan nothing matches was accepted")
		}
		w = e.command(t, w, workflow.Command{Type: "continue"})
		if w.Status != workflow.StatusCompleted {
			t.Fatalf("%+v", w)
		}
		if _, err := e.eng.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "abort", Reason: "late"}); agentplane.ErrorCode(err) != agentplane.CodeInvalidState {
			t.Fatalf("abort of a completed workflow: %v", err)
		}
		w = e.start(t, "per_layer_validation: true\ntasks: [{id: a, tool: noop}, {id: b, tool: noop, depends_on: [a]}]", "")
		w = e.command(t, w, workflow.Command{Type: "abort", Reason: "enough"})
		if w.Status != workflow.StatusAborted || w.Reason != "enough" || w.Tasks[1].Status != workflow.TaskPending {
			t.Fatalf("%+v", w)
		}
	})
}

// The seed's BUG-001: commands enqueued concurrently are all processed,
// exactly once, in order; and one decision answered ten times at once is
// applied once (issue 33): the others answer a decision answered already.
func TestCommandQueueConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		src := "per_layer_validation: true\ntasks:\n  - {id: t0, tool: noop}\n"
		for i := 1; i < 12; i++ { // more layers than commands: it cannot end before every command is queued
			src += fmt.Sprintf("  - {id: t%d, tool: noop, depends_on: [t%d]}\n", i, i-1)
		}
		w := e.start(t, src, "")
		var wg sync.WaitGroup
		seqs := make([]int64, 10)
		errs := make([]error, 10)
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seqs[i], errs[i] = e.eng.Command(context.Background(), w.ID, "alice", workflow.Command{Type: "continue", Reason: fmt.Sprint(i)})
			}()
		}
		wg.Wait()
		applied := 0
		seen := map[int64]bool{}
		for i := range 10 {
			if seen[seqs[i]] || seqs[i] < 1 || seqs[i] > 10 {
				t.Fatalf("seq %d twice or out of range: %v %v", seqs[i], seqs, errs)
			}
			seen[seqs[i]] = true
			if errs[i] == nil {
				applied++
			}
		}
		// each decision pending as they came is answered once (one that
		// came after the first was applied answers the next decision); the
		// others are refused, naming it, or because nothing waited for a
		// decision as they came (the next layer ran)
		if applied < 1 {
			t.Fatalf("%d applied: %v", applied, errs)
		}
		for _, err := range errs {
			switch code := agentplane.ErrorCode(err); {
			case err == nil:
			case code == agentplane.CodeAlreadyAnswered && strings.Contains(err.Error(), "was answered already"):
			case code == agentplane.CodeInvalidState && strings.Contains(err.Error(), "decision"):
			default:
				t.Fatalf("refused for %v (%s)", err, code)
			}
		}
		if w := e.wait(t, w.ID, 0); w.Layer != applied+1 {
			t.Fatalf("%d continues applied, %d layers run", applied, w.Layer)
		}
		// in order: each processed no earlier than the one queued before it
		if q, ok := e.store.(store.Querier); ok {
			var prev int64
			err := q.Query(context.Background(), `SELECT seq, done FROM workflow_commands WHERE workflow_id = ? ORDER BY seq`, []any{w.ID},
				func(scan func(...any) error) error {
					var seq, done int64
					if err := scan(&seq, &done); err != nil {
						return err
					}
					if done < prev {
						return fmt.Errorf("command %d was processed before the one queued before it", seq)
					}
					prev = done
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestQueuedWhileTheLastLayerRuns: an answer sent to another instance
// while the workflow's last layer runs is queued; the workflow then
// finishes on its own instance, whose runner looks at its queue only when
// a command may be there. The queued answer is still answered (refused:
// already answered) — its sender does not wait forever.
func TestQueuedWhileTheLastLayerRuns(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, &workflow.Options{Poll: time.Hour}) // the runner never polls its queue on a timer
		other := e.engine(t, nil)
		w := e.start(t, "name: one\ntasks:\n  - {id: h, tool: hold}\n", "")
		if w.Status != workflow.StatusAwaitingApproval {
			t.Fatalf("%+v", w)
		}
		approve := workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: yes()}
		if _, err := e.eng.Command(context.Background(), w.ID, "alice", approve); err != nil {
			t.Fatal(err)
		}
		<-e.held // the last layer runs
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		answered := make(chan error, 1)
		go func() { _, err := other.Command(ctx, w.ID, "alice", approve); answered <- err }()
		// the answer is in the queue before the layer ends
		q := e.store.(store.Querier)
		for n := 0; n == 0; {
			if err := q.Query(ctx, `SELECT count(*) FROM workflow_commands WHERE workflow_id = ?`, []any{w.ID}, func(scan func(...any) error) error { return scan(&n) }); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatal("the other instance's answer was never queued")
			}
			runtime.Gosched()
		}
		e.unhold()
		if err := <-answered; agentplane.ErrorCode(err) != agentplane.CodeAlreadyAnswered && agentplane.ErrorCode(err) != agentplane.CodeInvalidState {
			t.Fatalf("the queued answer: %v (want it refused, not left waiting)", err)
		}
		if got := e.wait(t, w.ID, 0); got.Status != workflow.StatusCompleted {
			t.Fatalf("%+v", got)
		}
	})
}

// TestGetWhileHeld: while this engine's runner holds a workflow, Get
// answers from what the runner last committed, reading nothing — and
// that is the workflow as stored, as another instance (no runner) reads
// it; the workflow Get returns is the caller's to change; CommandResult
// answers with the workflow as the command left it. (CheckWrites holds
// Get to a write already in the database before the runner took it.)
func TestGetWhileHeld(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, nil)
		ctx := context.Background()
		w := e.start(t, threeLayers, "")
		if w.Status != workflow.StatusAwaitingApproval {
			t.Fatalf("want a pause at the approval: %+v", w)
		}
		other := e.engine(t, nil) // another instance: it holds nothing
		ran := func() int64 { return e.store.(store.Counted).Stats().Statements }

		// the count is the store's: the engines' polls and the runner's
		// lease renewals may land in the window, so the fewest of a few
		// tries is Get's own — a Get that reads the database runs at
		// least one statement every time
		var held *workflow.Workflow
		fewest := int64(-1)
		for try := 0; try < 20 && fewest != 0; try++ {
			before := ran()
			var err error
			if held, err = e.eng.Get(ctx, w.ID, "alice"); err != nil {
				t.Fatal(err)
			}
			if n := ran() - before; fewest < 0 || n < fewest {
				fewest = n
			}
		}
		if fewest != 0 {
			t.Fatalf("Get of a workflow this engine's runner holds ran %d statements at the fewest; want none", fewest)
		}
		before := ran()
		stored, err := other.Get(ctx, w.ID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if ran() == before {
			t.Fatal("another instance's Get read nothing: it holds no runner for the workflow")
		}
		got, _ := json.Marshal(held)
		want, _ := json.Marshal(stored)
		if !bytes.Equal(got, want) {
			t.Fatalf("held copy differs from the stored workflow:\n got %s\nwant %s", got, want)
		}
		// another principal is told it does not exist, as from the database
		if _, err := e.eng.Get(ctx, w.ID, "mallory"); agentplane.ErrorCode(err) != agentplane.CodeNotFound {
			t.Fatalf("another principal's Get: %v", err)
		}
		// the caller's copy: changing it changes nothing the next Get sees
		held.Status, held.Tasks[0].Status, held.Tasks = "mangled", "mangled", held.Tasks[:1]
		again, err := e.eng.Get(ctx, w.ID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(again); !bytes.Equal(got, want) {
			t.Fatalf("a changed copy leaked into the next Get:\n got %s\nwant %s", got, want)
		}
		// CommandResult: the workflow as the command left it — the
		// approval answered, the layer it released not finished yet
		seq, after, err := e.eng.CommandResult(ctx, w.ID, "alice", workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: yes()})
		if err != nil || seq < 1 || after == nil || after.Seq < w.Seq || after.Approval != nil || after.Status == workflow.StatusAwaitingApproval || after.Status == workflow.StatusCompleted {
			t.Fatalf("CommandResult of the approval: %d %+v %v", seq, after, err)
		}
		// and Get reads the runner's writes since
		w = e.wait(t, w.ID, after.Seq)
		if got, err := e.eng.Get(ctx, w.ID, "alice"); err != nil || got.Status != workflow.StatusCompleted || got.Seq != w.Seq {
			t.Fatalf("Get after the approval: %+v %v", got, err)
		}
	})
}

// TestQueuedAnswerGoesFirst: an answer another instance queued goes
// before one sent to the runner's own instance after it, though that
// runner has not looked at its queue since (its Poll is an hour): its
// write of the direct answer finds the queued one and writes nothing,
// the direct answer joins the queue behind it, and the queued rejection
// is the one applied.
func TestQueuedAnswerGoesFirst(t *testing.T) {
	eachSharedStore(t, func(t *testing.T, kind string) {
		e := newEnvOn(t, kind, &workflow.Options{Poll: time.Hour})
		defer e.unhold()
		other := e.engine(t, nil)
		w := e.start(t, "name: one\ntasks:\n  - {id: h, tool: hold}\n", "")
		if w.Status != workflow.StatusAwaitingApproval {
			t.Fatalf("%+v", w)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		queued := make(chan error, 1)
		go func() {
			_, err := other.Command(ctx, w.ID, "alice", workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: no()})
			queued <- err
		}()
		q := e.store.(store.Querier)
		for n := 0; n == 0; {
			if err := q.Query(ctx, `SELECT count(*) FROM workflow_commands WHERE workflow_id = ? AND status = 'queued'`, []any{w.ID}, func(scan func(...any) error) error { return scan(&n) }); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatal("the other instance's answer was never queued")
			}
			runtime.Gosched()
		}
		_, direct := e.eng.Command(ctx, w.ID, "alice", workflow.Command{Type: "approval_response", CheckpointID: w.Approval.CheckpointID, Approved: yes()})
		if err := <-queued; err != nil {
			t.Fatalf("the answer queued first: %v (want it applied)", err)
		}
		if c := agentplane.ErrorCode(direct); c != agentplane.CodeAlreadyAnswered && c != agentplane.CodeInvalidState {
			t.Fatalf("the direct answer after it: %v (want it refused: answered already)", direct)
		}
		if got := e.wait(t, w.ID, 0); got.Status != workflow.StatusAborted {
			t.Fatalf("the workflow went on as %s; want aborted by the rejection queued first", got.Status)
		}
	})
}
