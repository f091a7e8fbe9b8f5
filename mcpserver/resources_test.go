package mcpserver_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/mcpserver"
)

// notes records the resource notifications a client got.
type notes struct {
	mu      sync.Mutex
	updated []string
	listed  int
}

func (n *notes) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			n.mu.Lock()
			n.updated = append(n.updated, r.Params.URI)
			n.mu.Unlock()
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			n.mu.Lock()
			n.listed++
			n.mu.Unlock()
		},
	}
}

// until waits for cond on the notes.
func (n *notes) until(t *testing.T, what string, cond func(n *notes) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n.mu.Lock()
		ok := cond(n)
		n.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	t.Fatalf("no %s: updated %v, list changed %d times", what, n.updated, n.listed)
}

func (n *notes) count(uri string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, u := range n.updated {
		if u == uri {
			c++
		}
	}
	return c
}

func read(t *testing.T, cs *mcp.ClientSession, uri string) string {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].URI != uri {
		t.Fatalf("read %s: %+v", uri, res.Contents)
	}
	return res.Contents[0].Text
}

func resourceURIs(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var out []string
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.URI)
	}
	slices.Sort(out)
	return out
}

// Every tool says what it does to the world: the workflow meta-tools
// included, so that a client (agentplane mounting agentplane) does not
// take workflow_status for an action that needs confirming.
func TestToolAnnotationsTellTheTruth(t *testing.T) {
	e := newWorkflowEnv(t) // with the workflow meta-tools
	cs, _ := e.connect(t, nil)
	call(t, cs, "agent_set_mode", `{"mode": "sales"}`)
	want := map[string][4]bool{ // readOnly, destructive, idempotent, openWorld
		"catalog_search":                       {true, false, true, false},
		"agent_list_modes":                     {true, false, true, false},
		"agent_set_mode":                       {false, false, true, false},
		demo.SendTemplateTool:                  {false, true, false, true},
		mcpserver.ToolWorkflowStatus:           {true, false, true, false},
		mcpserver.ToolWorkflowAbort:            {false, false, true, false},
		mcpserver.ToolWorkflowExecute:          {false, true, false, true},
		mcpserver.ToolWorkflowApprovalResponse: {false, true, false, true},
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, tl := range res.Tools {
			a := tl.Annotations
			if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
				t.Fatalf("%s: hints missing: %+v", tl.Name, a)
			}
			if w, ok := want[tl.Name]; ok {
				seen[tl.Name] = true
				if got := [4]bool{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint}; got != w {
					t.Errorf("%s: read-only, destructive, idempotent, open-world = %v, want %v", tl.Name, got, w)
				}
			}
		}
		if len(seen) == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools seen %v of %v", seen, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The session's own resources, the active catalogs as resources that
// follow the mode, items by template, the audit chain by pages.
func TestResources(t *testing.T) {
	e := newEnv(t)
	var n notes
	cs, _ := e.connect(t, n.options())
	init := cs.InitializeResult()
	if c := init.Capabilities; c.Resources == nil || !c.Resources.Subscribe || !c.Resources.ListChanged || c.Prompts == nil || c.Completions == nil {
		t.Fatalf("capabilities %+v", c)
	}
	want := []string{"agentplane://catalogs/email_templates", "agentplane://catalogs/modes", mcpserver.URISession, mcpserver.URIAudit, mcpserver.URIContext}
	if got := resourceURIs(t, cs); !slices.Equal(got, want) { // general mode: the modes, and the templates its launcher opens
		t.Fatalf("in general mode: %v", got)
	}
	var snap struct {
		SessionID string `json:"session_id"`
		Mode      string `json:"mode"`
		Version   int64  `json:"version"`
	}
	if err := json.Unmarshal([]byte(read(t, cs, mcpserver.URISession)), &snap); err != nil || snap.Mode != "general" || snap.SessionID == "" {
		t.Fatalf("session: %+v %v", snap, err)
	}
	// a switch to sales: its catalogs are listed, the client is told
	call(t, cs, "agent_set_mode", `{"mode": "sales"}`)
	n.until(t, "resources/list_changed", func(n *notes) bool { return n.listed > 0 })
	if got := resourceURIs(t, cs); !slices.Contains(got, "agentplane://catalogs/email_templates") || !slices.Contains(got, "agentplane://catalogs/mailer_lists") ||
		slices.Contains(got, "agentplane://catalogs/ddrs") {
		t.Fatalf("in sales mode: %v", got)
	}
	var page mcpserver.SourcePage
	if err := json.Unmarshal([]byte(read(t, cs, "agentplane://catalogs/email_templates")), &page); err != nil {
		t.Fatal(err)
	}
	if page.EntityType != "email_template" || page.Total < 5 || len(page.Items) != page.Total || page.Next != "" || page.Items[0].URI == "" {
		t.Fatalf("catalog page: %+v", page)
	}
	if err := json.Unmarshal([]byte(read(t, cs, "agentplane://catalogs/email_templates?offset=2")), &page); err != nil || page.Offset != 2 || len(page.Items) != page.Total-2 {
		t.Fatalf("from offset 2: %+v %v", page, err)
	}
	var item mcpserver.SourceItem
	if err := json.Unmarshal([]byte(read(t, cs, "agentplane://catalogs/email_templates/items/TPL-123")), &item); err != nil ||
		item.DisplayName != "Q1 CFO Outreach" || len(item.Related) == 0 || item.Related[0].Header.ID != "PERS-22" {
		t.Fatalf("item: %+v %v", item, err)
	}
	// what this session's mode does not offer is not there, as for what does not exist
	for _, uri := range []string{"agentplane://catalogs/ddrs", "agentplane://catalogs/ddrs/items/AGN-000037", "agentplane://catalogs/nope",
		"agentplane://catalogs/email_templates/items/TPL-999"} {
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("read %s: %v", uri, err)
		}
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "agentplane://catalogs/email_templates?offset=-1"}); err == nil || !strings.Contains(err.Error(), "offset") {
		t.Errorf("a negative offset: %v", err)
	}
	// the work context
	call(t, cs, "agent_set_active_entity", `{"catalog_id": "email_templates", "id": "TPL-123"}`)
	if awc := read(t, cs, mcpserver.URIContext); !strings.Contains(awc, `"TPL-123"`) || !strings.Contains(awc, "PERS-22") {
		t.Fatalf("context: %s", awc)
	}
	// the audit chain: the bound session's, verifiable, by pages
	var recs []audit.Record
	if err := audit.ReadJSONL(strings.NewReader(read(t, cs, mcpserver.URIAudit)), func(_ int, r *audit.Record) error {
		recs = append(recs, *r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) < 3 || recs[0].Session != snap.SessionID || audit.Verify(recs) != nil {
		t.Fatalf("audit: %d records of %s", len(recs), recs[0].Session)
	}
	if older := read(t, cs, mcpserver.URIAudit+"?before=3"); strings.Count(older, "\n") != 2 {
		t.Fatalf("before 3: %q", older)
	}
}

// A prompt per mode, with the item to start with as an argument where
// the mode opens items; its values complete from the resolver.
func TestPromptsAndCompletions(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.connect(t, nil)
	ctx := context.Background()
	var prompts []string
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p.Name)
		if p.Name == "sales" && (len(p.Arguments) != 1 || p.Arguments[0].Name != "template_id" || p.Arguments[0].Required) {
			t.Fatalf("sales prompt arguments: %+v", p.Arguments)
		}
	}
	if slices.Sort(prompts); !slices.Equal(prompts, []string{"ddr", "general", "sales"}) {
		t.Fatalf("prompts %v", prompts)
	}
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "sales", Arguments: map[string]string{"template_id": "cfo outreach"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Messages[0].Content.(*mcp.TextContent).Text
	for _, want := range []string{"Sales mode", "Send the template to a mailer list", demo.SendTemplateTool, "“Q1 CFO Outreach” (TPL-123)", `"id": "TPL-123"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, text)
		}
	}
	for args, want := range map[string]string{`{"nope":"x"}`: `no argument "nope"`, `{"template_id":"no such thing"}`: `template_id="no such thing": no single email template`} {
		var a map[string]string
		json.Unmarshal([]byte(args), &a)
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "sales", Arguments: a}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("prompt with %s: %v, want %q", args, err, want)
		}
	}
	complete := func(ref *mcp.CompleteReference, name, value string, given map[string]string) mcp.CompletionResultDetails {
		t.Helper()
		p := &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: name, Value: value}}
		if given != nil {
			p.Context = &mcp.CompleteContext{Arguments: given}
		}
		r, err := cs.Complete(ctx, p)
		if err != nil {
			t.Fatalf("complete %s=%q: %v", name, value, err)
		}
		return r.Completion
	}
	prompt := &mcp.CompleteReference{Type: "ref/prompt", Name: "sales"}
	for value, first := range map[string]string{
		"cfo outreach": "TPL-123", // an alias, exactly
		"renewel":      "TPL-200", // a typo
		"RÉNEWAL":      "TPL-200", // case and accents
		"outreach":     "TPL-123", // two match; the better first
		"outr":         "TPL-123", // a prefix, as a person types
		"q1 cf":        "TPL-123",
	} {
		if c := complete(prompt, "template_id", value, nil); len(c.Values) == 0 || c.Values[0] != first {
			t.Errorf("completing %q: %v, want %s first", value, c.Values, first)
		}
	}
	if c := complete(prompt, "template_id", "", nil); len(c.Values) < 5 || c.Total != len(c.Values) {
		t.Errorf("completing nothing: %+v", c)
	}
	item := &mcp.CompleteReference{Type: "ref/resource", URI: "agentplane://catalogs/{catalog}/items/{id}"}
	// the session is in general mode: its catalogs are the modes
	if c := complete(item, "catalog", "mo", nil); !slices.Equal(c.Values, []string{"modes"}) {
		t.Errorf("completing {catalog}: %v", c.Values)
	}
	if c := complete(item, "id", "salse", map[string]string{"catalog": "modes"}); len(c.Values) == 0 || c.Values[0] != "sales" {
		t.Errorf("completing {id} of modes: %v", c.Values)
	}
	if c := complete(item, "id", "pilot", map[string]string{"catalog": "mailer_lists"}); len(c.Values) != 0 {
		t.Errorf("a catalog of another mode completes: %v", c.Values)
	}
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: prompt, Argument: mcp.CompleteParamsArgument{Name: "list_id", Value: "x"}}); err == nil || !strings.Contains(err.Error(), `no argument "list_id"`) {
		t.Errorf("an argument the prompt does not take: %v", err)
	}
}

// A client subscribed to the session's state hears of every change, by
// its own calls or another writer's; to its work context, of changes to
// the context only.
func TestResourceSubscriptions(t *testing.T) {
	e := newEnv(t)
	var n notes
	cs, _ := e.connect(t, n.options())
	ctx := context.Background()
	for _, uri := range []string{mcpserver.URISession, mcpserver.URIContext} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.URIAudit}); err == nil || !strings.Contains(err.Error(), "cannot be subscribed") {
		t.Fatalf("subscribe to the audit: %v", err)
	}
	call(t, cs, "agent_set_mode", `{"mode": "sales"}`)
	n.until(t, "update of the session", func(n *notes) bool { return slices.Contains(n.updated, mcpserver.URISession) })
	if c := n.count(mcpserver.URIContext); c != 0 {
		t.Fatalf("a mode switch updated the context %d times", c)
	}
	call(t, cs, "agent_set_active_entity", `{"catalog_id": "email_templates", "id": "TPL-123"}`)
	n.until(t, "update of the context", func(n *notes) bool { return slices.Contains(n.updated, mcpserver.URIContext) })
	// another writer: a turn on the same session through the core
	var snap struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal([]byte(read(t, cs, mcpserver.URISession)), &snap)
	before := n.count(mcpserver.URISession)
	if _, err := e.core.Turn(ctx, turnRequest(snap.SessionID, "switch to ddr mode")); err != nil {
		t.Fatal(err)
	}
	n.until(t, "update after another writer's turn", func(n *notes) bool {
		c := 0
		for _, u := range n.updated {
			if u == mcpserver.URISession {
				c++
			}
		}
		return c > before
	})
}

func turnRequest(session, text string) core.TurnRequest {
	return core.TurnRequest{SessionID: session, Principal: agentplane.LocalPrincipal, Input: agentplane.TurnInput{Text: text}}
}
