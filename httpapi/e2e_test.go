package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/internal/testkit/oidctest"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/workflow"
)

// env is a server on loopback over the demo configuration, with a
// client that checks every exchange against the OpenAPI document.
type env struct {
	t      testing.TB
	srv    *httptest.Server
	api    *httpapi.Server
	core   *core.Core
	outbox *demo.Outbox
	client *http.Client
	wf     *workflow.Engine
	rt     *plane.Runtime
	mcp    *mcpserver.Server
}

type envOptions struct {
	db   string              // the SQLite file; "" for a new one
	edit func(string) string // changes the demo configuration
	keys map[string]string   // key -> user id
	// oidc, when set, is the identity provider (auth.oidc with audience
	// testAudience, roles from the "roles" claim, the scopes required)
	oidc   *oidctest.Provider
	scopes []string
	roles  map[string][]string
	queue  int
	llm    *llmtest.Server // the LLM endpoint; nil: no LLM
	// smallBuffers gives the server's connections a 4 KiB send buffer: a
	// client that stops reading blocks the server's writes at once
	smallBuffers bool
	streams      int      // httpapi.Options.StreamsPerPrincipal
	origins      []string // httpapi.Options.Origins
	bodyTimeout  time.Duration
}

func newEnv(t testing.TB, o *envOptions) *env {
	t.Helper()
	if o == nil {
		o = &envOptions{}
	}
	metrics := httpapi.NewMetrics()
	out := demo.NewOutbox(nil)
	yaml := string(demo.YAML)
	if o.edit != nil {
		yaml = o.edit(yaml)
	}
	if o.db == "" {
		o.db = filepath.Join(t.TempDir(), "e2e.db")
	}
	if len(o.keys) > 0 || o.oidc != nil {
		yaml += "\nauth:\n"
	}
	if len(o.keys) > 0 {
		yaml += "  keys:\n"
		for key, user := range o.keys {
			d := sha256.Sum256([]byte(key))
			roles, _ := json.Marshal(o.roles[user])
			yaml += fmt.Sprintf("    - {user_id: %q, key_sha256: %s, roles: %s}\n", user, hex.EncodeToString(d[:]), roles)
		}
	}
	if o.oidc != nil {
		scopes, _ := json.Marshal(o.scopes)
		yaml += fmt.Sprintf("  oidc: {issuer: %q, audience: %q, roles_claim: roles, required_scopes: %s, client_id: agentplane-page, scopes: [openid, agentplane]}\n",
			o.oidc.URL, testAudience, scopes)
	}
	vars := map[string]string{}
	if o.llm != nil {
		vars["AGENTPLANE_LLM_BASE_URL"], vars["AGENTPLANE_LLM_MODEL"] = o.llm.URL, "test-model"
	}
	// SQLite, with the notification ledger's and the workflows' tables
	rt := demotest.Runtime(t, plane.Options{Config: core.Source{YAML: []byte(yaml), Name: demo.Name}, DB: o.db,
		Core:      core.Options{Programs: out.Programs(), Observer: metrics.Observer(nil), NewID: newIDs()},
		Hub:       events.Options{Queue: o.queue},
		Workflows: workflow.Options{Poll: 20 * time.Millisecond, Backoff: time.Millisecond},
		LLM:       o.llm != nil, Getenv: func(k string) string { return vars[k] }})
	mcpSrv := mcpserver.New(rt, nil)
	t.Cleanup(mcpSrv.Close) // after the HTTP server's Close, before the runtime's
	api := httpapi.New(rt, &httpapi.Options{Metrics: metrics, Heartbeat: 50 * time.Millisecond, MCP: mcpSrv.Handler(),
		StreamsPerPrincipal: o.streams, Origins: o.origins, BodyTimeout: o.bodyTimeout})
	srv := httptest.NewUnstartedServer(api.Handler())
	if o.smallBuffers {
		srv.Listener = smallBufferListener{srv.Listener}
	}
	srv.Config.MaxHeaderBytes = 64 << 10
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, api: api, core: rt.Core, outbox: out, client: validatingClient(t, srv.Client()), wf: rt.Workflows, rt: rt, mcp: mcpSrv}
}

// newIDs makes unique random-looking ids (the demo's are sequential,
// which a test of ownership must not lean on).
func newIDs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		h := sha256.Sum256([]byte(strconv.Itoa(n)))
		return hex.EncodeToString(h[:8])
	}
}

