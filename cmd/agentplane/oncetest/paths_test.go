package oncetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/docs"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/workflow"
)

// The acting paths: every way a request reaches a tool that may change
// the world, each a row of TestEveryActingPathRunsOnce. A row sets a
// session up (setup), then has n clients send the same request at once
// (act: client i of them), and says when its effects have settled.
// Clients that send "the same request" share what makes it one: its
// Idempotency-Key, the confirmation it answers, the pause it answers, the
// notification's deduplication key.
type actingPath struct {
	name string
	// doors are the front-end routes this row goes through (a POST route
	// of the published API, or another door: the WebSocket, /mcp)
	doors []string
	// origin is the gate origin its acting call is recorded with
	origin gate.Origin
	setup  func(c *cell)
	act    func(c *cell, i int)
	settle func(c *cell)
	// steal is another principal sending the row's request at alice's
	// ids (the thief: her cell, acting for bob) where her act cannot;
	// nil: her act as he sends it
	steal func(thief *cell)
	// cross is bob trying alice's own ids in his own session or
	// workflow (stray: his cell), where the row has any that a second
	// person could present: her confirmation token, her decision
	cross func(stray, alice *cell)
}

// nonActing are the published API's writes that run no tool: each says
// why, so a new route is a decision, not an oversight.
var nonActing = map[string]string{
	"POST /v1/sessions":                 "opens a session: runs nothing",
	"POST /v1/sessions/{id}/resume":     "fits a session to the configuration (a resume record): runs no tool",
	"POST /v1/auth/token":               "exchanges a sign-in code with the identity provider",
	"POST /v1/notifications/{id}/ack":   "acknowledges a notification: a ledger transition",
	"DELETE /mcp":                       "ends an MCP session",
	"POST /v1/admin/reload":             "replaces the configuration: no tool runs and no session is written (a session is fitted at its next turn, a resume record)",
	"POST /v1/workflows/{id}/commands":  "covered by the rows approval and decision",
	"POST /v1/sessions/{id}/turns":      "covered by the rows turn_command, turn_yes, llm_call and llm_proposal_yes",
	"POST /v1/sessions/{id}/intents":    "covered by the rows intent_direct, intent_token and llm_proposal_token",
	"POST /v1/workflows":                "covered by the row workflow_start",
	"POST /v1/notifications":            "covered by the row internal_turn",
	"POST /mcp":                         "covered by the row mcp_call",
	"GET /v1/sessions/{id}/ws (a turn)": "covered by the row ws_yes",
}

