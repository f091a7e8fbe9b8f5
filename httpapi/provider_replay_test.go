package httpapi_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/resolve"
)

// ticketsYAML: a catalog an HTTP provider serves (URL replaced), whose
// answers are fresh for a second — on the test clock, which moves a
// second at each reading, so every read asks the provider. In mode plain
// a ticket is opened without confirmation; in mode careful, with.
const ticketsYAML = `version: 1
modes:
  - {key: plain, default: true, toolboxes: [plain]}
  - {key: careful, toolboxes: [careful]}
toolboxes:
  - {id: plain, catalogs: [tickets], commands: [open_ticket], tools: [agent_set_active_entity]}
  - {id: careful, catalogs: [tickets], commands: [watch_ticket], tools: [agent_set_active_entity]}
catalogs:
  - {id: tickets, entity_type: ticket, ttl_seconds: 1, provider: {http: {url: "URL"}}}
commands:
  - {id: open_ticket, tool: agent_set_active_entity, parameter: ticket, resolver: {catalog: tickets}, sets_active_context: true,
     active_entity_type: ticket, triggers: ["open [the] {item} ticket"]}
  - {id: watch_ticket, tool: agent_set_active_entity, parameter: ticket, resolver: {catalog: tickets}, sets_active_context: true,
     active_entity_type: ticket, requires_confirmation: true, triggers: ["watch [the] {item} ticket"]}
`

// tickets is the HTTP provider: it answers what the test set last and
// counts its calls.
type tickets struct {
	mu    sync.Mutex
	items []resolve.WireItem
	calls atomic.Int64
}

func (p *tickets) set(items ...resolve.WireItem) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.items = items
}

func (p *tickets) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.calls.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(p.items)
}