// call sends a request and decodes a JSON answer into out (when not nil).
func (e *env) call(method, path, key string, body any, out any, header ...string) int {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil || method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

func (e *env) create(key string, body any) httpapi.SessionCreated {
	e.t.Helper()
	var out httpapi.SessionCreated
	if st := e.call("POST", "/v1/sessions", key, body, &out); st != http.StatusCreated {
		e.t.Fatalf("create session: %d %+v", st, out)
	}
	return out
}

func (e *env) turn(key, id string, body httpapi.TurnBody, header ...string) httpapi.TurnAnswer {
	e.t.Helper()
	var out httpapi.TurnAnswer
	if st := e.call("POST", "/v1/sessions/"+id+"/turns", key, body, &out, header...); st != http.StatusOK {
		e.t.Fatalf("turn %+v: %d", body, st)
	}
	return out
}

func errCode(t *testing.T, st int, body httpapi.ErrorBody, wantStatus int, wantCode string) {
	t.Helper()
	if st != wantStatus || body.Error.Code != wantCode || body.Error.Message == "" {
		t.Fatalf("got %d %+v, want %d %s", st, body, wantStatus, wantCode)
	}
}

// Flows A–D of the agent control protocol, through the API.
func TestFlowsThroughTheAPI(t *testing.T) {
	e := newEnv(t, nil)
	t.Run("A", func(t *testing.T) {
		s := e.create("", nil)
		a := e.turn("", s.SessionID, httpapi.TurnBody{Text: "switch to DDR mode"})
		if a.Decision.Action != agentplane.ActionInvokeCommand || a.Result == nil || a.Result.Status != agentplane.StatusSuccess || a.Snapshot.Mode != "ddr" {
			t.Fatalf("%+v", a)
		}
		var snap agentplane.StateSnapshot
		if e.call("GET", "/v1/sessions/"+s.SessionID, "", nil, &snap); snap.Mode != "ddr" || snap.Version != a.Snapshot.Version {
			t.Fatalf("snapshot %+v", snap)
		}
	})
	t.Run("B", func(t *testing.T) {
		s := e.create("", map[string]any{"ui": true})
		a := e.turn("", s.SessionID, httpapi.TurnBody{Text: "I want to work on email templates"})
		if a.Decision.Action != agentplane.ActionOpenPicker || a.Result != nil || a.Snapshot.PendingPicker == nil {
			t.Fatalf("%+v", a)
		}
		a = e.turn("", s.SessionID, httpapi.TurnBody{Selection: &agentplane.Selection{CommandID: a.Decision.CommandID, ID: "TPL-123"}})
		if a.Result == nil || a.Result.Status != agentplane.StatusSuccess || a.Snapshot.AWC.Entity.ID != "TPL-123" || a.Snapshot.AWC.RelatedEntities[0].Header.ID != "PERS-22" {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("C", func(t *testing.T) {
		s := e.create("", nil)
		e.turn("", s.SessionID, httpapi.TurnBody{Text: "open the Q1 CFO Outreach template"})
		a := e.turn("", s.SessionID, httpapi.TurnBody{Text: "rewrite this template for the CFO persona"})
		if a.Decision.Action != agentplane.ActionContinueLLM || a.Result != nil || a.Snapshot.AWC.Entity.ID != "TPL-123" {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("D", func(t *testing.T) {
		sent := len(e.outbox.Sends())
		s := e.create("", map[string]any{"mode": "sales"})
		e.turn("", s.SessionID, httpapi.TurnBody{Text: "open the Q1 CFO Outreach template"})
		a := e.turn("", s.SessionID, httpapi.TurnBody{Text: "send this to the Q1 pilot list"})
		if a.Decision.Action != agentplane.ActionAskQuestion || a.ConfirmationToken == "" || a.Result != nil || len(e.outbox.Sends()) != sent {
			t.Fatalf("%+v", a)
		}
		// the confirm button: the intent with the token, as the answer gives it
		intent := agentplane.Intent{Type: agentplane.IntentActionCall, Action: "send_template_to_list", Args: json.RawMessage(`{"list_id":"LIST-9"}`),
			ConfirmationToken: a.ConfirmationToken, Origin: "user"}
		if c := a.ConfirmIntent; c == nil || c.Type != intent.Type || c.Action != intent.Action || string(c.Args) != string(intent.Args) ||
			c.ConfirmationToken != intent.ConfirmationToken || c.Origin != intent.Origin || c.Mode != "" {
			t.Fatalf("confirm_intent %+v, want %+v", a.ConfirmIntent, intent)
		}
		var res agentplane.ExecutionResult
		if st := e.call("POST", "/v1/sessions/"+s.SessionID+"/intents", "", a.ConfirmIntent, &res); st != 200 || res.Status != agentplane.StatusSuccess {
			t.Fatalf("%d %+v", st, res)
		}
		var snap agentplane.StateSnapshot
		if e.call("GET", "/v1/sessions/"+s.SessionID, "", nil, &snap); snap.PendingConfirmation != nil {
			t.Fatalf("confirmed, and still pending: %+v", snap.PendingConfirmation)
		}
		if len(e.outbox.Sends()) != sent+1 {
			t.Fatal("nothing was sent")
		}
		// the token is used up
		if e.call("POST", "/v1/sessions/"+s.SessionID+"/intents", "", intent, &res); res.Status != agentplane.StatusRejected || res.Error.Code != agentplane.CodeConfirmationInvalid {
			t.Fatalf("a used token: %+v", res)
		}
		if len(e.outbox.Sends()) != sent+1 {
			t.Fatal("sent twice")
		}
	})
}

// With ?inbox=true the session's stream also carries the principal's
// inbox: what was undelivered when it opened, then what comes.
func TestSessionStreamWithInbox(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	post := func(title string) {
		var created httpapi.NotificationCreated
		if st := e.call("POST", "/v1/notifications", "", map[string]any{"address": "USER", "target": "USER", "handler": "SYSTEM", "title": title}, &created); st != 201 {
			t.Fatalf("post: %d", st)
		}
	}
	post("before")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/sessions/"+s.SessionID+"/events?inbox=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	defer resp.Body.Close()
	got := readSSE(t, resp.Body, 2) // the session's open event, the undelivered notification
	if got[0].kind != "open" || got[1].kind != "notification" || got[1].id != 0 || !strings.Contains(got[1].data, `"title":"before"`) {
		t.Fatalf("%+v", got)
	}
	post("after")
	e.turn("", s.SessionID, httpapi.TurnBody{Text: "switch to DDR mode"})
	got = readSSE(t, resp.Body, 2)
	kinds := []string{got[0].kind, got[1].kind}
	slices.Sort(kinds)
	if kinds[0] != "notification" || kinds[1] != "turn" {
		t.Fatalf("%+v", got)
	}
	var eb httpapi.ErrorBody
	st := e.call("GET", "/v1/sessions/"+s.SessionID+"/events?inbox=yes", "", nil, &eb)
	errCode(t, st, eb, 400, agentplane.CodeInvalidInput)
}

// A client's controls: the active commands and the catalog search a
// picker runs as the person types.
func TestCommandsAndCatalogSearch(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	var cl httpapi.CommandList
	if st := e.call("GET", "/v1/sessions/"+s.SessionID+"/commands", "", nil, &cl); st != 200 || cl.Mode != "general" {
		t.Fatalf("%d %+v", st, cl)
	}
	byID := map[string]httpapi.CommandItem{}
	for _, c := range cl.Commands {
		byID[c.ID] = c
	}
	if m := byID["set_mode"]; !m.SetsSessionMode || m.CatalogID != "modes" || m.Parameter != "mode" {
		t.Fatalf("set_mode: %+v", m)
	}
	if c := byID["close_email_template"]; !c.ClearsActiveContext || c.CatalogID != "email_templates" {
		t.Fatalf("close_email_template: %+v", c)
	}
	if _, ok := byID["send_template_to_list"]; ok {
		t.Fatal("send_template_to_list is active only in sales")
	}
	items := "/v1/sessions/" + s.SessionID + "/catalogs/email_templates/items"
	var m tool.CatalogMatches
	if st := e.call("GET", items+"?q=outreach", "", nil, &m); st != 200 || len(m.Items) != 2 || m.Items[0].ID != "TPL-123" || m.Exact {
		t.Fatalf("q=outreach: %d %+v", st, m)
	}
	if e.call("GET", items+"?q=renewel", "", nil, &m); len(m.Items) != 1 || m.Items[0].ID != "TPL-200" || m.Match != "fuzzy" {
		t.Fatalf("a typo: %+v", m)
	}
	if e.call("GET", items+"?limit=2", "", nil, &m); len(m.Items) != 2 || m.Match != "all" {
		t.Fatalf("no query lists the first items: %+v", m)
	}
	var eb httpapi.ErrorBody
	st := e.call("GET", "/v1/sessions/"+s.SessionID+"/catalogs/mailer_lists/items?q=pilot", "", nil, &eb)
	errCode(t, st, eb, 404, agentplane.CodeNotFound)
	st = e.call("GET", items+"?limit=0", "", nil, &eb)
	errCode(t, st, eb, 400, agentplane.CodeInvalidInput)
	st = e.call("GET", items+"?q="+strings.Repeat("x", 300), "", nil, &eb)
	errCode(t, st, eb, 400, agentplane.CodeInvalidInput)
	st = e.call("GET", items+"?q=%ff", "", nil, &eb)
	errCode(t, st, eb, 400, agentplane.CodeInvalidInput)
	st = e.call("GET", "/v1/sessions/nope/commands", "", nil, &eb)
	errCode(t, st, eb, 404, agentplane.CodeNotFound)
	// in sales the mailer lists are searchable
	sales := e.create("", map[string]any{"mode": "sales"})
	if e.call("GET", "/v1/sessions/"+sales.SessionID+"/catalogs/mailer_lists/items?q=q1+pilot", "", nil, &m); len(m.Items) == 0 || m.Items[0].ID != "LIST-9" {
		t.Fatalf("mailer lists in sales: %+v", m)
	}
}

// A picker on a code-backed provider filters through the providers
// endpoint, as one on a catalog does.
func TestProviderSearch(t *testing.T) {
	y := string(demo.YAML)
	y = strings.Replace(y, "    toolboxes: [core, templates]\n", "    toolboxes: [core, templates, crm]\n", 1)
	y = strings.Replace(y, "toolboxes:\n", "toolboxes:\n  - {id: crm, providers: [accounts], commands: [open_account]}\n", 1)
	y = strings.Replace(y, "commands:\n", "commands:\n  - {id: open_account, tool: agent_set_active_entity, parameter: account, resolver: {provider: accounts}, sets_active_context: true, "+
		"active_entity_type: account, triggers: [\"open [the] {item} account\"]}\n", 1)
	accounts := resolve.ProviderFunc(func(context.Context) ([]agentplane.ResolverItem, error) {
		return []agentplane.ResolverItem{{Header: agentplane.EntityHeader{ID: "ACC-1", DisplayName: "Acme Corp"}},
			{Header: agentplane.EntityHeader{ID: "ACC-2", DisplayName: "Acme Labs"}}}, nil
	})
	rt := demotest.Runtime(t, plane.Options{Config: core.Source{YAML: []byte(y), Name: demo.Name}, Core: core.Options{Providers: map[string]resolve.Provider{"accounts": accounts}}})
	srv := httptest.NewServer(httpapi.New(rt, nil).Handler())
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv, core: rt.Core, client: validatingClient(t, srv.Client())}
	s := e.create("", map[string]any{"ui": true})
	a := e.turn("", s.SessionID, httpapi.TurnBody{Text: "open the acme account"})
	if a.Decision.Action != agentplane.ActionOpenPicker || a.Decision.ProviderID != "accounts" {
		t.Fatalf("%+v", a.Decision)
	}
	var m tool.CatalogMatches
	if st := e.call("GET", "/v1/sessions/"+s.SessionID+"/providers/accounts/items?q=labs", "", nil, &m); st != 200 || len(m.Items) != 1 || m.Items[0].ID != "ACC-2" {
		t.Fatalf("q=labs: %d %+v", st, m)
	}
	var eb httpapi.ErrorBody
	st := e.call("GET", "/v1/sessions/"+s.SessionID+"/providers/nope/items", "", nil, &eb)
	errCode(t, st, eb, 404, agentplane.CodeNotFound)
	if !strings.Contains(eb.Error.Message, `provider "nope" is not active`) {
		t.Fatalf("message %q", eb.Error.Message)
	}
}

// A request sent again with its Idempotency-Key gets the recorded answer
// and runs nothing twice.
func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t, nil)
	var first, again httpapi.SessionCreated
	e.call("POST", "/v1/sessions", "", map[string]any{"mode": "sales"}, &first, "Idempotency-Key", "open-1")
	if st := e.call("POST", "/v1/sessions", "", map[string]any{"mode": "sales"}, &again, "Idempotency-Key", "open-1"); st != 201 || again.SessionID != first.SessionID || again.Snapshot.Version != 1 {
		t.Fatalf("%d %+v %+v", st, first, again)
	}
	id := first.SessionID
	e.turn("", id, httpapi.TurnBody{Text: "open the Q1 CFO Outreach template"})
	ask := e.turn("", id, httpapi.TurnBody{Text: "send this to the Q1 pilot list"}, "Idempotency-Key", "t-ask")
	yes := e.turn("", id, httpapi.TurnBody{Text: "yes"}, "Idempotency-Key", "t-yes")
	yes2 := e.turn("", id, httpapi.TurnBody{Text: "yes"}, "Idempotency-Key", "t-yes")
	if yes.Result == nil || yes.Result.Status != agentplane.StatusSuccess || !yes2.Repeated || yes2.Seq != yes.Seq || yes2.Result.Status != yes.Result.Status {
		t.Fatalf("%+v\n%+v", yes, yes2)
	}
	if ask2 := e.turn("", id, httpapi.TurnBody{Text: "send this to the Q1 pilot list"}, "Idempotency-Key", "t-ask"); !ask2.Repeated || ask2.Seq != ask.Seq || ask2.ConfirmationToken != "" {
		t.Fatalf("%+v", ask2)
	}
	if n := len(e.outbox.Sends()); n != 1 {
		t.Fatalf("%d sends", n)
	}
	var eb httpapi.ErrorBody
	st := e.call("POST", "/v1/sessions/"+id+"/turns", "", httpapi.TurnBody{Text: "hello"}, &eb, "Idempotency-Key", "t-yes")
	errCode(t, st, eb, 409, agentplane.CodeRequestConflict)
	st = e.call("POST", "/v1/sessions/"+id+"/turns", "", httpapi.TurnBody{Text: "hello"}, &eb, "Idempotency-Key", "bad key")
	errCode(t, st, eb, 400, agentplane.CodeInvalidInput)
}

// Each principal sees and changes only its own sessions; another's
// answers 404, as if absent.
func TestPrincipalsAreIsolated(t *testing.T) {
	e := newEnv(t, &envOptions{keys: map[string]string{"alice-key-0123456789": "alice", "bob-key-0123456789ab": "bob"}})
	alice, bob := "alice-key-0123456789", "bob-key-0123456789ab"
	s := e.create(alice, nil)
	var eb httpapi.ErrorBody
	for _, c := range []struct{ method, path string }{
		{"GET", ""}, {"POST", "/turns"}, {"POST", "/intents"}, {"GET", "/audit"}, {"GET", "/events"},
		{"GET", "/history"}, {"GET", "/audit/verification"}, {"GET", "/audit/replay"},
	} {
		var body any
		if c.method == "POST" {
			body = map[string]any{"text": "switch to ddr mode", "type": "action_call"}
			if c.path == "/intents" {
				body = map[string]any{"type": "action_call", "action": "set_mode", "args": map[string]string{"mode": "ddr"}}
			}
		}
		st := e.call(c.method, "/v1/sessions/"+s.SessionID+c.path, bob, body, &eb)
		errCode(t, st, eb, 404, agentplane.CodeNotFound)
	}
	var list httpapi.SessionList
	if e.call("GET", "/v1/sessions", bob, nil, &list); len(list.Sessions) != 0 {
		t.Fatalf("bob lists %+v", list)
	}
	if e.call("GET", "/v1/sessions", alice, nil, &list); len(list.Sessions) != 1 || list.Sessions[0].SessionID != s.SessionID {
		t.Fatalf("alice lists %+v", list)
	}
	var snap agentplane.StateSnapshot
	if e.call("GET", "/v1/sessions/"+s.SessionID, alice, nil, &snap); snap.Version != 1 {
		t.Fatalf("bob's attempts changed alice's session: %+v", snap)
	}
	st := e.call("GET", "/v1/sessions", "", nil, &eb)
	errCode(t, st, eb, 401, agentplane.CodeUnauthorized)
	st = e.call("GET", "/v1/sessions", "wrong-key-0123456789", nil, &eb)
	errCode(t, st, eb, 401, agentplane.CodeUnauthorized)
	st = e.call("GET", "/v1/sessions", "", nil, &eb, "Authorization", "Basic YWxpY2U6eA==")
	errCode(t, st, eb, 401, agentplane.CodeUnauthorized)
}

// Bad input gets the envelope with the fitting status, names what was
// wrong, and changes nothing.
func TestBadInput(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	turns := "/v1/sessions/" + s.SessionID + "/turns"
	intents := "/v1/sessions/" + s.SessionID + "/intents"
	for name, c := range map[string]struct {
		method, path string
		body         any
		header       []string
		status       int
		code, want   string
	}{
		"TooBig":       {"POST", turns, `{"text":"` + strings.Repeat("a", 1<<20) + `"}`, nil, 413, agentplane.CodeInputTooLong, "over 1048576 bytes"},
		"NotJSON":      {"POST", turns, `text=hello`, nil, 400, agentplane.CodeInvalidInput, "not strict JSON: JSON at byte 0"},
		"WrongType":    {"POST", turns, `{"text": 5}`, nil, 400, agentplane.CodeInvalidInput, `field "text": expected a string`},
		"UnknownField": {"POST", turns, `{"txt": "hi"}`, nil, 400, agentplane.CodeInvalidInput, `unknown field "txt"`},
		"Truncated":    {"POST", turns, `{"text": "hi"`, nil, 400, agentplane.CodeInvalidInput, "unexpected end of input"},
		"Two":          {"POST", turns, `{"text": "hi"} {}`, nil, 400, agentplane.CodeInvalidInput, "data after the JSON value"},
		// what the audit log's reader refuses is refused at the edge (the
		// second text ran; a case variant stored made a chain unreadable)
		"Duplicate":     {"POST", turns, `{"text":"hello","text":"switch to ddr mode"}`, nil, 400, agentplane.CodeInvalidInput, `duplicate member name "text"`},
		"CaseVariant":   {"POST", turns, `{"text":"hello","Text":"switch to ddr mode"}`, nil, 400, agentplane.CodeInvalidInput, `member names "Text" and "text" differ only in letter case`},
		"HugeNumber":    {"POST", intents, `{"type":"action_call","action":"set_mode","args":{"mode":1e999}}`, nil, 400, agentplane.CodeInvalidInput, "(args.mode): number 1e999 is out of range"},
		"Deep":          {"POST", intents, `{"type":"action_call","action":"set_mode","args":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`, nil, 400, agentplane.CodeInvalidInput, "nested deeper than 128"},
		"LoneSurrogate": {"POST", turns, `{"text":"\ud800"}`, nil, 400, agentplane.CodeInvalidInput, "(text): lone surrogate"},
		"ControlID":     {"POST", intents, "{\"type\":\"action_call\",\"action\":\"set_mode\",\"request_id\":\"a\\u0001b\"}", nil, 400, agentplane.CodeInvalidInput, `field "request_id" holds a byte 0x01`},
		"ControlKey":    {"POST", turns, `{"text":"hi"}`, []string{"Idempotency-Key", "a b"}, 400, agentplane.CodeInvalidInput, "Idempotency-Key holds a byte 0x20"},
		"Array":         {"POST", turns, `[]`, nil, 400, agentplane.CodeInvalidInput, "a JSON array"},
		"Empty":         {"POST", turns, `{}`, nil, 400, agentplane.CodeInvalidInput, "needs text or a selection"},
		"LongText":      {"POST", turns, map[string]string{"text": strings.Repeat("word ", 1000)}, nil, 413, agentplane.CodeInputTooLong, ""},
		"BadUTF8":       {"POST", turns, "{\"text\": \"caf\xe9\"}", nil, 400, agentplane.CodeInvalidInput, ""},
		"UnknownMode":   {"POST", "/v1/sessions", map[string]string{"mode": "nope"}, nil, 400, agentplane.CodeInvalidInput, `unknown mode "nope"`},
		"UnknownSess":   {"POST", "/v1/sessions/nope/turns", map[string]string{"text": "hi"}, nil, 404, agentplane.CodeNotFound, `no session "nope"`},
		"LongID":        {"GET", "/v1/sessions/" + strings.Repeat("x", 5000), nil, nil, 404, agentplane.CodeNotFound, ""},
		"NoEndpoint":    {"GET", "/v1/nope", nil, nil, 404, agentplane.CodeNotFound, "no endpoint GET /v1/nope"},
		// a route's own refusal in plain text keeps its words (the MCP server's: the endpoint exists)
		"MCPSession": {"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, []string{"Mcp-Session-Id", "nope", "Accept", "application/json, text/event-stream"},
			404, agentplane.CodeNotFound, "session not found"},
		"Method":        {"DELETE", "/v1/sessions", nil, nil, 405, agentplane.CodeInvalidInput, "not allowed"},
		"ContentType":   {"POST", turns, `{"text":"hi"}`, []string{"Content-Type", "text/plain"}, 415, agentplane.CodeInvalidInput, "must send application/json"},
		"NoContentType": {"POST", "/v1/sessions", "", []string{"Content-Type", ""}, 415, agentplane.CodeInvalidInput, "must send application/json"},
		"BadAfter":      {"GET", "/v1/sessions/" + s.SessionID + "/audit?after=-1", nil, nil, 400, agentplane.CodeInvalidInput, "non-negative integer"},
		"BothCursors":   {"GET", "/v1/sessions/" + s.SessionID + "/history?before=5&after=2", nil, nil, 400, agentplane.CodeInvalidInput, "give one cursor, not both"},
		"BadBefore":     {"GET", "/v1/sessions/" + s.SessionID + "/history?before=x", nil, nil, 400, agentplane.CodeInvalidInput, `before="x"`},
		"BadPageLimit":  {"GET", "/v1/sessions/" + s.SessionID + "/audit?limit=1001", nil, nil, 400, agentplane.CodeInvalidInput, "from 1 to 1000"},
		"BadLastEvent":  {"GET", "/v1/sessions/" + s.SessionID + "/events", nil, []string{"Last-Event-ID", "x"}, 400, agentplane.CodeInvalidInput, "Last-Event-ID"},
		"BadCursor":     {"GET", "/v1/sessions?cursor=zz", nil, nil, 400, agentplane.CodeInvalidInput, "cursor"},
		"BadLimit":      {"GET", "/v1/sessions?limit=0", nil, nil, 400, agentplane.CodeInvalidInput, "limit"},
		"BadToolsMode":  {"GET", "/v1/tools?mode=nope", nil, nil, 400, agentplane.CodeInvalidInput, "unknown mode"},
		"ClaimedOrigin": {"POST", "/v1/sessions/" + s.SessionID + "/intents", map[string]string{"type": "action_call", "action": "set_mode", "origin": "workflow"}, nil, 400, agentplane.CodeInvalidInput, "cannot be claimed"},
	} {
		t.Run(name, func(t *testing.T) {
			var eb httpapi.ErrorBody
			st := e.call(c.method, c.path, "", c.body, &eb, c.header...)
			errCode(t, st, eb, c.status, c.code)
			if !strings.Contains(eb.Error.Message, c.want) {
				t.Fatalf("message %q does not say %q", eb.Error.Message, c.want)
			}
		})
	}
	var snap agentplane.StateSnapshot
	if e.call("GET", "/v1/sessions/"+s.SessionID, "", nil, &snap); snap.Version != 1 {
		t.Fatalf("bad input changed the session: %+v", snap)
	}
	recs, _ := e.core.Records(context.Background(), s.SessionID, 0)
	if len(recs) != 1 {
		t.Fatalf("bad input was recorded: %d records", len(recs))
	}
	// absurd headers are refused by the server before any handler
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/sessions", nil)
	req.Header.Set("X-Big", strings.Repeat("x", 100<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 100 KiB header: %v %v", resp, err)
	}
	resp.Body.Close()
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	id         int64
	kind, data string
}

// readSSE reads events from a stream until n are read or the stream ends.
func readSSE(t *testing.T, body io.Reader, n int) []sseEvent {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var out []sseEvent
	var cur sseEvent
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.kind != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			cur.kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
			if cur.id > 0 {
				checkEvent(t, cur.data)
			}
		}
	}
	return out
}

func (e *env) stream(t *testing.T, id string, lastID int64) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/sessions/"+id+"/events", nil)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := e.client.Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %v %v", resp, err)
	}
	return resp, cancel
}

