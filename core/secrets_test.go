package core_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store/memstore"
)

// TestSecretHeaders: headers_env values come from the environment and
// reach the HTTP tool, the HTTP catalog provider and the MCP server over
// HTTP on every request; an unset variable stops the start naming it and
// where it is asked for; the secret is in neither the configuration the
// core shows nor the audit.
func TestSecretHeaders(t *testing.T) {
	t.Parallel()
	const secret = "Bearer s3cr3t-token-value"
	var mu sync.Mutex
	got := map[string][]string{} // service → Authorization headers received
	seen := func(service string, r *http.Request) {
		mu.Lock()
		got[service] = append(got[service], r.Header.Get("Authorization"))
		mu.Unlock()
	}
	tickets := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen("tool", r)
		w.Write([]byte(`{"assigned":true}`))
	}))
	t.Cleanup(tickets.Close)
	queues := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen("provider", r)
		w.Write([]byte(`[{"id":"Q-1","display_name":"Billing queue"}]`))
	}))
	t.Cleanup(queues.Close)
	ms := mcp.NewServer(&mcp.Implementation{Name: "kb"}, nil)
	mcp.AddTool(ms, &mcp.Tool{Name: "lookup", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil, nil
		})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil)
	kb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen("mcp", r)
		mh.ServeHTTP(w, r)
	}))
	t.Cleanup(kb.Close)

	yaml := `version: 1
modes: [{key: general, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [queues], commands: [use_queue], tools: [assign], mcp_servers: [kb]}]
catalogs: [{id: queues, entity_type: queue, provider: {http: {url: "` + queues.URL + `", headers_env: {Authorization: QUEUES_TOKEN}}}}]
commands:
  - {id: use_queue, tool: agent_set_active_entity, parameter: queue, resolver: {catalog: queues}, sets_active_context: true, triggers: ["use [the] {item}"]}
tools:
  - {name: assign, description: Assign a ticket., impact: internal, risk: low, input_schema: {type: object},
     http: {url: "` + tickets.URL + `", headers: {X-Team: desk}, headers_env: {Authorization: TICKETS_TOKEN}}}
mcp_servers: [{name: kb, url: "` + kb.URL + `", headers_env: {Authorization: KB_TOKEN}}]
`
	ctx := context.Background()
	// nothing set: the start names every variable and where it is asked for
	_, err := core.New(ctx, core.Source{YAML: []byte(yaml), Name: "desk.yaml"}, &core.Options{Getenv: func(string) string { return "" }})
	if err == nil {
		t.Fatal("started without its secrets")
	}
	for _, want := range []string{"desk.yaml", "tools[0].http.headers_env.Authorization: environment variable TICKETS_TOKEN is not set",
		"catalogs[0].provider.http.headers_env.Authorization: environment variable QUEUES_TOKEN is not set",
		"mcp_servers[0].headers_env.Authorization: environment variable KB_TOKEN is not set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if len(got) != 0 {
		t.Fatalf("a service was called by a core that did not start: %v", got)
	}

	env := map[string]string{"TICKETS_TOKEN": secret, "QUEUES_TOKEN": secret, "KB_TOKEN": secret}
	st := memstore.New()
	c, err := core.New(ctx, core.Source{YAML: []byte(yaml), Name: "desk.yaml"}, &core.Options{Store: st, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, _ := c.Start(ctx, core.Start{Principal: "ann"})
	tr, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: "use the billing queue"}})
	if err != nil || tr.Result == nil || tr.Result.Status != agentplane.StatusSuccess {
		t.Fatalf("the provider's item: %+v %v", tr, err)
	}
	for _, call := range []gate.Invocation{
		{SessionID: s.ID, Tool: "assign", Args: json.RawMessage(`{"ticket":"T-1"}`), Origin: gate.OriginUser, Principal: "ann", IdempotencyKey: "k-1"},
		{SessionID: s.ID, Tool: "kb_lookup", Args: json.RawMessage(`{}`), Origin: gate.OriginUser, Principal: "ann"},
	} {
		if r, err := c.Execute(ctx, call); err != nil || r.Status != agentplane.StatusSuccess {
			t.Fatalf("%s: %+v %v", call.Tool, r, err)
		}
	}
	mu.Lock()
	for _, service := range []string{"tool", "provider", "mcp"} {
		if len(got[service]) == 0 {
			t.Errorf("%s: never called", service)
		}
		for i, h := range got[service] {
			if h != secret {
				t.Errorf("%s: request %d had Authorization %q", service, i, h)
			}
		}
	}
	mu.Unlock()
	// the configuration the core shows holds the variable's name, not its value
	if h := c.Config().Tools[0].HTTP; h.Headers["Authorization"] != "" || h.HeadersEnv["Authorization"] != "TICKETS_TOKEN" {
		t.Errorf("Config shows %+v", h)
	}
	recs, err := c.Records(ctx, s.ID, 0)
	if err != nil || len(recs) < 3 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	for _, r := range recs {
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "s3cr3t") {
			t.Errorf("the secret is in record %d: %s", r.Seq, b)
		}
	}
}
