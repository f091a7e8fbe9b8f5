// Command cost prices agentplane's durable paths in instructions and SQL
// statements (make cost; not in CI: minutes): a 3×1 workflow run, a
// notification emitted, dispatched and acknowledged, a plain turn, a
// confirmation question and the confirmed call after it, and a workflow
// approval, on SQLite (FULL) and on PostgreSQL ($AGENTPLANE_TEST_POSTGRES;
// skipped when unset).
//
// Instructions are counted by valgrind's callgrind (apt-get install
// valgrind), which gives the same total twice on the same inputs, where
// timings on a shared machine move by 2× from one day to the next. Each
// path runs in a process of its own twice, with few and with many
// operations after the same warm-up; the difference of the two totals over
// the difference in operations is the cost of one operation — opening the
// database, migrating it and warming up cancel out, and what an operation
// leaves to background goroutines (the group commit's leader, the
// garbage collector) is counted. On PostgreSQL only agentplane's process
// is counted, not the server's. Statements, transactions and round trips
// come from the store's own counters (store.Stats) over the measured
// operations.
//
//	go run ./bench/cost                  # the table, as docs/performance.md shows it
//	go run ./bench/cost -paths notify -dbs sqlite
//
// Without valgrind (-valgrind=false) it prints the statements alone.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/workflow"
)

// path is one durable path: what one operation is, how many operations a
// measuring run makes (few, many), and how to set it up.
type path struct {
	name, what string
	few, many  int
	setup      func(ctx context.Context, db string) (op func(i int) error, st store.Store, closer func(), err error)
}

var paths = []path{
	{"workflow", "3×1 workflow run (three no-op read tasks in a chain, started and waited for)", 10, 40, setupWorkflow},
	{"notify", "notification emitted to an open inbox stream (dispatched) and acknowledged", 20, 120, setupNotify},
	{"turn", "plain turn (a mode switch through the gate)", 20, 120, setupTurn},
	{"question", "confirmation question (an external send asks to be confirmed)", 20, 120, setupQuestion(false)},
	{"confirmed", "question + the confirmed call with the client's request key", 20, 120, setupQuestion(true)},
	{"approval", "workflow approval (approval_response, and the send it releases)", 10, 60, setupApproval},
}

// result is what a measuring run reports.
type result struct {
	Ops          int   `json:"ops"`
	Statements   int64 `json:"statements"`
	Transactions int64 `json:"transactions"`
	RoundTrips   int64 `json:"round_trips"`
}

func main() {
	worker := flag.String("worker", "", "run one path (internal: the measuring run)")
	db := flag.String("db", "", "the measuring run's database (internal)")
	ops := flag.Int("ops", 0, "the measuring run's operations (internal)")
	only := flag.String("paths", "", "comma-separated paths to measure (workflow, notify, turn, question, confirmed, approval); empty: all")
	dbs := flag.String("dbs", "sqlite,postgres", "databases: sqlite, postgres")
	useValgrind := flag.Bool("valgrind", true, "count instructions with valgrind's callgrind")
	flag.Parse()
	log.SetFlags(0)
	if *worker != "" {
		if err := measure(*worker, *db, *ops); err != nil {
			log.Fatalf("cost: %s: %v", *worker, err)
		}
		return
	}
	if err := table(*only, *dbs, *useValgrind); err != nil {
		log.Fatalf("cost: %v", err)
	}
}

