package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/store"
)

type env struct {
	core   *core.Core
	outbox *demo.Outbox
	url    string
	srv    *mcpserver.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	out := demo.NewOutbox(nil)
	rt := demotest.Runtime(t, plane.Options{Core: core.Options{Programs: out.Programs()}})
	s := mcpserver.New(rt, nil)
	t.Cleanup(s.Close) // after the HTTP server's, before the runtime's
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &env{core: rt.Core, outbox: out, url: hs.URL, srv: s}
}

// connect opens an MCP client session over streamable HTTP; changed
// counts tools/list_changed notifications.
func (e *env) connect(t *testing.T, opts *mcp.ClientOptions) (*mcp.ClientSession, *atomic.Int32) {
	t.Helper()
	var changed atomic.Int32
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) }
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, &changed
}

func names(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

func active(e *env, mode string) []string {
	var out []string
	for _, t := range e.core.ActiveTools(mode, nil) {
		out = append(out, t.Spec.Name)
	}
	slices.Sort(out)
	return out
}

func call(t *testing.T, cs *mcp.ClientSession, name, args string) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return res, text.String()
}

// The client sees exactly the active tools; a mode switch through the gate
// changes them and the client is told; an action that changes the world
// answers that a human must confirm, with no token; an invented id is
// rejected with the reason.
func TestToolsThroughTheGate(t *testing.T) {
	e := newEnv(t)
	cs, changed := e.connect(t, nil)
	if got, want := names(t, cs), active(e, "general"); !slices.Equal(got, want) || !slices.Contains(got, "agent_list_modes") {
		t.Fatalf("listed %v, active %v", got, want)
	}
	res, text := call(t, cs, "agent_list_modes", `{}`)
	if res.IsError || !strings.Contains(text, `"key":"sales"`) || res.StructuredContent == nil {
		t.Fatalf("%+v %s", res, text)
	}
	res, text = call(t, cs, "agent_set_mode", `{"mode": "sales"}`)
	if res.IsError {
		t.Fatal(text)
	}
	deadline := time.Now().Add(5 * time.Second)
	for changed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if changed.Load() == 0 {
		t.Fatal("no tools/list_changed after the mode switch")
	}
	if got, want := names(t, cs), active(e, "sales"); !slices.Equal(got, want) || !slices.Contains(got, demo.SendTemplateTool) {
		t.Fatalf("after the switch: listed %v, active %v", got, want)
	}
	res, text = call(t, cs, "agent_set_active_entity", `{"catalog_id": "email_templates", "id": "TPL-999"}`)
	if !res.IsError || !strings.Contains(text, "invalid_args") || !strings.Contains(text, "TPL-999") {
		t.Fatalf("an invented id: %s", text)
	}
	if res, text = call(t, cs, "agent_set_active_entity", `{"catalog_id": "email_templates", "id": "TPL-123"}`); res.IsError {
		t.Fatal(text)
	}
	res, text = call(t, cs, demo.SendTemplateTool, `{"list_id": "LIST-9"}`)
	if !res.IsError || !strings.Contains(text, "a human must confirm") || strings.Contains(text, "tok-") {
		t.Fatalf("an external tool: %s", text)
	}
	if n := len(e.outbox.Sends()); n != 0 {
		t.Fatalf("%d sends without confirmation", n)
	}
	// a tool that exists but is not active (no toolbox of the demo lists
	// agent_notify_user) is neither listed nor callable
	if _, ok := e.core.View().Tool("agent_notify_user"); !ok || slices.Contains(names(t, cs), "agent_notify_user") {
		t.Fatal("agent_notify_user is not registered, or it is listed")
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent_notify_user", Arguments: json.RawMessage(`{"title":"x"}`)}); err == nil {
		t.Fatal("an inactive tool answered")
	}
}

// Where the client supports elicitation, the confirmation is asked of the
// human through it: yes runs the call once, as the human's; no runs
// nothing.
func TestConfirmationByElicitation(t *testing.T) {
	for _, yes := range []bool{true, false} {
		e := newEnv(t)
		var asked atomic.Int32
		cs, _ := e.connect(t, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			if !strings.Contains(r.Params.Message, "send_template") {
				t.Errorf("asked %q", r.Params.Message)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": yes}}, nil
		}})
		call(t, cs, "agent_set_mode", `{"mode": "sales"}`)
		call(t, cs, "agent_set_active_entity", `{"catalog_id": "email_templates", "id": "TPL-123"}`)
		res, text := call(t, cs, demo.SendTemplateTool, `{"list_id": "LIST-9"}`)
		sends := len(e.outbox.Sends())
		if asked.Load() != 1 || yes != !res.IsError || (yes && sends != 1) || (!yes && sends != 0) {
			t.Fatalf("yes=%v: asked %d, %s, %d sends", yes, asked.Load(), text, sends)
		}
		if yes {
			// the audit says who confirmed: an mcp attempt, then the human's run
			page, _ := e.core.Sessions(context.Background(), storeQuery())
			recs, _ := e.core.Records(context.Background(), page.Sessions[0].Session.ID, 0)
			last := recs[len(recs)-1]
			if last.Intent == nil || last.Intent.Origin != "user" || last.Result.Status != "success" || last.Kind != audit.KindExecution {
				t.Fatalf("last record %+v", last)
			}
		}
	}
}

func storeQuery() store.SessionQuery { return store.SessionQuery{Owner: "local"} }

// A downstream MCP server that comes up after the start has its tools
// mounted, and a connected client is told the list changed and sees them.
func TestLateServerChangesTheList(t *testing.T) {
	var up atomic.Bool
	down := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	down.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return down }, nil)
	late := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(late.Close) // cleanups run last first: the client, our server, the core, then this
	yaml := fmt.Sprintf(`version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], tools: [agent_list_modes], mcp_servers: [files]}]
mcp_servers: [{name: files, url: %q, impact: {echo: read}, connect_timeout_ms: 500}]
`, late.URL)
	rt, err := plane.Open(context.Background(), plane.Options{Config: core.Source{YAML: []byte(yaml), Name: "late.yaml"}, Core: core.Options{MCPRetry: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(time.Second) })
	srv := mcpserver.New(rt, nil) // told by the runtime when tools are mounted late
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e := &env{core: rt.Core, url: hs.URL, srv: srv}
	cs, changed := e.connect(t, nil)
	if got := names(t, cs); !slices.Equal(got, []string{"agent_list_modes"}) {
		t.Fatalf("before: %v", got)
	}
	up.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for changed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := names(t, cs); changed.Load() == 0 || !slices.Equal(got, []string{"agent_list_modes", "files_echo"}) {
		t.Fatalf("after the server came up: %d notifications, %v", changed.Load(), got)
	}
	if res, text := call(t, cs, "files_echo", `{}`); res.IsError || !strings.Contains(text, "echo") {
		t.Fatalf("%s", text)
	}
}