var actingPaths = []actingPath{
	{name: "turn_command", origin: gate.OriginUser, doors: []string{"POST /v1/sessions/{id}/turns"},
		act: func(c *cell, i int) {
			c.post(i, "/v1/sessions/"+c.session+"/turns", c.key("turn"), `{"text":"act now on target one"}`)
		}},
	{name: "turn_yes", origin: gate.OriginUser, doors: []string{"POST /v1/sessions/{id}/turns"},
		setup: func(c *cell) { c.ask() },
		act: func(c *cell, i int) {
			c.post(i, "/v1/sessions/"+c.session+"/turns", c.key(fmt.Sprint("yes-", i)), `{"text":"yes"}`)
		}},
	{name: "ws_yes", origin: gate.OriginUser, doors: []string{"GET /v1/sessions/{id}/ws (a turn)"},
		setup: func(c *cell) { c.ask() },
		act:   func(c *cell, i int) { c.wsTurn(i, c.key(fmt.Sprint("ws-", i)), "yes") }},
	{name: "intent_token", origin: gate.OriginAPI, doors: []string{"POST /v1/sessions/{id}/intents"},
		setup: func(c *cell) { c.ask() },
		act:   func(c *cell, i int) { c.confirm(i, c.key(fmt.Sprint("token-", i))) },
		cross: herToken},
	{name: "intent_direct", origin: gate.OriginAPI, doors: []string{"POST /v1/sessions/{id}/intents"},
		act: func(c *cell, i int) {
			c.post(i, "/v1/sessions/"+c.session+"/intents", c.key("direct"), `{"type":"action_call","action":"act","args":{"target":"T-1"}}`)
		}},
	{name: "llm_call", origin: gate.OriginLLM, doors: []string{"POST /v1/sessions/{id}/turns"},
		act: func(c *cell, i int) {
			c.post(i, "/v1/sessions/"+c.session+"/turns", c.key("turn"), `{"text":"please note target one"}`)
		},
		settle: func(c *cell) { c.acts(1) }},
	{name: "llm_proposal_yes", origin: gate.OriginUser, doors: []string{"POST /v1/sessions/{id}/turns"},
		setup: func(c *cell) { c.propose() },
		act: func(c *cell, i int) {
			c.post(i, "/v1/sessions/"+c.session+"/turns", c.key(fmt.Sprint("yes-", i)), `{"text":"yes"}`)
		}},
	{name: "llm_proposal_token", origin: gate.OriginAPI, doors: []string{"POST /v1/sessions/{id}/intents"},
		setup: func(c *cell) { c.propose() },
		act:   func(c *cell, i int) { c.confirm(i, c.key(fmt.Sprint("token-", i))) },
		cross: herToken},
	{name: "mcp_call", origin: gate.OriginMCP, doors: []string{"POST /mcp"},
		setup: func(c *cell) { c.mcpConnect() },
		act:   func(c *cell, i int) { c.mcpCall(c.key("mcp")) },
		steal: func(thief *cell) { thief.mcpSteal(thief.key("mcp")) }},
	{name: "approval", origin: gate.OriginWorkflow, doors: []string{"POST /v1/workflows", "POST /v1/workflows/{id}/commands"},
		setup: func(c *cell) {
			c.startWorkflow(`{"tasks":[{"id":"a","tool":"act","args":{"target":"T-1"}}]}`, workflow.StatusAwaitingApproval)
		},
		act: func(c *cell, i int) {
			c.post(i, "/v1/workflows/"+c.workflow+"/commands", c.key(fmt.Sprint("approve-", i)),
				`{"type":"approval_response","checkpoint_id":"`+c.pause+`","approved":true}`)
		},
		cross: func(stray, alice *cell) { // her checkpoint approved in his workflow
			stray.post(0, "/v1/workflows/"+stray.workflow+"/commands", stray.key("her-approval"),
				`{"type":"approval_response","checkpoint_id":"`+alice.pause+`","approved":true}`)
		},
		settle: func(c *cell) { c.workflowSettles() }},
	{name: "decision", origin: gate.OriginWorkflow, doors: []string{"POST /v1/workflows/{id}/commands"},
		setup: func(c *cell) {
			c.startWorkflow(`{"per_layer_validation":true,"tasks":[{"id":"a","tool":"note","args":{"target":"T-1"}},`+
				`{"id":"b","tool":"note","args":{"target":"T-1"},"depends_on":["a"]},{"id":"c","tool":"note","args":{"target":"T-1"},"depends_on":["b"]}]}`,
				workflow.StatusAwaitingDecision)
		},
		act: func(c *cell, i int) {
			// the decision the clients saw: a continue that names none
			// answers whichever pause is pending when it arrives, which
			// on a loaded machine may be the next layer's
			c.post(i, "/v1/workflows/"+c.workflow+"/commands", c.key(fmt.Sprint("continue-", i)), `{"type":"continue","decision_id":"`+c.pause+`"}`)
		},
		cross: func(stray, alice *cell) { // her decision answered in his workflow
			stray.post(0, "/v1/workflows/"+stray.workflow+"/commands", stray.key("her-decision"), `{"type":"continue","decision_id":"`+alice.pause+`"}`)
		},
		settle: func(c *cell) { c.workflowSettles() }},
	{name: "workflow_start", origin: gate.OriginWorkflow, doors: []string{"POST /v1/workflows"},
		act: func(c *cell, i int) {
			c.post(i, "/v1/workflows", c.key("start"), `{"session_id":"`+c.session+`","tasks":[{"id":"a","tool":"note","args":{"target":"T-1"}}]}`)
		},
		settle: func(c *cell) { c.workflowsOfSessionSettle() }},
	{name: "internal_turn", origin: gate.OriginAgentInternal, doors: []string{"POST /v1/notifications"},
		act: func(c *cell, i int) {
			c.post(i, "/v1/notifications", c.key(fmt.Sprint("n-", i)), `{"address":"SESSION","session_id":"`+c.session+
				`","target":"AGENT","handler":"AGENT","title":"handle-note","deduplication_key":"`+c.key("dedup")+`"}`)
		},
		cross: func(stray, alice *cell) { // a notification for her, at her session
			stray.post(0, "/v1/notifications", stray.key("for-her"), `{"address":"SESSION","user_id":"`+alice.as.id+`","session_id":"`+alice.session+
				`","target":"AGENT","handler":"AGENT","title":"handle-note","deduplication_key":"`+alice.key("dedup")+`"}`)
		},
		settle: func(c *cell) { c.acts(1) }},
}

// herToken is bob presenting alice's confirmation (her confirm intent, her
// token) in his own session. Under a key of its own: his own confirm
// comes next under the row's key, and one key is one request.
func herToken(stray, alice *cell) {
	stray.post(0, "/v1/sessions/"+stray.session+"/intents", stray.key("her-token"), alice.intent)
}

// TestEveryActingPathRunsOnce walks the table of acting paths × {1, 2, 8
// clients sending the same request at once} × {SQLite, PostgreSQL, two
// instances on one PostgreSQL}, and then each path once more with the
// instance SIGKILLed while its tool runs. A recording tool service counts
// what reached the world: one act per request, on every row; after a
// crash every request is answered (its result, or interrupted) within
// twice the tool timeout and the clock margin, and every act that reached
// the service is in the session's audit, as run or as interrupted. The
// column other_principal has bob, another person, send each row's request
// under alice's keys (otherPrincipal). A published route that can act,
// or a gate origin, without a row fails the test.
func TestEveryActingPathRunsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances and kills them")
	}
	t.Parallel() // it waits on processes of its own most of the time
	coversEveryDoor(t)
	bin := servetest.Binary(t)
	stores := []struct {
		name      string
		instances int
		db        func(t testing.TB) string
	}{
		{"sqlite", 1, func(t testing.TB) string { return filepath.Join(t.TempDir(), "paths.db") }},
		{"postgres", 1, pgtest.Schema},
		{"two_instances", 2, pgtest.Schema},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			w := newPathWorld(t, bin, st.db(t), st.instances)
			t.Run("concurrent", func(t *testing.T) {
				var wg sync.WaitGroup
				var ran atomic.Int64
				for _, p := range actingPaths {
					for _, n := range []int{1, 2, 8} {
						// a row is a subtest (-run .../concurrent/decision_2) run beside the others
						wg.Go(func() {
							t.Run(fmt.Sprintf("%s_%d", p.name, n), func(t *testing.T) {
								ran.Add(1)
								c := w.cell(t, p, n)
								c.run()
								if got := c.actsSince(); got != 1 {
									t.Errorf("%s × %d: the world acted %d times for one request; the answers:\n%s", p.name, n, got, strings.Join(c.answers, "\n"))
								}
								c.recorded()
							})
						})
					}
				}
				for _, p := range actingPaths {
					wg.Go(func() {
						t.Run(p.name+"_other_principal", func(t *testing.T) { w.otherPrincipal(t, p) })
					})
				}
				wg.Wait()
				if ran.Load() == int64(3*len(actingPaths)) { // every row ran: none left out by -run
					w.originsSeen(t)
				}
			})
			t.Run("killed_while_the_tool_runs", func(t *testing.T) {
				w.crash(t)
			})
		})
	}
}