// TestEveryActingPathReplaysItsProviderReads walks every acting path — a
// turn, an API intent naming a command or a tool, an MCP tools/call, an
// LLM's call (in a turn over HTTP and over the session's WebSocket), an
// LLM's proposal confirmed by a yes or by the token, the agent's internal
// turn on a notification, a workflow task — each on a session of its own,
// acting on an item of a catalog an HTTP provider serves. Then the provider answers otherwise.
// Every record whose checks read the provider names the answer it read
// (a turn's decision, any other record's sources), and the session
// replays (GET …/audit/replay) with 0 divergences, 0 reads answered live
// and 0 provider calls. Without the kept answers, replay reports each
// read as answered live (in process, and in the API's answer once the
// store lost them).
func TestEveryActingPathReplaysItsProviderReads(t *testing.T) {
	p := &tickets{}
	first := []resolve.WireItem{{ID: "T-1", DisplayName: "Alpha"}, {ID: "T-2", DisplayName: "Beta"}}
	later := []resolve.WireItem{{ID: "T-9", DisplayName: "Gamma"}} // T-1 is gone: a live read would refuse it
	var asItems []agentplane.ResolverItem
	for i := range first {
		asItems = append(asItems, first[i].Item())
	}
	version, _, err := resolve.Versioned(asItems)
	if err != nil {
		t.Fatal(err)
	}
	prov := httptest.NewServer(p)
	t.Cleanup(prov.Close)
	llm := llmtest.New(t)
	db := filepath.Join(t.TempDir(), "providers.db")
	e := newEnv(t, &envOptions{db: db, llm: llm, edit: func(string) string { return strings.Replace(ticketsYAML, "URL", prov.URL, 1) }})
	setActive := `{"catalog_id":"tickets","id":"T-1"}`
	callSetActive := llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "agent_set_active_entity", Arguments: setActive}}}

	paths := []struct {
		name string
		mode string
		act  func(t *testing.T, session string)
	}{
		{"turn", "plain", func(t *testing.T, s string) {
			if a := e.turn("", s, httpapi.TurnBody{Text: "open the alpha ticket"}); a.Result == nil || a.Result.Status != agentplane.StatusSuccess {
				t.Fatalf("%+v", a)
			}
		}},
		{"api_intent_command", "plain", func(t *testing.T, s string) {
			intent(t, e, s, `{"type":"action_call","action":"open_ticket","args":{"ticket":"T-1"}}`)
		}},
		{"api_intent_tool", "plain", func(t *testing.T, s string) {
			intent(t, e, s, `{"type":"action_call","action":"agent_set_active_entity","args":`+setActive+`}`)
		}},
		{"mcp_call", "plain", func(t *testing.T, s string) {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: boundTo{s}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent_set_active_entity", Arguments: json.RawMessage(setActive)})
			if err != nil || res.IsError {
				raw, _ := json.Marshal(res)
				t.Fatalf("%s %v", raw, err)
			}
		}},
		{"llm_call", "plain", func(t *testing.T, s string) {
			llm.Add(callSetActive, llmtest.Reply{Text: "Alpha is open."})
			if a := e.turn("", s, httpapi.TurnBody{Text: "please work on alpha"}); a.LLM == nil || len(a.LLM.Calls) != 1 || a.LLM.Calls[0].Status != agentplane.StatusSuccess {
				t.Fatalf("%+v", a.LLM)
			}
		}},
		{"websocket_turn", "plain", func(t *testing.T, s string) {
			llm.Add(callSetActive, llmtest.Reply{Text: "Alpha is open."})
			if a := wsTurn(t, e, s, "please work on alpha"); a.LLM == nil || len(a.LLM.Calls) != 1 || a.LLM.Calls[0].Status != agentplane.StatusSuccess {
				t.Fatalf("%+v", a.LLM)
			}
		}},
		{"llm_proposal_yes", "careful", func(t *testing.T, s string) {
			llm.Add(callSetActive)
			if a := e.turn("", s, httpapi.TurnBody{Text: "please watch alpha"}); a.LLM == nil || a.LLM.ConfirmationToken == "" {
				t.Fatalf("not proposed: %+v", a.LLM)
			}
			if a := e.turn("", s, httpapi.TurnBody{Text: "yes"}); a.Result == nil || a.Result.Status != agentplane.StatusSuccess {
				t.Fatalf("%+v", a)
			}
		}},
		{"llm_proposal_token", "careful", func(t *testing.T, s string) {
			llm.Add(callSetActive)
			a := e.turn("", s, httpapi.TurnBody{Text: "please watch alpha"})
			if a.LLM == nil || a.LLM.ConfirmationToken == "" {
				t.Fatalf("not proposed: %+v", a.LLM)
			}
			raw, _ := json.Marshal(agentplane.Intent{Type: agentplane.IntentActionCall, Action: "agent_set_active_entity", Args: json.RawMessage(setActive),
				ConfirmationToken: a.LLM.ConfirmationToken})
			intent(t, e, s, string(raw))
		}},
		{"internal_turn", "plain", func(t *testing.T, s string) {
			llm.Add(callSetActive, llmtest.Reply{Text: "Alpha is open."})
			resp, cancel := e.stream(t, s, 1)
			defer cancel()
			defer resp.Body.Close()
			var n struct{ ID string }
			if st := e.call("POST", "/v1/notifications", "", `{"address":"SESSION","session_id":"`+s+`","target":"AGENT","handler":"AGENT","title":"open alpha"}`, &n); st != http.StatusCreated {
				t.Fatalf("emit: %d", st)
			}
			// the agent's turn: its first exchange, the call, its last exchange
			var kinds []string
			for _, ev := range readSSE(t, resp.Body, 3) {
				kinds = append(kinds, ev.kind)
			}
			if strings.Join(kinds, " ") != "llm execution llm" {
				t.Fatalf("the agent's turn: %v", kinds)
			}
		}},
		{"workflow_task", "plain", func(t *testing.T, s string) {
			var w httpapi.WorkflowCreated
			if st := e.call("POST", "/v1/workflows", "", `{"session_id":"`+s+`","tasks":[{"id":"a","tool":"agent_set_active_entity","args":`+setActive+`}]}`, &w); st != http.StatusCreated {
				t.Fatalf("start: %d %+v", st, w)
			}
			evs := workflowEvents(t, e, w.WorkflowID, "") // to the workflow's end
			if len(evs) < 2 || evs[len(evs)-2].kind != "completed" {
				t.Fatalf("the workflow did not complete: %+v", evs)
			}
		}},
	}
	sessions := map[string]string{}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			p.set(first...)
			s := e.create("", map[string]any{"mode": path.mode}).SessionID
			sessions[path.name] = s
			path.act(t, s)
			p.set(later...) // the provider answers otherwise from now on

			recs, err := e.core.Records(context.Background(), s, 0)
			if err != nil {
				t.Fatal(err)
			}
			named := 0
			for _, r := range recs {
				switch {
				case r.Kind == audit.KindExecution && r.Sources["catalog:tickets"] != version:
					t.Errorf("record %d (%s, %s) names %v, want catalog:tickets %s", r.Seq, r.Kind, r.Intent.Origin, r.Sources, version)
				case r.Sources["catalog:tickets"] == version:
					named++
				case r.Decision != nil && r.Decision.Sources["catalog:tickets"] == version:
					if r.Sources != nil {
						t.Errorf("record %d: a decision's reads named twice: %v", r.Seq, r.Sources)
					}
					named++
				}
			}
			if named == 0 {
				t.Fatal("no record names the provider's answer")
			}

			calls := p.calls.Load()
			var out httpapi.Replayed
			if st := e.call("GET", "/v1/sessions/"+s+"/audit/replay", "", nil, &out); st != http.StatusOK || out.Total != 0 || len(out.Fallbacks) != 0 {
				t.Fatalf("replayed: %d %+v", st, out)
			}
			if n := p.calls.Load() - calls; n != 0 {
				t.Fatalf("the replay called the provider %d times", n)
			}

			// without the kept answers: each read asks the provider, and says so
			var fell []replay.Fallback
			_, err = replay.Session(context.Background(), e.core, recs, &replay.Options{
				Items:    func(context.Context, string) (*resolve.Index, bool, error) { return nil, false, nil },
				Fallback: func(f replay.Fallback) { fell = append(fell, f) }})
			if err != nil || len(fell) == 0 || p.calls.Load() == calls {
				t.Fatalf("not kept: %v, read live %+v, %d provider calls", err, fell, p.calls.Load()-calls)
			}
			seen := false
			for _, f := range fell {
				// the answer each record names (a turn's examples may have
				// been shaped with the answer another caller got last)
				if f.Source != "catalog:tickets" || f.Version == "" || !strings.Contains(f.Reason, "does not keep it") {
					t.Errorf("read live: %+v", f)
				}
				seen = seen || f.Version == version
			}
			if !seen {
				t.Errorf("no read of %s answered live: %+v", version, fell)
			}
		})
	}

	t.Run("TheAPIListsReadsAnsweredLive", func(t *testing.T) {
		s := sessions["api_intent_command"]
		if s == "" {
			t.Skip("its path did not run")
		}
		forget(t, db) // the store no longer keeps the answers
		var out httpapi.Replayed
		if st := e.call("GET", "/v1/sessions/"+s+"/audit/replay", "", nil, &out); st != http.StatusOK || len(out.Fallbacks) == 0 {
			t.Fatalf("%d %+v", st, out)
		}
		f := out.Fallbacks[0]
		if f.Source != "catalog:tickets" || f.Version != version || f.Kind != audit.KindExecution || !strings.Contains(f.Reason, "does not keep it") {
			t.Fatalf("%+v", f)
		}
	})
}