// The SSE stream carries every committed event with id = seq, and a cut
// connection resumed from Last-Event-ID continues with no gap and no
// duplicate.
func TestEventStreamResumes(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", map[string]any{"mode": "sales"})
	resp, cancel := e.stream(t, s.SessionID, 0)
	texts := []string{"open the Q1 CFO Outreach template", "hello", "send this to the Q1 pilot list", "yes", "switch to ddr mode"}
	go func() {
		for _, text := range texts[:3] {
			e.turn("", s.SessionID, httpapi.TurnBody{Text: text})
		}
	}()
	got := readSSE(t, resp.Body, 4) // open + 3 turns
	cancel()
	resp.Body.Close()
	for i, ev := range got {
		if ev.id != int64(i+1) {
			t.Fatalf("event %d has id %d", i, ev.id)
		}
		var e events.Event
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Seq != ev.id || e.Kind != ev.kind || e.Snapshot == nil {
			t.Fatalf("%+v: %+v %v", ev, e, err)
		}
	}
	if got[3].kind != "turn" || !strings.Contains(got[3].data, `"action":"ask_clarifying_question"`) {
		t.Fatalf("%+v", got[3])
	}
	// while disconnected
	for _, text := range texts[3:] {
		e.turn("", s.SessionID, httpapi.TurnBody{Text: text})
	}
	resp, cancel = e.stream(t, s.SessionID, got[len(got)-1].id)
	defer cancel()
	rest := readSSE(t, resp.Body, 2)
	if len(rest) != 2 || rest[0].id != 5 || rest[1].id != 6 {
		t.Fatalf("resumed with %+v", rest)
	}
	// and live again
	go e.turn("", s.SessionID, httpapi.TurnBody{Text: "switch to general mode"})
	if live := readSSE(t, resp.Body, 1); len(live) != 1 || live[0].id != 7 {
		t.Fatalf("live: %+v", live)
	}
}