// coversEveryDoor fails t when a write of the published API, or a gate
// origin, has no row and no reason.
func coversEveryDoor(t *testing.T) {
	var api struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(docs.OpenAPI, &api); err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, p := range actingPaths {
		for _, d := range p.doors {
			covered[d] = true
		}
	}
	for path, ops := range api.Paths {
		for method := range ops {
			route := strings.ToUpper(method) + " " + path
			if method == "get" || method == "parameters" {
				continue
			}
			if _, ok := nonActing[route]; !ok && !covered[route] {
				t.Errorf("%s writes and is in no row of actingPaths nor in nonActing: add its row", route)
			}
			if why, ok := nonActing[route]; ok && strings.HasPrefix(why, "covered by") && !covered[route] {
				t.Errorf("%s: %s, but no row goes through it", route, why)
			}
		}
	}
	for door := range covered {
		if _, ok := nonActing[door]; !ok {
			t.Errorf("row door %s is not in nonActing's list of doors", door)
		}
	}
	for _, o := range gate.Origins {
		if !slices.ContainsFunc(actingPaths, func(p actingPath) bool { return p.origin == o }) {
			t.Errorf("origin %s has no acting path", o)
		}
	}
}

// principal is who a client acts for: the user id its API key stands for
// in the configuration, and the key.
type principal struct{ id, key string }

// bearer is the Authorization header's value that sends the principal's
// key.
func (p principal) bearer() string { return "Bearer " + p.key }

// pathWorld is the instances, the recording service and the model.
type pathWorld struct {
	t    *testing.T
	svc  *recorder
	f    *servetest.Fleet
	http *http.Client
	mu   sync.Mutex
	urls []string     // each instance's
	dead map[int]bool // instances killed and not started again
	n    int
	// origins the acting calls were recorded with, over all cells
	origins map[string]bool
	cells   []*cell
	// alice is whom every row's clients act for; bob is the other person
	// of the column other_principal, who sends her requests as his own
	alice, bob principal
}

func newPathWorld(t *testing.T, bin, db string, instances int) *pathWorld {
	svc := &recorder{hold: map[string]chan struct{}{}, arrived: make(chan string, 256)}
	down := httptest.NewServer(svc)
	t.Cleanup(down.Close)
	model := llmtest.New(t)
	model.Respond = respond
	alice := principal{"alice", "alice-key-" + strings.Repeat("a", 22)}
	bob := principal{"bob", "bob-key-" + strings.Repeat("b", 24)}
	digest := func(p principal) string { d := sha256.Sum256([]byte(p.key)); return hex.EncodeToString(d[:]) }
	cfg := filepath.Join(t.TempDir(), "paths.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`version: 1
auth:
  keys:
    - {user_id: %s, roles: [user], key_sha256: %s}
    - {user_id: %s, roles: [user], key_sha256: %s}
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [targets], commands: [act_now, act_confirmed], tools: [act, note]}]
catalogs: [{id: targets, entity_type: target, items: [{id: T-1, display_name: Target one}]}]
commands:
  - {id: act_now, tool: act, parameter: target, resolver: {catalog: targets}, triggers: ["act now on {item}"]}
  - {id: act_confirmed, tool: act, parameter: target, resolver: {catalog: targets}, requires_confirmation: true, triggers: ["act on {item}"]}
tools:
  - {name: act, description: Acts on a target., impact: external, risk: low, input_schema: {type: object, properties: {target: {type: string}}, required: [target]}, http: {url: %q}}
  - {name: note, description: Notes a target., impact: internal, risk: low, input_schema: {type: object, properties: {target: {type: string}}}, http: {url: %q}}
