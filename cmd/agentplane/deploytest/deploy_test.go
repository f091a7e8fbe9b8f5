package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/workflow"
	"github.com/jackc/pgx/v5"
)

// The deployment test: three serve processes on one PostgreSQL behind
// HAProxy and nginx at once, each running its configuration as shipped in
// deploy/ (round robin per request, no stickiness), driven through the
// balancers' addresses by clients taking turns and confirming external
// actions, emitting and acknowledging notifications, running workflows
// with approvals and following event streams — while the instances are
// SIGKILLed and restarted, one at a time, and the balancers reload.

// client talks to a balancer as a patient client does
// (servetest.Patiently).
type client struct {
	url  string
	http *http.Client
}

func (c *client) do(method, path, key, body string, header ...string) (int, []byte) {
	return servetest.Patiently(c.http, func() string { return c.url }, method, path, key, body, header...)
}

// stream follows an SSE stream through the balancer, resuming with
// Last-Event-ID after every drop, and records the ids in order.
type stream struct {
	mu    sync.Mutex
	ids   []int64
	drops int
}

func (s *stream) follow(c *client, path string, stop <-chan struct{}) {
	var last int64
	for {
		select {
		case <-stop:
			return
		default:
		}
		req, _ := http.NewRequest("GET", c.url+path, nil)
		if last > 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err == nil && resp.StatusCode == 200 {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
					id, _ := strconv.ParseInt(v, 10, 64)
					s.mu.Lock()
					s.ids = append(s.ids, id)
					s.mu.Unlock()
					last = id
				}
			}
		}
		if resp != nil {
			resp.Body.Close()
		}
		cancel()
		s.mu.Lock()
		s.drops++
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeploymentBehindABalancer: see the top of the file. Afterwards:
// every turn an instance answered is in its session's chain, and every
// chain verifies; no confirmation acted twice, and every acted one is
// recorded once; every notification accepted is in the ledger and none
// was acknowledged twice; every workflow ended, no attempt reached the
// service twice and every completed external task acted once; every
// stream saw its events in order, without gap or duplicate, across its
// reconnections. $AGENTPLANE_DEPLOY_KILLS sets the kills (12 by default;
// make deploy-test runs 120).
func TestDeploymentBehindABalancer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts HAProxy and three instances, and kills them")
	}
	t.Parallel() // it waits on processes of its own most of the time
	kills := 12
	if v, err := strconv.Atoi(os.Getenv("AGENTPLANE_DEPLOY_KILLS")); err == nil && v > 0 {
		kills = v
	}
	db := pgtest.Schema(t)
	svc := servetest.NewWorld()
	down := httptest.NewServer(svc)
	defer down.Close()
	cfg := filepath.Join(t.TempDir(), "deploy.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], tools: [fetch, publish]}]
tools:
  - {name: fetch, description: "Fetch a report.", impact: read, http: {url: %q}}
  - {name: publish, description: "Publish a report.", impact: external, risk: high, http: {url: %q}}
`, down.URL+"/fetch", down.URL+"/publish")), 0o644)
	f := servetest.NewFleet(t, servetest.Binary(t), 3, "--config", cfg, "--db", db, "--workflow-lease", "500ms", "--tool-timeout", "2s")
	for i := range 3 {
		f.Start(i)
	}
	lbs := []*lb{haproxyLB(t, addrs(f.Ports)), nginxLB(t, addrs(f.Ports))}
	// clients alternate between the balancers; c goes through HAProxy, ng through nginx
	via := func(i int) *client { return &client{url: lbs[i%2].url, http: &http.Client{Timeout: 20 * time.Second}} }
	c, ng := via(0), via(1)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex

	// sessions: turns and confirmed sends
	type turn struct {
		seq  int64
		text string
	}
	acked := map[string][]turn{} // session -> turns answered 200
	sends := map[string]int{}    // session -> sends confirmed with success
	cycles := map[string]int{}   // session -> confirmations sent
	type retry struct{ key, body string }
	inFlight := map[string][]retry{} // session -> confirmations left running by a kill
	var sessions []string
	for range 4 {
		st, raw := c.do("POST", "/v1/sessions", "", `{}`)
		var created struct {
			SessionID string `json:"session_id"`
		}
		if st != 201 || json.Unmarshal(raw, &created) != nil {
			t.Fatalf("create a session: %d %s", st, raw)
		}
		sessions = append(sessions, created.SessionID)
	}
	for i, s := range sessions {
		c := via(i)
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("hello %d", n)
				st, raw := c.do("POST", "/v1/sessions/"+s+"/turns", fmt.Sprintf("%s-t%d", s, n), `{"text":"`+text+`"}`)
				var tr struct{ Seq int64 }
				if st == 200 && json.Unmarshal(raw, &tr) == nil {
					mu.Lock()
					acked[s] = append(acked[s], turn{tr.Seq, text})
					mu.Unlock()
				} else {
					t.Errorf("turn %q: %d %s", text, st, raw)
					return
				}
				_, raw = c.do("POST", "/v1/sessions/"+s+"/intents", fmt.Sprintf("%s-a%d", s, n),
					fmt.Sprintf(`{"type":"action_call","origin":"user","action":"publish","args":{"n":%d}}`, n))
				var asked struct {
					Token string `json:"confirmation_token"`
				}
				if json.Unmarshal(raw, &asked) != nil || asked.Token == "" {
					continue // answered again from the record: the token goes out once
				}
				confirm := fmt.Sprintf(`{"type":"action_call","origin":"user","action":"publish","args":{"n":%d},"confirmation_token":%q}`, n, asked.Token)
				mu.Lock()
				cycles[s]++
				mu.Unlock()
				key := fmt.Sprintf("%s-c%d", s, n)
				st, raw = c.do("POST", "/v1/sessions/"+s+"/intents", key, confirm)
				var res struct{ Status string }
				json.Unmarshal(raw, &res)
				if bytes.Contains(raw, []byte(`"request_in_progress"`)) {
					// its instance died with the call in flight: asked
					// again at the end, once its claim is stale
					mu.Lock()
					inFlight[s] = append(inFlight[s], retry{key, confirm})
					mu.Unlock()
					continue
				}
				if st == 200 && res.Status == "success" {
					mu.Lock()
					sends[s]++
					mu.Unlock()
				}
			}
		})
	}

	// notifications: emitted to one user's inbox, acknowledged by a poller
	accepted := map[string]bool{}
	ackedOK := map[string]int{}
	wg.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			st, raw := c.do("POST", "/v1/notifications", "", fmt.Sprintf(`{"address":"USER","target":"USER","handler":"SYSTEM","title":"n%d","deduplication_key":"n%d"}`, n, n))
			var created struct{ ID string }
			if st == 201 && json.Unmarshal(raw, &created) == nil {
				mu.Lock()
				accepted[created.ID] = true
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			st, raw := ng.do("GET", "/v1/inbox?limit=20", "", "")
			var page struct{ Notifications []notify.Notification }
			if st == 200 && json.Unmarshal(raw, &page) == nil {
				for _, m := range page.Notifications {
					if st, _ := ng.do("POST", "/v1/notifications/"+m.ID+"/ack", "", `{}`); st == 200 {
						mu.Lock()
						ackedOK[m.ID]++
						mu.Unlock()
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	// workflows: started with keys, their approvals and interruptions answered
	tasks := `[{"id":"a","tool":"fetch"},{"id":"p1","tool":"publish","depends_on":["a"]},{"id":"p2","tool":"publish","depends_on":["a"]},
		{"id":"b","tool":"fetch","depends_on":["p1","p2"]},{"id":"p3","tool":"publish","depends_on":["b"]}]`
	started := map[string]bool{}
	drive := func(start bool) {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if start && n%5 == 0 {
				policy := []string{"manual", "automatic"}[n/5%2]
				st, raw := c.do("POST", "/v1/workflows", fmt.Sprintf("wf-%d", n),
					`{"session_id":"`+sessions[0]+`","resume_policy":"`+policy+`","tasks":`+tasks+`}`)
				var w struct {
					WorkflowID string `json:"workflow_id"`
				}
				if (st == 201 || st == 200) && json.Unmarshal(raw, &w) == nil {
					mu.Lock()
					started[w.WorkflowID] = true
					mu.Unlock()
				}
			}
			answerPauses(ng)
			time.Sleep(20 * time.Millisecond)
		}
	}
	wg.Go(func() { drive(true) })

	// streams: one session's events, followed through each balancer
	streams := make([]*stream, len(lbs))
	for i := range lbs {
		streams[i] = &stream{}
		wg.Go(func() { streams[i].follow(via(i), "/v1/sessions/"+sessions[1]+"/events", stop) })
	}

	r := rand.New(rand.NewPCG(11, 13))
	for k := range kills {
		time.Sleep(time.Duration(150+r.IntN(400)) * time.Millisecond)
		i := r.IntN(3)
		f.Kill(i)
		time.Sleep(time.Duration(20+r.IntN(150)) * time.Millisecond)
		f.Start(i)
		if k%3 == 1 { // a balancer reloads, as for a new certificate: requests go on
			lbs[k/3%2].reload()
		}
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	// the confirmations left running by a kill, asked again with their
	// keys until their claims are stale (twice --tool-timeout and a
	// minute): each is then recorded as interrupted, or as what it was
	// when another ask finished it first
	for s, rs := range inFlight {
		for _, r := range rs {
			deadline := time.Now().Add(3 * time.Minute)
			for {
				_, raw := c.do("POST", "/v1/sessions/"+s+"/intents", r.key, r.body)
				if !bytes.Contains(raw, []byte(`"request_in_progress"`)) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("confirmation %s still in progress after 3 minutes: %s", r.key, raw)
				}
				time.Sleep(time.Second)
			}
		}
	}

	// every workflow to its end, its pauses answered
	workflows := servetest.UntilWorkflowsEnd(t, func() ([]workflow.Workflow, error) {
		st, raw := c.do("GET", "/v1/workflows?limit=500", "", "")
		var list struct{ Workflows []workflow.Workflow }
		if st != 200 || json.Unmarshal(raw, &list) != nil {
			return nil, fmt.Errorf("list workflows: %d %s", st, raw)
		}
		return list.Workflows, nil
	}, func() { answerPauses(ng) })
	statuses, completed := svc.CheckWorkflows(t, workflows)

	mu.Lock()
	defer mu.Unlock()
	ctx := context.Background()
	st, err := postgres.Open(ctx, db, &postgres.Options{Extensions: []store.Extension{notify.Extension, workflow.Extension}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// turns and sends
	turns, sent, lost, stopped := 0, 0, 0, 0
	for _, s := range sessions {
		recs, err := st.Records(ctx, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := audit.Verify(recs); err != nil {
			t.Fatalf("session %s: the chain does not verify: %v", s, err)
		}
		bySeq := map[int64]audit.Record{}
		recorded := map[string]int{}     // request id -> successful runs recorded
		interrupted := map[string]bool{} // request ids recorded as interrupted
		for _, r := range recs {
			bySeq[r.Seq] = r
			if r.Result != nil && r.Result.Error != nil && r.Result.Error.Code == agentplane.CodeInterrupted {
				interrupted[r.Result.RequestID] = true
			}
			if r.Result != nil && r.Result.Tool == "publish" && r.Result.Status == "success" && r.Approval == "" { // a workflow's run carries its approval
				recorded[r.Result.RequestID]++
			}
		}
		for _, tr := range acked[s] {
			r, ok := bySeq[tr.seq]
			if !ok || r.Input == nil || r.Input.Text != tr.text {
				t.Fatalf("session %s: turn %q was answered as record %d, which the chain does not hold", s, tr.text, tr.seq)
			}
		}
		// Every run recorded acted once, under its own key; every key that
		// reached the world has its run recorded, as a success or — its
		// instance died while its call ran — as interrupted.
		acted := svc.ActedFor(s)
		for k, n := range recorded {
			if n != 1 || !acted[k] {
				t.Fatalf("session %s: request %s recorded as run %d times; the world saw it: %v", s, k, n, acted[k])
			}
		}
		for k := range acted {
			if recorded[k] == 0 && !interrupted[k] {
				t.Fatalf("session %s: %s acted in the world and is not recorded", s, k)
			}
		}
		runs := len(recorded)
		if runs < sends[s] || runs > cycles[s] {
			t.Fatalf("session %s: %d runs recorded for %d confirmations, %d answered success", s, runs, cycles[s], sends[s])
		}
		// a confirmation left running by a kill ends recorded: as
		// interrupted, or as run when its instance was slow, not dead
		for _, r := range inFlight[s] {
			if !interrupted[r.key] && recorded[r.key] == 0 {
				t.Fatalf("session %s: %s, left running by a kill, is recorded neither as run nor as interrupted", s, r.key)
			}
		}
		lost += len(inFlight[s])
		stopped += len(interrupted)
		turns += len(acked[s])
		sent += runs
	}

	// notifications
	l, err := notify.NewLedger(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	delivered := 0
	for id := range accepted {
		m, err := l.Get(ctx, id)
		if err != nil {
			t.Fatalf("notification %s was accepted and is not in the ledger: %v", id, err)
		}
		if ackedOK[id] > 1 {
			t.Fatalf("notification %s acknowledged %d times", id, ackedOK[id])
		}
		if ackedOK[id] == 1 && m.State != notify.StateDelivered {
			t.Fatalf("notification %s acknowledged, now %s", id, m.State)
		}
		if m.State == notify.StateDelivered {
			delivered++
		}
	}

	if len(workflows) < len(started) {
		t.Fatalf("%d workflows started, %d listed", len(started), len(workflows))
	}

	// the streams
	var seen []string
	for i, events := range streams {
		events.mu.Lock()
		defer events.mu.Unlock()
		for j, id := range events.ids {
			if id != int64(j+1) {
				t.Fatalf("the stream through %s: event %d has id %d: a gap or a duplicate across its %d reconnections", lbs[i].name, j+1, id, events.drops)
			}
		}
		if len(events.ids) == 0 {
			t.Fatalf("the stream through %s saw no event", lbs[i].name)
		}
		seen = append(seen, fmt.Sprintf("through %s %d events in order over %d reconnections", lbs[i].name, len(events.ids), events.drops))
	}
	if turns == 0 || sent == 0 || len(accepted) == 0 || statuses[workflow.StatusCompleted] == 0 {
		t.Fatalf("too little happened: %d turns, %d sends, %d notifications, workflows %v", turns, sent, len(accepted), statuses)
	}
	t.Logf("%d kills, %d balancer reloads: %d turns answered, all in their chains; %d sends, each acted and recorded once (%d confirmations left running by a kill; %d recorded as interrupted); %d notifications accepted, %d delivered, none acknowledged twice; %d workflows %v, %d external tasks acted once each; streams saw %s",
		kills, kills/3, turns, sent, lost, stopped, len(accepted), delivered, len(workflows), statuses, completed, strings.Join(seen, ", "))
}

// answerPauses approves every workflow waiting for approval and continues
// every interrupted one.
func answerPauses(c *client) {
	st, raw := c.do("GET", "/v1/workflows?limit=500", "", "")
	var list struct{ Workflows []workflow.Workflow }
	if st != 200 || json.Unmarshal(raw, &list) != nil {
		return
	}
	for _, w := range list.Workflows {
		var cmd string
		switch {
		case w.Approval != nil:
			cmd = `{"type":"approval_response","checkpoint_id":"` + w.Approval.CheckpointID + `","approved":true}`
		case w.Interruption != nil:
			cmd = `{"type":"checkpoint_response","checkpoint_id":"` + w.Interruption.CheckpointID + `","decision":"continue"}`
		default:
			continue
		}
		c.do("POST", "/v1/workflows/"+w.ID+"/commands", "", cmd)
	}
}

// TestDeploymentThroughput measures turns/s through HAProxy with 64
// clients, each on a session of its own, against one instance and against
// three on the same PostgreSQL, one after the other in one run. Set
// $AGENTPLANE_DEPLOY_BENCH to run it (make deploy-test does); it asserts
// only that turns were answered, and logs the figures.
func TestDeploymentThroughput(t *testing.T) {
	if os.Getenv("AGENTPLANE_DEPLOY_BENCH") == "" {
		t.Skip("a measurement: set AGENTPLANE_DEPLOY_BENCH")
	}
	bin := servetest.Binary(t)
	rate, perTurn := map[int]float64{}, map[int]float64{}
	for _, n := range []int{1, 3} {
		// the instances' PostgreSQL backends are found by their
		// application_name, so other clients' work on a shared server is
		// not counted
		app := fmt.Sprintf("agentplane_throughput_%d_%d", os.Getpid(), n)
		db := pgtest.Schema(t) + "&application_name=" + app
		f := servetest.NewFleet(t, bin, n, "--db", db, "--log-level", "warn")
		for i := range n {
			f.Start(i)
		}
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		t.Cleanup(tr.CloseIdleConnections)
		c := &client{url: haproxyLB(t, addrs(f.Ports)).url, http: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
		const clients = 64
		sessions := make([]string, clients)
		for i := range sessions {
			st, raw := c.do("POST", "/v1/sessions", "", `{}`)
			var created struct {
				SessionID string `json:"session_id"`
			}
			if st != 201 || json.Unmarshal(raw, &created) != nil {
				t.Fatalf("%d %s", st, raw)
			}
			sessions[i] = created.SessionID
		}
		var done sync.WaitGroup
		var mu sync.Mutex
		total := 0
		end := time.Now().Add(8 * time.Second)
		cpu0 := cpuByProgram()
		own0 := cpuOf(f.Pids(), backends(t, app))
		start := time.Now()
		for _, s := range sessions {
			done.Go(func() {
				texts := []string{"switch to ddr mode", "switch to sales mode", "hello there"}
				k := 0
				for ; time.Now().Before(end); k++ {
					if st, raw := c.do("POST", "/v1/sessions/"+s+"/turns", "", `{"text":"`+texts[k%3]+`"}`); st != 200 {
						t.Errorf("turn: %d %s", st, raw)
						return
					}
				}
				mu.Lock()
				total += k
				mu.Unlock()
			})
		}
		done.Wait()
		took := time.Since(start)
		cpu := cpuByProgram()
		own := cpuOf(f.Pids(), backends(t, app))
		rate[n] = float64(total) / took.Seconds()
		t.Logf("%d instance(s) behind HAProxy, 64 clients: %d turns in %v, %.0f turns/s", n, total, took.Round(time.Millisecond), rate[n])
		var used []string
		for _, prog := range []string{"postgres", "agentplane", "haproxy", "agentplane.test"} {
			used = append(used, fmt.Sprintf("%s %.2f", prog, (cpu[prog]-cpu0[prog])/took.Seconds()))
		}
		t.Logf("  cores busy (of %d): %s", runtime.NumCPU(), strings.Join(used, ", "))
		// CPU per turn, the figure a 2-core machine can give where scaling
		// cannot: the instances' and PostgreSQL's (every postgres process on
		// the machine: on a shared server, other clients' work counts too)
		inst, pg := (cpu["agentplane"]-cpu0["agentplane"])/float64(total)*1000, (cpu["postgres"]-cpu0["postgres"])/float64(total)*1000
		t.Logf("  CPU per turn, by program on the whole machine: instance(s) %.3f ms, PostgreSQL %.3f ms, together %.3f ms", inst, pg, inst+pg)
		// by process: this run's instances and their own PostgreSQL
		// backends (a backend that started during the run counts from 0;
		// one that ended during it is missed)
		var ownInst, ownPG float64
		for pid, sec := range own.procs {
			ownInst += sec - own0.procs[pid]
		}
		for pid, sec := range own.backends {
			ownPG += sec - own0.backends[pid]
		}
		ownInst, ownPG = ownInst/float64(total)*1000, ownPG/float64(total)*1000
		perTurn[n] = ownInst + ownPG
		t.Logf("  CPU per turn, by process: instance(s) %.3f ms, their %d PostgreSQL backends %.3f ms, together %.3f ms", ownInst, len(own.backends), ownPG, ownInst+ownPG)
		for i := range n {
			f.Kill(i)
		}
	}
	t.Logf("three instances vs one: %.2f× the turns/s, %.2f× the CPU per turn (instances + PostgreSQL)", rate[3]/rate[1], perTurn[3]/perTurn[1])
}

// backends are the process ids of PostgreSQL's backends serving the
// connections named app.
func backends(t *testing.T, app string) []int {
	conn, err := pgx.Connect(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out
}

// ownCPU is the CPU seconds used so far by each of some processes.
type ownCPU struct{ procs, backends map[int]float64 }

// cpuOf reads the CPU seconds of the instances and backends given.
func cpuOf(procs, backends []int) ownCPU {
	read := func(pids []int) map[int]float64 {
		out := map[int]float64{}
		for _, pid := range pids {
			if sec, ok := procCPU(pid); ok {
				out[pid] = sec
			}
		}
		return out
	}
	return ownCPU{read(procs), read(backends)}
}

// procCPU is the user and system CPU seconds process pid used so far.
func procCPU(pid int) (float64, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	_, sec, ok := parseStat(stat)
	return sec, ok
}

// parseStat reads a /proc/PID/stat: the program's name and its user and
// system CPU seconds (fields 14 and 15, after the name's ")").
func parseStat(stat []byte) (string, float64, bool) {
	open, closing := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return "", 0, false
	}
	f := strings.Fields(string(stat[closing+1:]))
	if len(f) < 13 {
		return "", 0, false
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return string(stat[open+1 : closing]), (ut + st) / 100, true // USER_HZ
}

// cpuByProgram returns the CPU seconds used so far by the processes of
// each program name (Linux /proc; empty elsewhere): how far PostgreSQL,
// the instances, the balancer and the clients each take the machine.
func cpuByProgram() map[string]float64 {
	out := map[string]float64{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		if name, sec, ok := parseStat(stat); ok {
			out[name] += sec
		}
	}
	return out
}