// wsTurn takes a turn over the session's WebSocket and returns its
// answer (the session's events and the model's text on the way are
// passed over).
func wsTurn(t *testing.T, e *env, session, text string) httpapi.TurnAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, strings.Replace(e.srv.URL, "http", "ws", 1)+"/v1/sessions/"+session+"/ws", nil)
	if err != nil {
		t.Fatalf("%v %v", resp, err)
	}
	defer conn.CloseNow()
	msg, _ := json.Marshal(map[string]string{"type": "turn", "request_id": "ws-1", "text": text})
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Type      string              `json:"type"`
			RequestID string              `json:"request_id"`
			Answer    *httpapi.TurnAnswer `json:"answer"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		switch {
		case m.Type == "turn" && m.RequestID == "ws-1" && m.Answer != nil:
			conn.Close(websocket.StatusNormalClosure, "")
			return *m.Answer
		case m.Type == "error" || m.Type == "turn":
			t.Fatalf("over the WebSocket: %s", data)
		}
	}
}

// intent posts an intent and wants it to succeed.
func intent(t *testing.T, e *env, session, body string) {
	t.Helper()
	var res agentplane.ExecutionResult
	if st := e.call("POST", "/v1/sessions/"+session+"/intents", "", body, &res); st != http.StatusOK || res.Status != agentplane.StatusSuccess {
		t.Fatalf("%s: %d %+v", body, st, res)
	}
}

// boundTo binds an MCP session to an agentplane session
// (mcpserver.SessionHeader).
type boundTo struct{ session string }

func (b boundTo) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(mcpserver.SessionHeader, b.session)
	return http.DefaultTransport.RoundTrip(r)
}

// forget deletes the providers' answers the SQLite store keeps.
func forget(t *testing.T, db string) {
	t.Helper()
	conn, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(`DELETE FROM catalog_versions`); err != nil {
		t.Fatal(err)
	}
}