llm: {base_url: %q, model: test-model, timeout_ms: 10000}
`, alice.id, digest(alice), bob.id, digest(bob), down.URL+"/act", down.URL+"/note", model.URL)), 0o644)
	f := servetest.NewFleet(t, bin, instances, "--config", cfg, "--db", db, "--tool-timeout", "5s", "--clock-margin", "0", "--workflow-lease", "2s", "--log-level", "warn")
	w := &pathWorld{t: t, svc: svc, f: f, origins: map[string]bool{}, dead: map[int]bool{}, http: &http.Client{Timeout: 30 * time.Second},
		alice: alice, bob: bob}
	for i := range instances {
		f.Start(i)
		w.urls = append(w.urls, f.URL(i))
	}
	return w
}

// url is the instance client i talks to — the clients are spread over
// the instances — or, when it was killed, one that lives.
func (w *pathWorld) url(i int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := i % len(w.urls)
	for k := range len(w.urls) {
		if !w.dead[(n+k)%len(w.urls)] {
			return w.urls[(n+k)%len(w.urls)]
		}
	}
	return w.urls[n]
}

// do sends a request of who's patiently (servetest.Patiently) to
// whichever instance serves client i at each attempt; header is more
// name, value pairs.
func (w *pathWorld) do(who principal, i int, method, path, key, body string, header ...string) (int, []byte) {
	return servetest.Patiently(w.http, func() string { return w.url(i) }, method, path, key, body, append([]string{"Authorization", who.bearer()}, header...)...)
}

// answerPauses approves every workflow waiting for approval and continues
// every interrupted one.
func (w *pathWorld) answerPauses() {
	st, raw := w.do(w.alice, 0, "GET", "/v1/workflows?limit=500", "", "")
	var list struct{ Workflows []workflow.Workflow }
	if st != 200 || json.Unmarshal(raw, &list) != nil {
		return
	}
	for _, wf := range list.Workflows {
		if wf.Interruption != nil {
			w.do(w.alice, 0, "POST", "/v1/workflows/"+wf.ID+"/commands", "", `{"type":"checkpoint_response","checkpoint_id":"`+wf.Interruption.CheckpointID+`","decision":"continue"}`)
		}
	}
}

// respond is the model: it proposes the external act when asked to handle
// target one, notes a target in an internal turn, and answers text after
// a tool's result.
func respond(req map[string]any) llmtest.Reply {
	msgs, _ := req["messages"].([]any)
	if len(msgs) > 0 {
		if last, _ := msgs[len(msgs)-1].(map[string]any); last["role"] == "tool" {
			return llmtest.Reply{Text: "done"}
		}
	}
	var asked string // the newest user message: what this turn asks (a later turn's history never asks again)
	for i := len(msgs) - 1; i >= 0; i-- {
		if m, _ := msgs[i].(map[string]any); m["role"] == "user" {
			b, _ := json.Marshal(m["content"])
			asked = string(b)
			break
		}
	}
	raw := []byte(asked)
	switch {
	case strings.Contains(string(raw), "handle-note") || strings.Contains(string(raw), "please note target one"):
		return llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "note", Arguments: `{"target":"T-1"}`}}}
	case strings.Contains(string(raw), "please handle target one"):
		return llmtest.Reply{Text: "I will act on it.", ToolCalls: []llmtest.Call{{Name: "act", Arguments: `{"target":"T-1"}`}}}
	}
	return llmtest.Reply{Text: "ok"}
}

// recorder is the world the tools act on: it counts every call by the
// session it came from and acts once per Idempotency-Key, as a
// well-behaved service does; calls of a session on hold wait until it is
// released (its instance is killed meanwhile).
type recorder struct {
	mu      sync.Mutex
	calls   []recorded
	acted   map[string]bool // Idempotency-Keys acted on
	hold    map[string]chan struct{}
	arrived chan string // sessions whose call is being held
}

type recorded struct {
	tool, session, requestID, key, origin string
	principal                             string // whom the call says it acts for
	acted                                 bool   // the first call with its key
}

func (s *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Context agentplane.InvocationContext `json:"context"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	if s.acted == nil {
		s.acted = map[string]bool{}
	}
	first := !s.acted[key]
	s.acted[key] = true
	s.calls = append(s.calls, recorded{tool: strings.TrimPrefix(r.URL.Path, "/"), session: body.Context.SessionID,
		requestID: body.Context.RequestID, key: key, origin: body.Context.Origin, principal: body.Context.Principal.UserID, acted: first})
	wait := s.hold[body.Context.SessionID]
	s.mu.Unlock()
	if wait != nil {
		s.arrived <- body.Context.SessionID
		select {
		case <-wait:
		case <-r.Context().Done():
		}
	}
	w.Header().Set("Content-Type", "application/json")
	// what it answers names the call's key: an answer that shows it to
	// anyone but the call's principal leaked her result
	fmt.Fprintf(w, `{"ok":true,"session":%q,"key":%q}`, body.Context.SessionID, key)
}

// acted returns how many calls of a session acted (first with their key).
func (s *recorder) actedFor(session string) (n int, calls []recorded) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		if c.session == session {
			calls = append(calls, c)
			if c.acted {
				n++
			}
		}
	}
	return n, calls
}

// cell is one row × n clients on one store.
type cell struct {
	t  *testing.T
	w  *pathWorld
	p  actingPath
	n  int
	as principal // whom its clients act for
	// via is added to a client's number to pick its instance: bob's
	// requests go to another instance than alice's, where there are two
	via      int
	id       string
	session  string
	token    string // a confirmation's token
	intent   string // the intent that confirms, as JSON
	workflow string
	pause    string // the checkpoint an approval answers
	before   int    // acts before the clients sent their request
	mcp      *mcpsdk.ClientSession
	answers  []string
	statuses []int // of the answers, in order
}

// cell opens a session for the row's n clients acting for alice.
func (w *pathWorld) cell(t *testing.T, p actingPath, n int) *cell {
	w.mu.Lock()
	w.n++
	id := fmt.Sprintf("%s-%d-%d", p.name, n, w.n)
	w.mu.Unlock()
	return w.cellAs(t, p, n, w.alice, id)
}

// cellAs opens a session for the row's n clients acting for who, their
// keys made from id: another principal's cell of the same id sends the
// same keys.
func (w *pathWorld) cellAs(t *testing.T, p actingPath, n int, who principal, id string) *cell {
	c := &cell{t: t, w: w, p: p, n: n, as: who, id: id}
	w.mu.Lock()
	w.cells = append(w.cells, c)
	w.mu.Unlock()
	st, raw := w.do(who, 0, "POST", "/v1/sessions", c.key("open"), `{}`)
	var created struct {
		SessionID string `json:"session_id"`
	}
	if json.Unmarshal(raw, &created); st != 201 || created.SessionID == "" {
		t.Fatalf("%s: open a session: %d %s", c.id, st, raw)
	}
	c.session = created.SessionID
	return c
}

// run sets the cell up, has its n clients send the request at once, and
// waits for it to settle.
func (c *cell) run() {
	if c.p.setup != nil {
		c.p.setup(c)
	}
	c.before, _ = c.w.svc.actedFor(c.session)
	var wg sync.WaitGroup
	for i := range c.n {
		wg.Go(func() { c.p.act(c, i) })
	}
	wg.Wait()
	if c.p.settle != nil {
		c.p.settle(c)
	}
}