// measure is a measuring run: warm-up, then ops operations, then the
// store's counters over them as JSON on stdout.
func measure(name, db string, ops int) error {
	var p *path
	for i := range paths {
		if paths[i].name == name {
			p = &paths[i]
		}
	}
	if p == nil {
		return fmt.Errorf("no path %q", name)
	}
	ctx := context.Background()
	op, st, closer, err := p.setup(ctx, db)
	if err != nil {
		return err
	}
	defer closer()
	const warm = 5
	for i := range warm {
		if err := op(i); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	counted, _ := st.(store.Counted)
	if counted == nil {
		return errors.New("the store keeps no counters")
	}
	before := counted.Stats()
	for i := range ops {
		if err := op(warm + i); err != nil {
			return err
		}
	}
	after := counted.Stats()
	return json.NewEncoder(os.Stdout).Encode(result{Ops: ops, Statements: after.Statements - before.Statements,
		Transactions: after.Transactions - before.Transactions, RoundTrips: after.RoundTrips - before.RoundTrips})
}

// table measures every path on every database and prints the table.
func table(only, dbs string, useValgrind bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	pgURL := os.Getenv("AGENTPLANE_TEST_POSTGRES")
	var dbList []string
	for _, d := range strings.Split(dbs, ",") {
		switch d {
		case "sqlite":
			dbList = append(dbList, d)
		case "postgres":
			if pgURL == "" {
				log.Printf("cost: AGENTPLANE_TEST_POSTGRES is not set: PostgreSQL skipped")
				continue
			}
			dbList = append(dbList, d)
		default:
			return fmt.Errorf("-dbs: %q is not sqlite or postgres", d)
		}
	}
	if useValgrind {
		if _, err := exec.LookPath("valgrind"); err != nil {
			return errors.New("valgrind is not installed (apt-get install valgrind), or run with -valgrind=false for statements alone")
		}
	}
	dir, err := os.MkdirTemp("", "agentplane-cost")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	commit := gitCommit()
	fmt.Printf("Measured at %s, %s (%s).\n\n", commit, time.Now().UTC().Format("2006-01-02"), "instructions: callgrind, agentplane's process only")
	fmt.Println("| path | database | instructions/op | statements/op | transactions/op | round trips/op |")
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: |")
	for _, p := range paths {
		if only != "" && !contains(strings.Split(only, ","), p.name) {
			continue
		}
		for _, d := range dbList {
			run := func(ops int) (result, int64, error) {
				target := filepath.Join(dir, fmt.Sprintf("%s-%d.db", p.name, ops))
				if d == "postgres" {
					schema := fmt.Sprintf("cost_%s_%d_%d", p.name, os.Getpid(), ops)
					u, drop, err := freshSchema(pgURL, schema)
					if err != nil {
						return result{}, 0, err
					}
					defer drop()
					target = u
				}
				args := []string{"-worker", p.name, "-db", target, "-ops", strconv.Itoa(ops)}
				return runWorker(self, args, dir, useValgrind)
			}
			few, fewI, err := run(p.few)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", p.name, d, err)
			}
			many, manyI, err := run(p.many)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", p.name, d, err)
			}
			_ = few
			n := float64(many.Ops)
			instr := "–"
			if useValgrind {
				instr = thousands(float64(manyI-fewI) / float64(p.many-p.few))
			}
			rt := "–"
			if d == "postgres" {
				rt = fmt.Sprintf("%.2f", float64(many.RoundTrips)/n)
			}
			fmt.Printf("| %s | %s | %s | %.2f | %.2f | %s |\n", p.name, map[string]string{"sqlite": "SQLite FULL", "postgres": "PostgreSQL"}[d],
				instr, float64(many.Statements)/n, float64(many.Transactions)/n, rt)
		}
	}
	fmt.Println()
	for _, p := range paths {
		if only == "" || contains(strings.Split(only, ","), p.name) {
			fmt.Printf("- %s: %s\n", p.name, p.what)
		}
	}
	return nil
}

// runWorker runs a measuring run, under callgrind when asked, and returns
// its counters and its instruction total.
func runWorker(self string, args []string, dir string, useValgrind bool) (result, int64, error) {
	var cmd *exec.Cmd
	out := filepath.Join(dir, fmt.Sprintf("callgrind.%d", time.Now().UnixNano()))
	if useValgrind {
		cmd = exec.Command("valgrind", append([]string{"--tool=callgrind", "--callgrind-out-file=" + out, self}, args...)...)
	} else {
		cmd = exec.Command(self, args...)
	}
	// Go under valgrind: no asynchronous preemption (its signals), one P, no
	// RDTSCP (valgrind 3.19 cannot run it; the runtime reads ticks with it)
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off", "GOMAXPROCS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return result{}, 0, fmt.Errorf("%v: %s", err, lastLines(stderr.String(), 5))
	}
	var r result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return result{}, 0, fmt.Errorf("the measuring run said %q: %v", stdout.String(), err)
	}
	if !useValgrind {
		return r, 0, nil
	}
	total, err := callgrindTotal(out)
	return r, total, err
}