// Draining ends every stream with a final event saying where to resume.
func TestDrainClosesStreams(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	resp, cancel := e.stream(t, s.SessionID, 0)
	defer cancel()
	if got := readSSE(t, resp.Body, 1); len(got) != 1 {
		t.Fatal("no backlog")
	}
	for e.api.Hub().Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	e.api.Drain("shutting down")
	got := readSSE(t, resp.Body, 1)
	var c httpapi.Closing
	if len(got) != 1 || got[0].kind != "closed" || json.Unmarshal([]byte(got[0].data), &c) != nil || c.Reason != "shutting down" || c.LastEventID != 1 {
		t.Fatalf("%+v", got)
	}
	var ready map[string]any
	if st := e.call("GET", "/readyz", "", nil, &ready); st != 503 || ready["status"] != "draining" {
		t.Fatalf("%d %v", st, ready)
	}
}

// Concurrent turns on one session: every answer is a committed change or
// a version_conflict, versions never repeat, and the chain verifies.
func TestConcurrentTurnsKeepVersionsConsistent(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	const turns, clients = 1000, 32
	var mu sync.Mutex
	versions := map[int64]bool{}
	conflicts := 0
	work := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range work {
				mode := []string{"ddr", "sales", "general"}[i%3]
				var raw json.RawMessage
				st := e.call("POST", "/v1/sessions/"+s.SessionID+"/turns", "", httpapi.TurnBody{Text: "switch to " + mode + " mode"}, &raw)
				mu.Lock()
				switch st {
				case 200:
					var a httpapi.TurnAnswer
					json.Unmarshal(raw, &a)
					if a.Result != nil && a.Result.Status == agentplane.StatusRejected && a.Result.Error.Code == agentplane.CodeVersionConflict {
						conflicts++
						break
					}
					if versions[a.Snapshot.Version] && len(a.Result.StateDiff) > 0 {
						t.Errorf("version %d answered twice", a.Snapshot.Version)
					}
					if len(a.Result.StateDiff) > 0 {
						versions[a.Snapshot.Version] = true
					}
				case 409:
					conflicts++
				default:
					t.Errorf("status %d: %s", st, raw)
				}
				mu.Unlock()
			}
		})
	}
	for i := range turns {
		work <- i
	}
	close(work)
	wg.Wait()
	var snap agentplane.StateSnapshot
	e.call("GET", "/v1/sessions/"+s.SessionID, "", nil, &snap)
	if int64(len(versions))+1 != snap.Version {
		t.Fatalf("%d changes answered, version %d", len(versions), snap.Version)
	}
	recs, _ := e.core.Records(context.Background(), s.SessionID, 0)
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d changes, %d conflicts, %d records", len(versions), conflicts, len(recs))
}