// actsSince is how many acts the cell's request caused.
func (c *cell) actsSince() int {
	n, _ := c.w.svc.actedFor(c.session)
	return n - c.before
}

func (c *cell) key(what string) string { return c.id + "-" + what }

// post sends client i's request as the cell's principal and notes its
// answer; header is more name, value pairs.
func (c *cell) post(i int, path, key, body string, header ...string) []byte {
	st, raw := c.w.do(c.as, i+c.via, "POST", path, key, body, header...)
	c.answered(st, fmt.Sprintf("POST %s %s → %d %s", path, body, st, raw))
	if st >= 500 || st == 0 {
		c.t.Errorf("%s (%s): POST %s: %d %s", c.id, c.as.id, path, st, raw)
	}
	return raw
}

// answered notes an answer with its status.
func (c *cell) answered(status int, answer string) {
	c.w.mu.Lock()
	c.answers = append(c.answers, answer)
	c.statuses = append(c.statuses, status)
	c.w.mu.Unlock()
}

// ask has the router ask for the confirmation of act_confirmed.
func (c *cell) ask() {
	var a struct {
		ConfirmationToken string          `json:"confirmation_token"`
		ConfirmIntent     json.RawMessage `json:"confirm_intent"`
	}
	raw := c.post(0, "/v1/sessions/"+c.session+"/turns", c.key("ask"), `{"text":"act on target one"}`)
	if json.Unmarshal(raw, &a); a.ConfirmationToken == "" || len(a.ConfirmIntent) == 0 {
		c.t.Fatalf("%s: no confirmation asked: %s", c.id, raw)
	}
	c.token, c.intent = a.ConfirmationToken, string(a.ConfirmIntent)
}

// propose has the LLM propose the external act.
func (c *cell) propose() {
	var a struct {
		LLM struct {
			ConfirmationToken string          `json:"confirmation_token"`
			ConfirmIntent     json.RawMessage `json:"confirm_intent"`
		} `json:"llm"`
	}
	raw := c.post(0, "/v1/sessions/"+c.session+"/turns", c.key("propose"), `{"text":"please handle target one"}`)
	if json.Unmarshal(raw, &a); a.LLM.ConfirmationToken == "" {
		c.t.Fatalf("%s: the LLM's call was not asked of the human: %s", c.id, raw)
	}
	c.token, c.intent = a.LLM.ConfirmationToken, string(a.LLM.ConfirmIntent)
}

// confirm posts the confirm button's intent.
func (c *cell) confirm(i int, key string) {
	c.post(i, "/v1/sessions/"+c.session+"/intents", key, c.intent)
}

