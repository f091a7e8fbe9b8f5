package tool_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

// demoGate is the demo runtime, whose gate runs the tools, and its store.
func demoGate(t *testing.T) (*core.Core, store.Store) {
	t.Helper()
	st := memstore.New()
	return demotest.Core(t, &core.Options{Store: st}), st
}

func callTool(t *testing.T, g *core.Core, session, name, args string) agentplane.ExecutionResult {
	t.Helper()
	r, err := g.Execute(context.Background(), gate.Invocation{SessionID: session, Tool: name, Args: json.RawMessage(args), Origin: gate.OriginLLM})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReadOnlyBuiltinsThroughTheGate(t *testing.T) {
	t.Parallel()
	g, store := demoGate(t)
	ctx := context.Background()
	g.Open(ctx, gate.Opening{SessionID: "s", Mode: "general"})
	g.Execute(ctx, gate.Invocation{SessionID: "s", CommandID: "set_active_email_template", ResolvedID: "TPL-123", Origin: gate.OriginUser})
	before, _ := store.Session(ctx, "s")

	// agent_list_modes: the seed's camelCase fields, from the configuration; repeated calls are identical
	a := callTool(t, g, "s", "agent_list_modes", `{"includeExamples": true}`)
	b := callTool(t, g, "s", "agent_list_modes", `{"includeExamples": true}`)
	var listed struct {
		Modes []struct {
			ID, Key, DisplayName string
			IsDefault            bool
			ExampleUtterances    []string
		} `json:"modes"`
	}
	json.Unmarshal(a.Output, &listed)
	if a.Status != agentplane.StatusSuccess || len(listed.Modes) != 3 || listed.Modes[0].Key != "general" || !listed.Modes[0].IsDefault ||
		listed.Modes[0].ID != agentplane.ModeID("general") || len(listed.Modes[1].ExampleUtterances) == 0 || string(a.Output) != string(b.Output) {
		t.Fatalf("agent_list_modes: %+v %s", a, a.Output)
	}

	// agent_get_context
	r := callTool(t, g, "s", "agent_get_context", `{}`)
	var got struct {
		Mode string
		AWC  agentplane.ActiveWorkContext
	}
	json.Unmarshal(r.Output, &got)
	if r.Status != agentplane.StatusSuccess || got.Mode != "general" || got.AWC.Entity.ID != "TPL-123" || got.AWC.RelatedEntities[0].Header.ID != "PERS-22" {
		t.Fatalf("agent_get_context: %+v %s", r, r.Output)
	}

	// catalog_search finds real ids, only in active catalogs
	r = callTool(t, g, "s", "catalog_search", `{"catalog_id": "email_templates", "query": "renewel"}`)
	if r.Status != agentplane.StatusSuccess || string(r.Output) != `{"exact":false,"items":[{"id":"TPL-200","display_name":"Renewal Reminder","description":"Reminder 60 days before a contract renews."}],"match":"fuzzy"}` {
		t.Fatalf("catalog_search: %+v %s", r, r.Output)
	}
	r = callTool(t, g, "s", "catalog_search", `{"catalog_id": "mailer_lists", "query": "pilot"}`)
	if r.Status != agentplane.StatusFailed || r.Error.Detail != `tool catalog_search: inactive_catalog: catalog "mailer_lists" is not active in mode "general"` {
		t.Fatalf("inactive catalog: %+v", r.Error)
	}
	// the session is untouched by all of it
	after, _ := store.Session(ctx, "s")
	if after.Version != before.Version {
		t.Fatalf("read-only tools changed the session: version %d -> %d", before.Version, after.Version)
	}
}

func TestEffectToolsRunThroughTheirCommands(t *testing.T) {
	t.Parallel()
	g, store := demoGate(t)
	ctx := context.Background()
	g.Open(ctx, gate.Opening{SessionID: "s", Mode: "general"})
	steps := []struct {
		tool, args string
		status     agentplane.Status
		code       string
	}{
		{"agent_set_active_entity", `{"catalog_id":"mailer_lists","id":"LIST-9"}`, agentplane.StatusRejected, agentplane.CodeInactiveAction},
		{"agent_set_active_entity", `{"catalog_id":"email_templates","id":"TPL-999"}`, agentplane.StatusRejected, agentplane.CodeInvalidArgs},
		{"agent_set_active_entity", `{"catalog_id":"email_templates","id":"TPL-123"}`, agentplane.StatusSuccess, ""},
		{"agent_clear_active_entity", `{}`, agentplane.StatusSuccess, ""},
		{"agent_clear_active_entity", `{}`, agentplane.StatusRejected, agentplane.CodePreconditionFailed},
		{"agent_set_mode", `{"mode":"turbo"}`, agentplane.StatusRejected, agentplane.CodeInvalidArgs},
		{"agent_set_mode", `{"mode":"ddr"}`, agentplane.StatusSuccess, ""},
		{"agent_set_active_entity", `{"catalog_id":"ddrs","id":"AGN-000037"}`, agentplane.StatusSuccess, ""},
	}
	for i, st := range steps {
		r := callTool(t, g, "s", st.tool, st.args)
		if r.Status != st.status || (st.code != "" && (r.Error == nil || r.Error.Code != st.code)) {
			t.Fatalf("step %d %s %s: %+v %+v", i, st.tool, st.args, r, r.Error)
		}
	}
	s, _ := store.Session(ctx, "s")
	if s.Mode != "ddr" || s.AWC.Entity.ID != "AGN-000037" || s.AWC.EntityType != "ddr" {
		t.Fatalf("session: %+v", s)
	}
}

// TestCatalogSearchQueryIsBounded: an 80 KB query is refused by the
// tool's schema before any search (it once took 16 s).
func TestCatalogSearchQueryIsBounded(t *testing.T) {
	t.Parallel()
	g, _ := demoGate(t)
	g.Open(context.Background(), gate.Opening{SessionID: "s", Mode: "general"})
	r := callTool(t, g, "s", "catalog_search", `{"catalog_id":"email_templates","query":"`+strings.Repeat("a", 80_000)+`"}`)
	if r.Status != agentplane.StatusRejected || r.Error.Code != agentplane.CodeInvalidArgs || !strings.Contains(r.Error.Detail, "maxLength") {
		t.Fatalf("%+v", r.Error)
	}
}

// demoWords are the demo's domain.
var demoWords = regexp.MustCompile(`(?i)\b(emails?|templates?|mailer|mailer lists?|ddrs?|sales|personas?|outreach)\b`)

// TestBuiltinsSpeakTheConfiguration: the built-in tools describe the
// configuration's own catalogs and modes and nothing of the demo's domain,
// and their schemas stay valid object schemas.
func TestBuiltinsSpeakTheConfiguration(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("../examples/media/agentplane.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tool.Spec{}
	for _, b := range tool.Builtins(cfg, reg, nil, nil) {
		s := b.Spec()
		byName[s.Name] = s
		if w := demoWords.FindString(s.Usage + string(s.InputSchema)); w != "" {
			t.Errorf("%s speaks of %q in a configuration without it:\n%s\n%s", s.Name, w, s.Usage, s.InputSchema)
		}
		var schema map[string]any
		if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if err := config.CheckObjectSchema(schema); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	for name, want := range map[string][]string{
		tool.CatalogSearchName:   {"pizzas", "albums", "films", "people", "tickets", "modes"},
		tool.SetActiveEntityName: {"pizzas", "tickets"},
		tool.SetModeName:         {"home", "support"},
	} {
		for _, w := range want {
			if !strings.Contains(string(byName[name].InputSchema), w) {
				t.Errorf("%s does not name %q: %s", name, w, byName[name].InputSchema)
			}
		}
	}
	if strings.Contains(string(byName[tool.SetActiveEntityName].InputSchema), "modes") {
		t.Errorf("agent_set_active_entity offers the modes catalog: %s", byName[tool.SetActiveEntityName].InputSchema)
	}
}