// The WebSocket carries the same events, the client's turns and acks.
func TestWebSocket(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, strings.Replace(e.srv.URL, "http", "ws", 1)+"/v1/sessions/"+s.SessionID+"/ws", nil)
	if err != nil {
		t.Fatalf("%v %v", resp, err)
	}
	defer conn.CloseNow()
	type msg struct {
		Type      string              `json:"type"`
		ID        int64               `json:"id"`
		RequestID string              `json:"request_id"`
		Event     events.Event        `json:"event"`
		Answer    *httpapi.TurnAnswer `json:"answer"`
		Error     *httpapi.ErrorDetail
	}
	read := func() msg {
		t.Helper()
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m msg
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	send := func(v any) {
		t.Helper()
		data, _ := json.Marshal(v)
		if err := conn.Write(ctx, websocket.MessageText, data); err != nil {
			t.Fatal(err)
		}
	}
	if m := read(); m.Type != "event" || m.ID != 1 || m.Event.Kind != "open" {
		t.Fatalf("%+v", m)
	}
	send(map[string]any{"type": "turn", "request_id": "r1", "text": "switch to ddr mode"})
	var answer, event *msg
	for answer == nil || event == nil {
		m := read()
		switch m.Type {
		case "turn":
			answer = &m
		case "event":
			event = &m
		default:
			t.Fatalf("%+v", m)
		}
	}
	if answer.RequestID != "r1" || answer.Answer.Snapshot.Mode != "ddr" || event.ID != 2 || event.Event.Decision.CommandID != "set_mode" || answer.Answer.Seq != event.ID {
		t.Fatalf("%+v %+v", answer, event)
	}
	send(map[string]any{"type": "ack", "id": 2})
	if m := read(); m.Type != "acked" || m.ID != 2 {
		t.Fatalf("%+v", m)
	}
	send(map[string]any{"type": "dance"})
	if m := read(); m.Type != "error" || m.Error.Code != agentplane.CodeInvalidInput {
		t.Fatalf("%+v", m)
	}
	send(map[string]any{"type": "turn", "request_id": "r2"})
	if m := read(); m.Type != "error" || m.RequestID != "r2" || m.Error.Code != agentplane.CodeInvalidInput {
		t.Fatalf("%+v", m)
	}
	// a second connection resumes after the last id
	conn2, _, err := websocket.Dial(ctx, strings.Replace(e.srv.URL, "http", "ws", 1)+"/v1/sessions/"+s.SessionID+"/ws?after=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.CloseNow()
	_, data, err := conn2.Read(ctx)
	if err != nil || !strings.Contains(string(data), `"id":2`) {
		t.Fatalf("%s %v", data, err)
	}
}

// /mcp takes the same API keys; an MCP session is its principal's.
func TestMCPBehindTheKeys(t *testing.T) {
	key := "alice-key-0123456789"
	e := newEnv(t, &envOptions{keys: map[string]string{key: "alice"}})
	var eb httpapi.ErrorBody
	st := e.call("POST", "/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{}}, &eb,
		"Accept", "application/json, text/event-stream")
	errCode(t, st, eb, 401, agentplane.CodeUnauthorized)
	hc := &http.Client{Transport: bearer{key: key, next: http.DefaultTransport}}
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent_set_mode", Arguments: json.RawMessage(`{"mode":"ddr"}`)}); err != nil {
		t.Fatal(err)
	}
	var list httpapi.SessionList
	if e.call("GET", "/v1/sessions", key, nil, &list); len(list.Sessions) != 1 || list.Sessions[0].Snapshot.Mode != "ddr" {
		t.Fatalf("alice's MCP session is not hers: %+v", list)
	}
}

