package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/plane"
)

// TestSecretCanaries puts a unique value in every secret the server can be
// configured with — the secret headers of an HTTP tool, an HTTP catalog
// provider and an MCP server, and the LLM's API key — behind services that
// echo what they were sent into their errors and outputs, drives every
// path that reaches them, and then scans every surface for the values:
// every API answer, the audit records, history, event stream and export
// of every session, the logs, the traces, the metrics, MCP's answers and
// resources, the readiness report and the page. (A tool service that
// echoed its secret header in an error body put the secret verbatim into
// the hash-chained audit, where it cannot be removed, into history and
// into the API's answer.)
func TestSecretCanaries(t *testing.T) {
	t.Parallel()
	canaries := map[string]string{ // variable -> its unique value
		"TOOL_TOKEN":     "Bearer canary-tool-7f3a91c2",
		"PROVIDER_TOKEN": "Bearer canary-provider-b84e0d17",
		"MCP_TOKEN":      "Bearer canary-mcp-52c9ae60",
		"LLM_KEY":        "canary-llm-e1d07f43",
	}
	echo := func(w http.ResponseWriter, r *http.Request, status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, body, r.Header.Get("Authorization"))
	}
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/fail") {
			echo(w, r, 500, `{"error":"refused header %s"}`)
			return
		}
		echo(w, r, 200, `{"you_sent":%q}`)
	}))
	t.Cleanup(tools.Close)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo(w, r, 403, `{"error":"not allowed with %s"}`)
	}))
	t.Cleanup(provider.Close)
	ms := mcp.NewServer(&mcp.Implementation{Name: "kb"}, nil)
	var mcpAuth sync.Map
	mcp.AddTool(ms, &mcp.Tool{Name: "lookup"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		h, _ := mcpAuth.Load("h")
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("no access for ", h)}}}, nil, nil
	})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil)
	kb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mcpAuth.Store("h", r.Header.Get("Authorization"))
		mh.ServeHTTP(w, r)
	}))
	t.Cleanup(kb.Close)
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo(w, r, 401, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error"}}`)
	}))
	t.Cleanup(llm.Close)

	yaml := `version: 1
modes: [{key: general, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [queues], commands: [use_queue], tools: [echo_ok, echo_fail], mcp_servers: [kb]}]
catalogs: [{id: queues, entity_type: queue, provider: {http: {url: "` + provider.URL + `", headers_env: {Authorization: PROVIDER_TOKEN}}}}]
commands:
  - {id: use_queue, tool: agent_set_active_entity, parameter: queue, resolver: {catalog: queues}, sets_active_context: true, triggers: ["use [the] {item}"]}
tools:
  - {name: echo_ok, description: Echoes., impact: internal, risk: low, input_schema: {type: object}, http: {url: "` + tools.URL + `/ok", headers_env: {Authorization: TOOL_TOKEN}}}
  - {name: echo_fail, description: Fails., impact: internal, risk: low, input_schema: {type: object}, http: {url: "` + tools.URL + `/fail", headers_env: {Authorization: TOOL_TOKEN}}}
mcp_servers: [{name: kb, url: "` + kb.URL + `", headers_env: {Authorization: MCP_TOKEN}}]
llm: {base_url: "` + llm.URL + `/v1", model: test-model, api_key_env: LLM_KEY, timeout_ms: 5000}
`
	var logs bytes.Buffer
	var logMu sync.Mutex
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	metrics := httpapi.NewMetrics()
	rt := demotest.Runtime(t, plane.Options{Config: core.Source{YAML: []byte(yaml), Name: "canary.yaml"}, DB: filepath.Join(t.TempDir(), "c.db"),
		Core: core.Options{Observer: metrics.Observer(nil), NewID: newIDs()}, LLM: true, TracerProvider: tp,
		Logger: slog.New(slog.NewJSONHandler(lockedWriter{&logs, &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Getenv: func(k string) string { return canaries[k] }})
	mcpSrv := mcpserver.New(rt, nil)
	t.Cleanup(mcpSrv.Close)
	api := httpapi.New(rt, &httpapi.Options{Metrics: metrics, Heartbeat: 50 * time.Millisecond, MCP: mcpSrv.Handler()})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	var answers bytes.Buffer // every answer the server gave
	do := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(&answers, "%s %s → %d %s\n", method, path, resp.StatusCode, raw)
		return raw
	}
	var created httpapi.SessionCreated
	json.Unmarshal(do("POST", "/v1/sessions", `{}`), &created)
	id := created.SessionID
	if id == "" {
		t.Fatalf("no session: %s", answers.String())
	}
	// every path that reaches a secret's service
	do("POST", "/v1/sessions/"+id+"/intents", `{"type":"action_call","action":"echo_ok","args":{}}`)
	do("POST", "/v1/sessions/"+id+"/intents", `{"type":"action_call","action":"echo_fail","args":{}}`)
	do("POST", "/v1/sessions/"+id+"/intents", `{"type":"action_call","action":"kb_lookup","args":{}}`)
	do("POST", "/v1/sessions/"+id+"/turns", `{"text":"use the billing queue"}`)
	do("POST", "/v1/sessions/"+id+"/turns", `{"text":"what is the weather like"}`)
	do("GET", "/v1/sessions/"+id+"/catalogs/queues/items?q=billing", "")
	var started struct {
		WorkflowID string `json:"workflow_id"`
	}
	if err := json.Unmarshal(do("POST", "/v1/workflows", `{"session_id":"`+id+`","tasks":[{"id":"a","tool":"echo_fail","args":{}},{"id":"b","tool":"echo_ok","args":{}}]}`), &started); err != nil || started.WorkflowID == "" {
		t.Fatalf("start a workflow: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"echo_ok", "echo_fail", "kb_lookup"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		b, _ := json.Marshal(res)
		fmt.Fprintf(&answers, "MCP %s → %s %v\n", name, b, err)
	}
	if rs, err := cs.ListResources(context.Background(), nil); err == nil {
		for _, r := range rs.Resources {
			res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: r.URI})
			b, _ := json.Marshal(res)
			fmt.Fprintf(&answers, "MCP resource %s → %s %v\n", r.URI, b, err)
		}
	}
	cs.Close()
	// the workflow runs its tasks to its end (or a pause)
	wctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := rt.Workflows.Wait(wctx, started.WorkflowID, "local", 0); err != nil {
		t.Fatalf("workflow %s: %v", started.WorkflowID, err)
	}

	// the surfaces
	var list httpapi.SessionList
	json.Unmarshal(do("GET", "/v1/sessions", ""), &list)
	for _, s := range list.Sessions {
		for _, path := range []string{"", "/audit", "/history", "/audit/verification", "/audit/replay"} {
			do("GET", "/v1/sessions/"+s.SessionID+path, "")
		}
		recs, err := rt.Core.Records(context.Background(), s.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs { // what agentplane audit export writes
			fmt.Fprintf(&answers, "record %s/%d %s\n", s.SessionID, r.Seq, r.Raw)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/sessions/"+s.SessionID+"/events", nil)
		if resp, err := srv.Client().Do(req); err == nil {
			readSSE(t, resp.Body, len(recs))
			resp.Body.Close()
		}
		cancel()
	}
	do("GET", "/v1/workflows", "")
	do("GET", "/v1/tools", "")
	do("GET", "/readyz", "")
	do("GET", "/metrics", "")
	do("GET", "/", "")
	do("GET", "/ui/app.js", "")

	// the services were reached with the secrets: the paths were walked
	if h, _ := mcpAuth.Load("h"); h != canaries["MCP_TOKEN"] {
		t.Fatalf("the MCP server was not reached with its secret: %v", h)
	}
	// every service's echo came back, masked: each path was walked
	for _, echoed := range []string{`refused header [redacted]`, `\"you_sent\":\"[redacted]\"`, `not allowed with [redacted]`, `no access for [redacted]`, `Incorrect API key provided: Bearer [redacted]`} {
		if !strings.Contains(answers.String(), echoed) && !strings.Contains(answers.String(), strings.ReplaceAll(echoed, `\"`, `"`)) {
			t.Errorf("no answer shows %s: that service's echo never came back\n%s", echoed, answers.String())
		}
	}
	var traces bytes.Buffer
	for _, s := range spans.GetSpans() {
		b, _ := json.Marshal(s)
		traces.Write(b)
	}
	logMu.Lock()
	logged := logs.String()
	logMu.Unlock()
	surfaces := map[string]string{"answers, records and streams": answers.String(), "logs": logged, "traces": traces.String()}
	for name, text := range surfaces {
		for v, secret := range canaries {
			token := strings.TrimPrefix(secret, "Bearer ")
			if i := strings.Index(text, token); i >= 0 {
				t.Errorf("%s holds %s's value: …%s…", name, v, text[max(0, i-200):min(len(text), i+100)])
			}
		}
	}
}

// lockedWriter serialises writes to a buffer the test reads.
type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