// wsTurn sends a turn over the session's WebSocket and waits for its answer.
func (c *cell) wsTurn(i int, key, text string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := "/v1/sessions/" + c.session + "/ws"
	opts := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {c.as.bearer()}}}
	for {
		conn, resp, err := websocket.Dial(ctx, strings.Replace(c.w.url(i+c.via), "http", "ws", 1)+path, opts)
		if err != nil && resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500 { // refused: the answer
			c.answered(resp.StatusCode, fmt.Sprintf("GET %s (WebSocket) → %d", path, resp.StatusCode))
			return
		}
		if err == nil {
			msg, _ := json.Marshal(map[string]string{"type": "turn", "request_id": key, "text": text})
			err = conn.Write(ctx, websocket.MessageText, msg)
			for err == nil {
				var data []byte
				if _, data, err = conn.Read(ctx); err != nil {
					break
				}
				var m struct {
					Type  string
					Error *struct{ Code string }
				}
				json.Unmarshal(data, &m)
				if m.Type == "turn" || m.Type == "error" && m.Error != nil && m.Error.Code != agentplane.CodeRequestInProgress {
					c.answered(http.StatusOK, fmt.Sprintf("GET %s (WebSocket) %s → %s", path, msg, data))
					conn.Close(websocket.StatusNormalClosure, "")
					return
				}
				if m.Type == "error" { // still running: ask again
					time.Sleep(20 * time.Millisecond)
					err = conn.Write(ctx, websocket.MessageText, msg)
				}
			}
			conn.CloseNow()
		}
		if ctx.Err() != nil {
			c.t.Errorf("%s: the WebSocket turn got no answer: %v", c.id, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mcpConnect opens the cell's MCP session: the agentplane session it
// acts in is the one MCP binds it to.
func (c *cell) mcpConnect() {
	c.mcp = c.mcpSession("")
	// the bound session: the one the first call's output names
	res, err := c.mcp.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "note", Arguments: map[string]any{"target": "T-1"}})
	if err != nil || res.IsError {
		c.t.Fatalf("%s: MCP's first call: %+v %v", c.id, res, err)
	}
	var out struct{ Session string }
	json.Unmarshal([]byte(res.Content[0].(*mcpsdk.TextContent).Text), &out)
	c.session = out.Session
}

// mcpSession connects to the instance the cell's client 0 talks to now,
// bound to the agentplane session (mcpserver.SessionHeader) when one is
// named.
func (c *cell) mcpSession(session string) *mcpsdk.ClientSession {
	hc := &http.Client{Transport: mcpHeaders{session, c.as}}
	var cs *mcpsdk.ClientSession
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		cs, err = mcpsdk.NewClient(&mcpsdk.Implementation{Name: "paths", Version: "1"}, nil).Connect(context.Background(),
			&mcpsdk.StreamableClientTransport{Endpoint: c.w.url(c.via) + "/mcp", HTTPClient: hc}, nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: MCP: %v", c.id, err)
		}
	}
	c.t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpHeaders sends the principal's key on every MCP request, and names
// the agentplane session an MCP session binds to.
type mcpHeaders struct {
	session string
	as      principal
}

func (h mcpHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", h.as.bearer())
	if h.session != "" {
		r.Header.Set(mcpserver.SessionHeader, h.session)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpCall calls note over MCP with the cell's request id in _meta; when
// the MCP session is lost (its instance stopped) it connects again, bound
// to the same agentplane session, and sends the same call again.
func (c *cell) mcpCall(key string) {
	deadline := time.Now().Add(time.Minute)
	cs := c.mcp // the cell's; a lost one is replaced by this client's own
	for {
		params := &mcpsdk.CallToolParams{Name: "note", Arguments: map[string]any{"target": "T-1"}}
		params.Meta = mcpsdk.Meta{mcpserver.RequestIDKey: key}
		res, err := cs.CallTool(context.Background(), params)
		b, _ := json.Marshal(res)
		if err == nil && !res.IsError {
			c.answered(http.StatusOK, fmt.Sprintf("MCP tools/call note %s → %s", key, b))
			return
		}
		if err == nil && strings.Contains(string(b), agentplane.CodeInterrupted) {
			return // answered: its instance stopped while it ran
		}
		if err == nil && !strings.Contains(string(b), agentplane.CodeRequestInProgress) {
			c.t.Errorf("%s: MCP call: %s", c.id, b)
			return
		}
		if time.Now().After(deadline) {
			c.t.Errorf("%s: MCP call got no answer in a minute: %v", c.id, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
		if err != nil {
			cs = c.mcpSession(c.session)
		}
	}
}

// startWorkflow starts a workflow in the cell's session and waits until
// it pauses with status want.
func (c *cell) startWorkflow(tasks, want string) {
	body := `{"session_id":"` + c.session + `",` + tasks[1:]
	var w workflow.Workflow
	raw := c.post(0, "/v1/workflows", c.key("wf"), body)
	if err := json.Unmarshal(raw, &w); err != nil || w.ID == "" {
		c.t.Fatalf("%s: start: %s", c.id, raw)
	}
	c.workflow = w.ID
	w = c.waitWorkflow(func(w workflow.Workflow) bool { return w.Status == want })
	if w.Approval != nil {
		c.pause = w.Approval.CheckpointID
	}
	if w.Decision != nil {
		c.pause = w.Decision.ID
	}
}

// waitWorkflow polls the cell's workflow until ok, for up to a minute.
func (c *cell) waitWorkflow(ok func(workflow.Workflow) bool) workflow.Workflow {
	deadline := time.Now().Add(time.Minute)
	for {
		var w workflow.Workflow
		st, raw := c.w.do(c.as, 0, "GET", "/v1/workflows/"+c.workflow, "", "")
		if st == 200 && json.Unmarshal(raw, &w) == nil && ok(w) {
			return w
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: workflow %s: %s", c.id, c.workflow, raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workflowSettles waits until the workflow is paused again or finished,
// and no task of it runs — or it was interrupted (a kill), its tasks in
// flight then being the dead runner's.
func (c *cell) workflowSettles() {
	c.waitWorkflow(func(w workflow.Workflow) bool {
		return w.Status == workflow.StatusInterrupted ||
			w.Status != workflow.StatusRunning && !slices.ContainsFunc(w.Tasks, func(t workflow.TaskRun) bool { return t.Status == workflow.TaskRunning })
	})
}

// workflowsOfSessionSettle waits until every workflow of the session ended.
func (c *cell) workflowsOfSessionSettle() {
	deadline := time.Now().Add(time.Minute)
	for {
		var list struct{ Workflows []workflow.Workflow }
		_, raw := c.w.do(c.as, 0, "GET", "/v1/workflows?limit=500", "", "")
		json.Unmarshal(raw, &list)
		open := 0
		for _, w := range list.Workflows {
			if w.SessionID == c.session && !workflow.Terminal(w.Status) {
				open++
			}
		}
		if open == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// acts waits until the cell's request acted n times, for up to 30 s.
func (c *cell) acts(n int) {
	deadline := time.Now().Add(30 * time.Second)
	for c.actsSince() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// recorded fails the test unless every call of the cell's session that
// reached the service is in the session's audit chain — run, or recorded
// as interrupted — and the chain verifies; it notes the origins seen.
func (c *cell) recorded() {
	_, calls := c.w.svc.actedFor(c.session)
	var recs []audit.Record
	deadline := time.Now().Add(2*5*time.Second + 3*time.Second + 10*time.Second) // twice the tool timeout, the sweep, slack
	for {
		st, raw := c.w.do(c.as, 0, "GET", "/v1/sessions/"+c.session+"/audit", "", "")
		recs = recs[:0]
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if r, err := audit.Decode([]byte(line)); err == nil {
				recs = append(recs, r)
			}
		}
		missing := unrecorded(calls, recs)
		if st == 200 && len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			c.t.Errorf("%s: %d calls reached the world and are not in the audit chain: %+v", c.id, len(missing), missing)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := audit.Verify(recs); err != nil {
		c.t.Errorf("%s: the chain does not verify: %v", c.id, err)
	}
	c.w.mu.Lock()
	for _, r := range recs {
		if r.Intent != nil && r.Result != nil && r.Result.Tool != "" {
			c.w.origins[r.Intent.Origin] = true
		}
	}
	c.w.mu.Unlock()
}

// unrecorded returns the calls no record of the chain accounts for: an
// execution (or turn) with the call's request id, run or interrupted.
func unrecorded(calls []recorded, recs []audit.Record) []recorded {
	var out []recorded
	for _, call := range calls {
		found := slices.ContainsFunc(recs, func(r audit.Record) bool {
			if r.Result == nil || r.Intent == nil {
				return false
			}
			id := r.Result.RequestID
			if id == "" {
				id = r.Intent.RequestID
			}
			// run: a success, or a failure after the call (timed out,
			// interrupted, the tool's own error) — not a refusal before it
			ran := r.Result.Status == agentplane.StatusSuccess || r.Result.Status == agentplane.StatusFailed
			return ran && id == call.requestID
		})
		if !found {
			out = append(out, call)
		}
	}
	return out
}

// originsSeen fails t unless every gate origin acted in some cell.
func (w *pathWorld) originsSeen(t *testing.T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range gate.Origins {
		if !w.origins[string(o)] {
			t.Errorf("no cell recorded an acting call of origin %s", o)
		}
	}
}

// crash runs every path once more with its session on hold: when every
// call has reached the service, the instance that runs them is killed;
// then every request is asked again (the patient client retries with its
// key) and must be answered, each call that reached the world must be in
// its chain, and nothing acted twice.
func (w *pathWorld) crash(t *testing.T) {
	var cells []*cell
	for _, p := range actingPaths {
		for _, n := range []int{1, 2, 8} {
			cells = append(cells, w.cell(t, p, n))
		}
	}
	// the setups run first, undisturbed; then the requests, held
	for _, c := range cells {
		if c.p.setup != nil {
			c.p.setup(c)
		}
		c.before, _ = w.svc.actedFor(c.session)
		w.svc.mu.Lock()
		w.svc.hold[c.session] = make(chan struct{})
		w.svc.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, c := range cells {
		for i := range c.n {
			wg.Go(func() { c.p.act(c, i) }) // patient clients: each retries until answered
		}
	}
	held := map[string]bool{}
	deadline := time.After(time.Minute)
	for len(held) < len(cells) {
		select {
		case s := <-w.svc.arrived:
			held[s] = true
		case <-deadline:
			var missing []string
			for _, c := range cells {
				if !held[c.session] {
					missing = append(missing, c.id)
				}
			}
			t.Fatalf("only %d of %d paths reached their tool; not %v", len(held), len(cells), missing)
		}
	}
	w.mu.Lock()
	w.dead[0] = true
	w.mu.Unlock()
	w.f.Kill(0) // while every path's tool runs
	killed := time.Now()
	w.svc.mu.Lock()
	for s, ch := range w.svc.hold {
		close(ch)
		delete(w.svc.hold, s)
	}
	w.svc.mu.Unlock()
	if len(w.urls) == 1 {
		w.f.Start(0) // restarted on the same database; with two, the other instance answers
		w.mu.Lock()
		w.dead[0] = false
		w.mu.Unlock()
	}
	answered := make(chan struct{})
	go func() {
		wg.Wait()
		close(answered)
	}()
	// a workflow the kill interrupted waits for checkpoint_response
	for done := false; !done; {
		select {
		case <-answered:
			done = true
		case <-time.After(200 * time.Millisecond):
			w.answerPauses()
		}
	}
	t.Logf("killed with %d requests' tools running: every request answered %.1fs after the kill (tool timeout 5s, clock margin 0)", len(cells), time.Since(killed).Seconds())
	for _, c := range cells {
		if c.p.settle != nil {
			c.p.settle(c)
		}
		if got := c.actsSince(); got > 1 {
			t.Errorf("%s × %d, killed: the world acted %d times for one request; the answers:\n%s", c.p.name, c.n, got, strings.Join(c.answers, "\n"))
		}
		c.recorded()
	}
}

// otherPrincipal is a row's cell of the column other_principal: the row
// set up for alice and for bob, his cell sending the same keys as hers
// (and the same deduplication key); then at once alice sends her request,
// bob sends it at her ids (the thief: her session, workflow, MCP session,
// confirmation) and, after trying her token or decision in his own
// session (cross), sends it as his own. Alice's request acts once, for
// her; bob's at her ids is refused with a 4xx and nothing acts for him
// there; his own acts once, for him, under a downstream key that is not
// hers; no answer bob got holds her result (the key it acted under,
// which the service answers).
func (w *pathWorld) otherPrincipal(t *testing.T, p actingPath) {
	alice := w.cell(t, p, 1)
	bob := w.cellAs(t, p, 1, w.bob, alice.id)
	bob.via = 1 // with two instances, his own requests go to the other one; the thief goes to hers
	for _, c := range []*cell{alice, bob} {
		if p.setup != nil {
			p.setup(c)
		}
		c.before, _ = w.svc.actedFor(c.session)
	}
	switch {
	case bob.session == alice.session:
		t.Fatalf("%s: bob's request under alice's key opened or bound her session %s", alice.id, alice.session)
	case alice.workflow != "" && bob.workflow == alice.workflow:
		t.Fatalf("%s: bob's start under alice's key gave him her workflow %s", alice.id, alice.workflow)
	}
	thief, stray := *alice, *bob
	thief.as, thief.answers, thief.statuses = w.bob, nil, nil
	stray.answers, stray.statuses = nil, nil
	var wg sync.WaitGroup
	wg.Go(func() { p.act(alice, 0) })
	wg.Go(func() {
		if p.steal != nil {
			p.steal(&thief)
		} else {
			p.act(&thief, 0)
		}
	})
	wg.Go(func() {
		if p.cross != nil {
			p.cross(&stray, alice)
		}
		p.act(bob, 0)
	})
	wg.Wait()
	if p.settle != nil {
		p.settle(alice)
		p.settle(bob)
	}
	all := func(cs ...*cell) string {
		var out []string
		for _, c := range cs {
			for _, a := range c.answers {
				out = append(out, c.as.id+": "+a)
			}
		}
		return strings.Join(out, "\n")
	}
	for _, c := range []*cell{alice, bob} {
		if got := c.actsSince(); got != 1 {
			t.Errorf("%s: the world acted %d times for %s's request; the answers:\n%s", p.name, got, c.as.id, all(alice, &thief, &stray, bob))
		}
	}
	if len(thief.statuses) == 0 {
		t.Errorf("%s: bob's request at alice's ids got no answer", p.name)
	}
	// at her session, workflow or MCP session: as if it did not exist (a
	// 404; a 403, or a 400 naming the session, where he says whom he
	// emits for) — not a 409, which would say her key was used
	for k, st := range thief.statuses {
		if st != http.StatusNotFound && st != http.StatusForbidden && st != http.StatusBadRequest {
			t.Errorf("%s: bob at alice's ids was not refused with a 400, 403 or 404: %s", p.name, thief.answers[k])
		}
	}
	for k, st := range stray.statuses {
		if !refused(st, stray.answers[k]) {
			t.Errorf("%s: alice's ids in bob's own session or workflow were not refused: %s", p.name, stray.answers[k])
		}
	}
	// at the service: each session's calls are its principal's, under
	// keys of their own
	keys := map[string]string{} // downstream key -> whose call came with it
	for _, c := range []*cell{alice, bob} {
		_, calls := w.svc.actedFor(c.session)
		for _, call := range calls {
			if call.principal != c.as.id {
				t.Errorf("%s: a call in %s's session reached the service for %q: %+v", p.name, c.as.id, call.principal, call)
			}
			if who, ok := keys[call.key]; !ok {
				keys[call.key] = c.as.id
			} else if who != c.as.id {
				t.Errorf("%s: alice's and bob's calls reached the service under one key %s", p.name, call.key)
			}
		}
	}
	alice.keysDerived(w.bob)
	bob.keysDerived(w.alice)
	// in the answers: none of bob's holds a key of hers, nor hers of his
	for key, who := range keys {
		for _, c := range []*cell{alice, &thief, &stray, bob} {
			if c.as.id == who {
				continue
			}
			for _, a := range c.answers {
				if strings.Contains(a, key) {
					t.Errorf("%s: %s got the result of %s's call (key %s): %s", p.name, c.as.id, who, key, a)
				}
			}
		}
	}
	if t.Failed() {
		return
	}
	alice.recorded()
	bob.recorded()
}

// keysDerived fails the test unless every call of the cell's session
// reached the service under the key derived from the cell's principal,
// the session and the call's request (gate.DownstreamKey; a workflow
// task's own key for a workflow's call), and not under the key the other
// principal's same request in the same session would get. Two people
// never share a session, so a key that left the principal out would
// collide with nobody's above; it would the day two did.
func (c *cell) keysDerived(other principal) {
	_, calls := c.w.svc.actedFor(c.session)
	var tasks []string // the task keys of the session's workflows
	if slices.ContainsFunc(calls, func(r recorded) bool { return r.origin == string(gate.OriginWorkflow) }) {
		var list struct{ Workflows []workflow.Workflow }
		_, raw := c.w.do(c.as, 0, "GET", "/v1/workflows?limit=500", "", "")
		json.Unmarshal(raw, &list)
		for _, w := range list.Workflows {
			for _, task := range w.Tasks {
				if w.SessionID == c.session {
					tasks = append(tasks, task.Key)
				}
			}
		}
	}
	for _, call := range calls {
		keys := []string{call.requestID}
		if call.origin == string(gate.OriginWorkflow) {
			keys = tasks
		}
		derived := func(k string) bool {
			return call.key == gate.DownstreamKey(c.as.id, c.session, k) && call.key != gate.DownstreamKey(other.id, c.session, k)
		}
		if !slices.ContainsFunc(keys, derived) {
			c.t.Errorf("%s: %s's call reached the service under %s, not a key derived from %s (not %s), the session and its request (%s, task keys %v)",
				c.id, c.as.id, call.key, c.as.id, other.id, call.requestID, tasks)
		}
	}
}

// refused reports whether an answer to bob presenting alice's ids in his
// own session or workflow refused him: a 4xx (409: his workflow has no
// such pause), or an intent's result that is not confirmed.
func refused(status int, answer string) bool {
	return status >= 400 && status < 500 ||
		status == http.StatusOK && strings.Contains(answer, `"code":"`+agentplane.CodeConfirmationInvalid+`"`)
}

// mcpSteal is bob (the thief: alice's cell acting for him) calling over
// MCP in her sessions: an MCP session of his bound to her agentplane
// session, and a call, under her request id, in her MCP session.
func (c *cell) mcpSteal(key string) {
	accept := []string{"Accept", "application/json, text/event-stream"}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"thief","version":"1"}}}`
	// the same initialize is alice's to send: his 404 is the refusal,
	// not a request the server never serves
	if st, raw := c.w.do(c.w.alice, 0, "POST", "/mcp", "", initialize, append([]string{mcpserver.SessionHeader, c.session}, accept...)...); st != http.StatusOK {
		c.t.Errorf("%s: alice's own MCP initialize bound to her session: %d %s", c.id, st, raw)
	}
	c.post(0, "/mcp", "", initialize, append([]string{mcpserver.SessionHeader, c.session}, accept...)...)
	c.post(0, "/mcp", "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"note","arguments":{"target":"T-1"},"_meta":{"`+mcpserver.RequestIDKey+`":"`+key+`"}}}`,
		append([]string{"Mcp-Session-Id", c.mcp.ID()}, accept...)...)
}