type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// FuzzRequests sends arbitrary bodies, headers and paths to the API: no
// input panics, every answer is JSON with a status from the documented
// set, and the session changes only through a 200 turn.
func FuzzRequests(f *testing.F) {
	for _, seed := range []string{`{"text":"switch to ddr mode"}`, `{"selection":{"command_id":"set_mode","id":"sales"}}`, `{"text":1}`, `[`, "\xff", `{"type":"action_call","action":"set_mode","args":{"mode":"ddr"}}`} {
		f.Add(seed, "turns", "k")
		f.Add(seed, "intents", "")
	}
	for _, seed := range []string{`{"type":"continue"}`, `{"type":"abort"}`, `{"type":"replan_dag","new_requirement":"search the modes","available_context":{"catalog_id":"modes","query":"sales"}}`,
		`{"type":"approval_response","checkpoint_id":"x","approved":true}`, `{"type":"checkpoint_response","checkpoint_id":"c","decision":"modify","modifications":{"skip":["b"]}}`, `{"type":7}`} {
		f.Add(seed, "commands", "")
	}
	for _, seed := range []string{"outreach", "", "q1 cfo", "\xff", strings.Repeat("é", 200)} {
		f.Add(seed, "items", "email_templates") // body is the picker's query, key the catalog
	}
	e := newEnv(f, nil)
	e.client = e.srv.Client() // the fuzzer checks answers itself
	s := e.create("", nil)
	// "commands" goes to a workflow of the session's, paused for a decision
	wf, err := e.wf.Start(context.Background(), workflow.Start{SessionID: s.SessionID, Principal: agentplane.LocalPrincipal,
		Definition: &workflow.Definition{PerLayerValidation: true, Tasks: []workflow.Task{{ID: "a", Tool: "agent_get_context"}, {ID: "b", Tool: "agent_get_context", DependsOn: []string{"a"}}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, endpoint, key string) {
		e.t = t
		for _, c := range endpoint {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return // net/http answers a malformed request line itself, before any handler
			}
		}
		method, path := "POST", "/v1/sessions/"+s.SessionID+"/"+endpoint
		switch endpoint {
		case "commands":
			path = "/v1/workflows/" + wf.ID + "/commands"
		case "items":
			method, path = "GET", "/v1/sessions/"+s.SessionID+"/catalogs/"+url.PathEscape(key)+"/items?q="+url.QueryEscape(body)
			key = ""
		}
		req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
		if err != nil {
			return // not a URL
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := e.client.Do(req)
		if err != nil {
			return // a header the client refuses to send
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200, 400, 404, 405, 409, 413, 415:
		default:
			t.Fatalf("%s %q: status %d: %s", path, body, resp.StatusCode, raw)
		}
		if !json.Valid(raw) {
			t.Fatalf("%s %q: not JSON: %s", path, body, raw)
		}
	})
}

// The metrics count turns by decision, gate results and requests by route.
func TestMetrics(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	e.turn("", s.SessionID, httpapi.TurnBody{Text: "switch to ddr mode"})
	e.turn("", s.SessionID, httpapi.TurnBody{Text: "hello there"})
	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`agentplane_turns_total{decision="invoke_command"} 1`,
		`agentplane_turns_total{decision="continue_with_llm"} 1`,
		`agentplane_gate_results_total{code="",status="success"} 1`,
		`agentplane_http_request_seconds_count{route="POST /v1/sessions/{id}/turns",status="200"} 2`,
		`agentplane_store_commit_seconds_count 3`,
		`agentplane_route_seconds_count 2`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("no %s", want)
		}
	}
}

// A stream whose client stops reading is closed with a reason once its
// queue is full, and the client resumes from its last id with nothing
// lost: the server's memory for it stays bounded.
func TestSlowStreamIsClosedAndResumes(t *testing.T) {
	e := newEnv(t, &envOptions{queue: 8, smallBuffers: true})
	s := e.create("", nil)
	// a client whose socket takes 4 KiB and then nothing while it does not read
	slow := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(4096)
		}
		return c, err
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/sessions/"+s.SessionID+"/events", nil)
	resp, err := slow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for e.api.Hub().Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	// events until the socket buffers and the queue are full while nobody
	// reads, and the hub drops the subscription; then the client reads at
	// once — the closing frame waits behind what the socket holds, and a
	// write blocked for writeTimeout (10 s) would cut the stream instead
	long := strings.Repeat("hello there ", 300)
	const most = 200
	turns := int64(0)
	for ; turns < most && e.api.Hub().Subscribers() > 0; turns++ {
		e.turn("", s.SessionID, httpapi.TurnBody{Text: long[:len(long)-int(turns)%7]})
	}
	if e.api.Hub().Subscribers() > 0 {
		t.Fatalf("the stream is still subscribed after %d turns its client did not read", turns)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var last int64
	closed := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id, _ := strconv.ParseInt(v, 10, 64)
			if id != last+1 {
				t.Fatalf("id %d after %d", id, last)
			}
			last = id
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(v, `"last_event_id"`) {
			closed = v
			break
		}
	}
	var c httpapi.Closing
	if json.Unmarshal([]byte(closed), &c) != nil || !strings.Contains(c.Reason, "too slow") || c.LastEventID != last || last >= turns+1 {
		t.Fatalf("closing %q after %d of %d events", closed, last, turns+1)
	}
	resp.Body.Close()
	resp, cancel2 := e.stream(t, s.SessionID, last)
	defer cancel2()
	rest := readSSE(t, resp.Body, int(turns+1-last))
	if len(rest) != int(turns+1-last) || rest[0].id != last+1 || rest[len(rest)-1].id != turns+1 {
		t.Fatalf("resumed with %d events", len(rest))
	}
	t.Logf("closed after %d of %d events; resumed with the other %d", last, turns+1, len(rest))
}