// callgrindTotal reads the instruction total of a callgrind output file.
func callgrindTotal(file string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		for _, prefix := range []string{"summary: ", "totals: "} {
			if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s: no instruction total", file)
}

// freshSchema creates an empty schema and returns a URL whose search_path
// is it, and how to drop it.
func freshSchema(url, schema string) (string, func(), error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE; CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema, func() {
		if c, err := pgx.Connect(ctx, url); err == nil {
			c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			c.Close(ctx)
		}
	}, nil
}

// gitCommit names the commit measured, +dirty when the tree has changes.
func gitCommit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty=+dirty", "--abbrev=10").Output()
	if err != nil {
		return "an unknown commit"
	}
	return "commit " + strings.TrimSpace(string(out))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// thousands writes n rounded to a thousand, as "217k".
func thousands(n float64) string {
	return fmt.Sprintf("%.0fk", n/1000)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// benchYAML is the workflows' configuration: a no-op read tool and an
// external send (which a workflow runs only once approved).
const benchYAML = `version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], tools: [noop, send]}]
`

// benchTools are benchYAML's tools.
func benchTools() []tool.Tool {
	noop := &tool.Func{S: tool.Spec{Name: "noop", Usage: "Does nothing.", Impact: tool.ImpactRead, Risk: tool.RiskLow, InputSchema: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }}
	send := &tool.Func{S: tool.Spec{Name: "send", Usage: "Sends nothing anywhere.", Impact: tool.ImpactExternal, Risk: tool.RiskLow, InputSchema: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"sent":true}`), nil
		}}
	return []tool.Tool{noop, send}
}

// open opens a runtime on db with the given configuration.
func open(ctx context.Context, db string, src core.Source, co core.Options) (*plane.Runtime, func(), error) {
	rt, err := plane.Open(ctx, plane.Options{Config: src, DB: db, OpenStore: drivers.Open, Core: co, Workflows: workflow.Options{Poll: time.Second}})
	if err != nil {
		return nil, nil, err
	}
	return rt, func() { rt.Close(time.Minute) }, nil
}

func setupWorkflow(ctx context.Context, db string) (func(int) error, store.Store, func(), error) {
	rt, closer, err := open(ctx, db, core.Source{YAML: []byte(benchYAML), Name: "cost.yaml"}, core.Options{Tools: benchTools()})
	if err != nil {
		return nil, nil, nil, err
	}
	sess, err := rt.Core.Start(ctx, core.Start{Principal: "cost"})
	if err != nil {
		closer()
		return nil, nil, nil, err
	}
	def := &workflow.Definition{Tasks: []workflow.Task{{ID: "a", Tool: "noop"}, {ID: "b", Tool: "noop", DependsOn: []string{"a"}}, {ID: "c", Tool: "noop", DependsOn: []string{"b"}}}}
	return func(int) error {
		w, err := rt.Workflows.Start(ctx, workflow.Start{SessionID: sess.ID, Principal: "cost", Definition: def})
		if err != nil {
			return err
		}
		if w, err = rt.Workflows.Wait(ctx, w.ID, "cost", 0); err != nil || w.Status != workflow.StatusCompleted {
			return fmt.Errorf("workflow %s: %v", w.Status, err)
		}
		return nil
	}, rt.Store, closer, nil
}

func setupApproval(ctx context.Context, db string) (func(int) error, store.Store, func(), error) {
	rt, closer, err := open(ctx, db, core.Source{YAML: []byte(benchYAML), Name: "cost.yaml"}, core.Options{Tools: benchTools()})
	if err != nil {
		return nil, nil, nil, err
	}
	sess, err := rt.Core.Start(ctx, core.Start{Principal: "cost"})
	if err != nil {
		closer()
		return nil, nil, nil, err
	}
	def := &workflow.Definition{}
	for i := range 10 {
		t := workflow.Task{ID: fmt.Sprint("s", i), Tool: "send"}
		if i > 0 {
			t.DependsOn = []string{fmt.Sprint("s", i-1)}
		}
		def.Tasks = append(def.Tasks, t)
	}
	var w *workflow.Workflow
	approved := true
	return func(int) error {
		for w == nil || w.Approval == nil {
			if w == nil || w.Status == workflow.StatusCompleted {
				if w, err = rt.Workflows.Start(ctx, workflow.Start{SessionID: sess.ID, Principal: "cost", Definition: def}); err != nil {
					return err
				}
				continue
			}
			if w, err = rt.Workflows.Wait(ctx, w.ID, "cost", w.Seq); err != nil {
				return err
			}
		}
		if _, err := rt.Workflows.Command(ctx, w.ID, "cost", workflow.Command{Type: workflow.CommandApprovalResponse, CheckpointID: w.Approval.CheckpointID, Approved: &approved}); err != nil {
			return err
		}
		w.Approval = nil
		return nil
	}, rt.Store, closer, nil
}

func setupNotify(ctx context.Context, db string) (func(int) error, store.Store, func(), error) {
	rt, closer, err := open(ctx, db, core.Source{YAML: demo.YAML, Name: demo.Name}, core.Options{Programs: demo.Programs(nil)})
	if err != nil {
		return nil, nil, nil, err
	}
	sub := rt.Hub.Subscribe(notify.UserTopic("user"), 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-sub.Events():
			case <-sub.Done():
				return
			}
		}
	}()
	return func(int) error {
			e, err := rt.Bus.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: "user", Target: notify.TargetUser,
				Handler: notify.HandlerSystem, Title: "job"}, 0)
			if err != nil {
				return err
			}
			if e.State != notify.StateDispatched {
				return fmt.Errorf("emitted %s, not dispatched", e.State)
			}
			_, err = rt.Ledger.Ack(ctx, e.ID, "user")
			return err
		}, rt.Store, func() {
			sub.Close()
			<-done
			closer()
		}, nil
}

func setupTurn(ctx context.Context, db string) (func(int) error, store.Store, func(), error) {
	rt, closer, err := open(ctx, db, core.Source{YAML: demo.YAML, Name: demo.Name}, core.Options{Programs: demo.Programs(nil)})
	if err != nil {
		return nil, nil, nil, err
	}
	sess, err := rt.Core.Start(ctx, core.Start{Principal: agentplane.LocalPrincipal})
	if err != nil {
		closer()
		return nil, nil, nil, err
	}
	texts := []string{"switch to ddr mode", "switch to general mode"}
	return func(i int) error {
		t, err := rt.Core.Turn(ctx, core.TurnRequest{SessionID: sess.ID, Principal: agentplane.LocalPrincipal, Input: agentplane.TurnInput{Text: texts[i%2]}})
		if err == nil && (t.Result == nil || t.Result.Status != agentplane.StatusSuccess) {
			err = fmt.Errorf("turn: %+v", t.Result)
		}
		return err
	}, rt.Store, closer, nil
}

// setupQuestion is an external send asked for (a confirmation question),
// and with confirm the confirmed call after it.
func setupQuestion(confirm bool) func(ctx context.Context, db string) (func(int) error, store.Store, func(), error) {
	return func(ctx context.Context, db string) (func(int) error, store.Store, func(), error) {
		noop := func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"sent":true}`), nil
		}
		rt, closer, err := open(ctx, db, core.Source{YAML: demo.YAML, Name: demo.Name}, core.Options{Programs: demo.SendWith(noop)})
		if err != nil {
			return nil, nil, nil, err
		}
		sess, err := rt.Core.Start(ctx, core.Start{Principal: agentplane.LocalPrincipal, Mode: "sales"})
		if err == nil {
			var r agentplane.ExecutionResult
			r, err = rt.Core.Execute(ctx, gate.Invocation{SessionID: sess.ID, CommandID: "set_active_email_template", ResolvedID: "TPL-123", Origin: gate.OriginUser})
			if err == nil && r.Status != agentplane.StatusSuccess {
				err = fmt.Errorf("set_active_email_template: %s", r.Status)
			}
		}
		if err != nil {
			closer()
			return nil, nil, nil, err
		}
		return func(i int) error {
			asked, err := rt.Core.Execute(ctx, gate.Invocation{SessionID: sess.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginAPI})
			if err != nil || asked.ConfirmationToken == "" {
				return fmt.Errorf("question: %s %v", asked.Status, err)
			}
			if !confirm {
				return nil
			}
			r, err := rt.Core.Execute(ctx, gate.Invocation{SessionID: sess.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginAPI,
				ConfirmationToken: asked.ConfirmationToken, RequestID: fmt.Sprint("r", i)})
			if err == nil && r.Status != agentplane.StatusSuccess {
				err = fmt.Errorf("confirmed call: %s %s", r.Status, r.Message)
			}
			return err
		}, rt.Store, closer, nil
	}
}