// A turn the router hands to the LLM is answered by it: its text streams
// to the session's event stream as it comes, its proposal of an external
// action is asked of the human, and the confirm button (the intent with
// the token) runs it once.
func TestLLMTurnThroughTheAPI(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Reply{Text: "Sending the template to the pilot list.", ToolCalls: []llmtest.Call{{Name: "send_template", Arguments: `{"list_id":"LIST-9"}`}}})
	e := newEnv(t, &envOptions{llm: srv})
	s := e.create("", map[string]any{"mode": "sales"})
	e.turn("", s.SessionID, httpapi.TurnBody{Text: "open the Q1 CFO Outreach template"})
	resp, cancel := e.stream(t, s.SessionID, 2)
	defer cancel()
	for e.api.Hub().Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	a := e.turn("", s.SessionID, httpapi.TurnBody{Text: "please mail this to the pilot group"})
	if a.LLM == nil || a.LLM.Text != "Sending the template to the pilot list." || a.LLM.Question == "" || a.LLM.ConfirmationToken == "" ||
		a.LLM.Snapshot.PendingConfirmation == nil || len(e.outbox.Sends()) != 0 {
		t.Fatalf("%+v", a.LLM)
	}
	// the stream: the turn, the text as it streamed, the exchange, the call, the proposal
	var kinds []string
	var text strings.Builder
	for _, ev := range readSSE(t, resp.Body, 9) {
		if ev.kind == "llm_delta" {
			var d struct{ Text string }
			json.Unmarshal([]byte(ev.data), &d)
			text.WriteString(d.Text)
			continue
		}
		kinds = append(kinds, ev.kind)
		if ev.kind == "proposal" {
			break
		}
	}
	if text.String() != a.LLM.Text || strings.Join(kinds, " ") != "turn llm execution proposal" {
		t.Fatalf("streamed %q, events %v", text.String(), kinds)
	}
	// the confirm button
	var res agentplane.ExecutionResult
	intent := agentplane.Intent{Type: agentplane.IntentActionCall, Action: "send_template", Args: json.RawMessage(`{"list_id":"LIST-9"}`), ConfirmationToken: a.LLM.ConfirmationToken}
	if st := e.call("POST", "/v1/sessions/"+s.SessionID+"/intents", "", intent, &res); st != 200 || res.Status != agentplane.StatusSuccess || len(e.outbox.Sends()) != 1 {
		t.Fatalf("%d %+v", st, res)
	}
	var snap agentplane.StateSnapshot
	if e.call("GET", "/v1/sessions/"+s.SessionID, "", nil, &snap); snap.PendingConfirmation != nil {
		t.Fatal("the pending confirmation outlived the confirmed call")
	}
}

// Notifications through the API: routed to one channel; the inbox (A)
// live and acked; the floor (B) a notice in the session's stream, acked
// over the WebSocket; the agent's (C) in the LLM's prompt; bad input
// refused naming the field, nothing stored.
func TestNotifications(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Text: "Build 42 failed on main; want me to look?"})
	alice, producer := "alice-key-0123456789", "ci-key-0123456789abc"
	e := newEnv(t, &envOptions{llm: srv, keys: map[string]string{alice: "alice", producer: "ci"}, roles: map[string][]string{"ci": {httpapi.ProducerRole}}})
	s := e.create(alice, nil)
	inboxResp, cancel := func() (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/inbox/events", nil)
		req.Header.Set("Authorization", "Bearer "+alice)
		resp, err := e.client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		return resp, cancel
	}()
	defer cancel()
	for e.api.Hub().Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	emit := func(key string, body map[string]any, want int) httpapi.NotificationCreated {
		t.Helper()
		var out httpapi.NotificationCreated
		if st := e.call("POST", "/v1/notifications", key, body, &out); st != want {
			t.Fatalf("emit %v: %d", body, st)
		}
		return out
	}
	// A: the inbox, live; DISPATCHED once sent on the stream
	a := emit(producer, map[string]any{"address": "USER", "user_id": "alice", "target": "USER", "handler": "SYSTEM", "title": "Invoice ready"}, 201)
	if a.Channel != notify.ChannelInbox || a.State != notify.StateDispatched {
		t.Fatalf("%+v", a)
	}
	sc := bufio.NewScanner(inboxResp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			if !strings.Contains(sc.Text(), a.ID) {
				t.Fatalf("the inbox stream showed %s", sc.Text())
			}
			break
		}
	}
	var inbox httpapi.Inbox
	if e.call("GET", "/v1/inbox", alice, nil, &inbox); inbox.Unread != 1 || inbox.Notifications[0].ID != a.ID {
		t.Fatalf("%+v", inbox)
	}
	var acked notify.Notification
	if st := e.call("POST", "/v1/notifications/"+a.ID+"/ack", alice, nil, &acked); st != 200 || acked.State != notify.StateDelivered {
		t.Fatalf("%d %+v", st, acked)
	}
	if e.call("GET", "/v1/inbox", alice, nil, &inbox); inbox.Unread != 0 {
		t.Fatalf("%+v", inbox)
	}
	var eb httpapi.ErrorBody
	st := e.call("POST", "/v1/notifications/"+a.ID+"/ack", alice, nil, &eb)
	errCode(t, st, eb, 409, agentplane.CodeInvalidState)
	// a client that holds no stream: GET /v1/inbox only reads (it leaves
	// them PENDING), and its ack delivers; so does an ack of one never listed
	cancel()
	for e.api.Hub().Following(notify.UserTopic("alice")) {
		time.Sleep(time.Millisecond)
	}
	polled := emit(producer, map[string]any{"address": "USER", "user_id": "alice", "target": "USER", "handler": "SYSTEM", "title": "Polled"}, 201)
	unseen := emit(producer, map[string]any{"address": "USER", "user_id": "alice", "target": "USER", "handler": "SYSTEM", "title": "Unseen"}, 201)
	if polled.State != notify.StatePending || unseen.State != notify.StatePending {
		t.Fatalf("with no stream open: %+v %+v", polled, unseen)
	}
	if e.call("GET", "/v1/inbox?limit=2", producer, nil, &inbox); len(inbox.Notifications) != 0 {
		t.Fatalf("the producer sees alice's inbox: %+v", inbox)
	}
	for range 2 { // read twice: the same page, nothing moved
		if e.call("GET", "/v1/inbox?limit=1", alice, nil, &inbox); len(inbox.Notifications) != 1 || inbox.Notifications[0].ID != unseen.ID ||
			inbox.Notifications[0].State != notify.StatePending || inbox.Unread != 2 {
			t.Fatalf("the polled page: %+v", inbox)
		}
	}
	for _, id := range []string{unseen.ID, polled.ID} {
		if st := e.call("POST", "/v1/notifications/"+id+"/ack", alice, nil, &acked); st != 200 || acked.State != notify.StateDelivered {
			t.Fatalf("ack %s: %d %+v", id, st, acked)
		}
	}
	if e.call("GET", "/v1/inbox", alice, nil, &inbox); inbox.Unread != 0 {
		t.Fatalf("%+v", inbox)
	}
	// B: a notice in the session's chain, acked as an event over the WebSocket
	b := emit(alice, map[string]any{"address": "SESSION", "session_id": s.SessionID, "target": "USER", "handler": "SYSTEM", "title": "Deploy finished"}, 201)
	if b.Channel != notify.ChannelFloor || b.State != notify.StateDispatched {
		t.Fatalf("%+v", b)
	}
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	conn, _, err := websocket.Dial(ctx, strings.Replace(e.srv.URL, "http", "ws", 1)+"/v1/sessions/"+s.SessionID+"/ws?after=1",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + alice}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	_, data, err := conn.Read(ctx)
	var ev struct {
		ID    int64
		Event events.Event
	}
	if json.Unmarshal(data, &ev); err != nil || ev.Event.Kind != "notice" || ev.Event.Notice.ID != b.ID {
		t.Fatalf("%s %v", data, err)
	}
	conn.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf(`{"type":"ack","id":%d}`, ev.ID)))
	if _, data, _ = conn.Read(ctx); !strings.Contains(string(data), `"acked"`) {
		t.Fatalf("%s", data)
	}
	var got notify.Notification
	if e.call("GET", "/v1/notifications/"+b.ID, alice, nil, &got); got.State != notify.StateDelivered {
		t.Fatalf("%+v", got)
	}
	// the inbox rides along on the WebSocket, and is acked there
	a2 := emit(producer, map[string]any{"address": "USER", "user_id": "alice", "target": "USER", "handler": "SYSTEM", "title": "Second invoice"}, 201)
	if _, data, err = conn.Read(ctx); err != nil || !strings.Contains(string(data), `"type":"notification"`) || !strings.Contains(string(data), a2.ID) {
		t.Fatalf("%s %v", data, err)
	}
	conn.Write(ctx, websocket.MessageText, []byte(`{"type":"ack","notification_id":"`+a2.ID+`"}`))
	if _, data, _ = conn.Read(ctx); !strings.Contains(string(data), `"acked"`) || !strings.Contains(string(data), a2.ID) {
		t.Fatalf("%s", data)
	}
	if e.call("GET", "/v1/notifications/"+a2.ID, alice, nil, &got); got.State != notify.StateDelivered {
		t.Fatalf("%+v", got)
	}
	// C: the agent's, in the LLM's next prompt, with the floor's notice as
	// seen (target AGENT, handled by the system: no internal turn now)
	c := emit(alice, map[string]any{"address": "SESSION", "session_id": s.SessionID, "target": "AGENT", "handler": "SYSTEM", "title": "Build 42 failed",
		"agent_instructions": map[string]string{"directive": "tell the user only if they work on it"}}, 201)
	if c.Channel != notify.ChannelAgent || c.State != notify.StatePending {
		t.Fatalf("%+v", c)
	}
	e.turn(alice, s.SessionID, httpapi.TurnBody{Text: "hello there"})
	system := srv.Requests()[0]["messages"].([]any)[0].(map[string]any)["content"].(string)
	for _, want := range []string{"[NOTIFICATION " + c.ID + "] Build 42 failed (instructions: tell the user only if they work on it)", "[SEEN] Deploy finished"} {
		if !strings.Contains(system, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, system)
		}
	}
	// zero redundancy: what the system showed reaches the agent only as
	// seen, never to act on; what the agent handles the system never shows
	if strings.Contains(system, "[NOTIFICATION "+b.ID) || strings.Contains(system, "[NOTIFICATION "+a.ID) {
		t.Fatalf("a notification the system showed is also the agent's to narrate:\n%s", system)
	}
	recs, _ := e.core.Records(context.Background(), s.SessionID, 0)
	for _, r := range recs {
		if r.Notice != nil && r.Notice.ID == c.ID {
			t.Fatal("the agent's notification was also shown on the floor")
		}
	}
	if e.call("GET", "/v1/inbox", alice, nil, &inbox); slices.ContainsFunc(inbox.Notifications, func(n notify.Notification) bool { return n.ID == c.ID }) {
		t.Fatal("the agent's notification is also in the inbox")
	}
	if e.call("GET", "/v1/notifications/"+c.ID, alice, nil, &got); got.State != notify.StateLocked || got.OwnerLease != 1 {
		t.Fatalf("the agent runtime does not hold it: %+v", got)
	}
	// the model acknowledges it in its reply: delivered; the mark is not shown
	srv.Add(llmtest.Reply{Text: "[ack:" + c.ID + "] About that build: it failed on main."})
	ans := e.turn(alice, s.SessionID, httpapi.TurnBody{Text: "anything new?"})
	if ans.LLM == nil || ans.LLM.Text != "About that build: it failed on main." {
		t.Fatalf("%+v", ans.LLM)
	}
	if e.call("GET", "/v1/notifications/"+c.ID, alice, nil, &got); got.State != notify.StateDelivered {
		t.Fatalf("the agent's ack did not deliver it: %+v", got)
	}
	// bad input, and other users' notifications
	for _, bad := range []struct {
		key    string
		body   map[string]any
		status int
		want   string
	}{
		{alice, map[string]any{"address": "GROUP", "target": "USER", "handler": "SYSTEM", "title": "x"}, 400, `address "GROUP"`},
		{alice, map[string]any{"address": "SESSION", "target": "USER", "handler": "SYSTEM", "title": "x"}, 400, "session_id: missing"},
		{alice, map[string]any{"address": "SESSION", "session_id": "nope", "target": "USER", "handler": "SYSTEM", "title": "x"}, 400, `session_id: no session "nope"`},
		{alice, map[string]any{"address": "USER", "target": "USER", "handler": "SYSTEM", "title": "x", "payload": strings.Repeat("x", 70<<10)}, 400, "payload"},
		{alice, map[string]any{"address": "USER", "target": "USER", "handler": "SYSTEM", "title": "x", "ttl_seconds": -5}, 400, "ttl_seconds: -5"},
		{alice, map[string]any{"address": "USER", "target": "USER", "handler": "SYSTEM", "title": "x", "deduplication_key": strings.Repeat("k", 300)}, 400, "deduplication_key: 300 bytes"},
		{alice, map[string]any{"address": "USER", "user_id": "bob", "target": "USER", "handler": "SYSTEM", "title": "x"}, 403, "producer role"},
	} {
		st := e.call("POST", "/v1/notifications", bad.key, bad.body, &eb)
		if st != bad.status || !strings.Contains(eb.Error.Message, bad.want) {
			t.Errorf("%v: %d %+v, want %d %q", bad.body, st, eb, bad.status, bad.want)
		}
	}
	st = e.call("GET", "/v1/notifications/"+a.ID, producer, nil, &eb)
	errCode(t, st, eb, 404, agentplane.CodeNotFound)
	if e.call("GET", "/v1/inbox", alice, nil, &inbox); len(inbox.Notifications) != 4 { // the four emitted above
		t.Fatalf("refused emits were stored: %+v", inbox)
	}
}

// smallBufferListener gives each accepted connection a 4 KiB send buffer.
type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}
