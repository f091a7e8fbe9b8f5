package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/tool"
)

var sampleModes = []tool.ModeSummary{
	{ID: "0f8b2c3d4e5f60718293a4b5c6d7e8f9", Key: "general", DisplayName: "General", Description: "Everyday help.",
		SystemPromptSummary: "Be brief.", IsDefault: true, HumanRoleHints: []string{"sales rep"}, ExampleUtterances: []string{"help me write an email"}},
	{ID: "1a2b3c4d5e6f708192a3b4c5d6e7f809", Key: "ddr", DisplayName: "DDR", Description: "Design decision records.",
		ExampleUtterances: []string{"open the acp ddr", "what does AGN-000037 say?"}},
}

func catalog(modes []tool.ModeSummary, err error) tool.ModeCatalog {
	return tool.ModeCatalogFunc(func(context.Context) ([]tool.ModeSummary, error) { return modes, err })
}

// Seed test 1: schema and registration.
func TestListModesRegisters(t *testing.T) {
	t.Parallel()
	reg := tool.NewRegistry()
	if err := reg.Register(tool.ListModes(catalog(sampleModes, nil), nil)); err != nil {
		t.Fatal(err)
	}
	got, ok := reg.Get("agent_list_modes")
	if !ok || got.Spec().Impact != tool.ImpactRead || !strings.Contains(got.Spec().Usage, "Do not call it on every message") {
		t.Fatalf("registered tool: %+v", got.Spec())
	}
	fn := got.Spec().OpenAIFunction()["function"].(map[string]any)
	if fn["name"] != "agent_list_modes" {
		t.Fatalf("OpenAI rendering: %v", fn)
	}
	var params map[string]any
	json.Unmarshal(fn["parameters"].(json.RawMessage), &params)
	if params["type"] != "object" || params["required"] != nil {
		t.Fatalf("parameters: %v", params)
	}
	if m := got.Spec().MCP(); !m.Annotations.ReadOnlyHint || m.Name != "agent_list_modes" {
		t.Fatalf("MCP rendering: %+v", m)
	}
}

type listed struct {
	Modes []map[string]any `json:"modes"`
}

func call(t *testing.T, tl tool.Tool, args string) (listed, error) {
	t.Helper()
	out, err := tl.Call(context.Background(), json.RawMessage(args))
	var l listed
	if err == nil {
		if jerr := json.Unmarshal(out, &l); jerr != nil {
			t.Fatalf("output is not JSON: %v: %s", jerr, out)
		}
	}
	return l, err
}

// Seed test 2: happy path.
func TestListModesHappyPath(t *testing.T) {
	t.Parallel()
	l, err := call(t, tool.ListModes(catalog(sampleModes, nil), nil), `{}`)
	if err != nil || len(l.Modes) != 2 {
		t.Fatalf("%+v %v", l, err)
	}
	m := l.Modes[0]
	for _, k := range []string{"id", "key", "displayName", "description", "isDefault", "systemPromptSummary", "humanRoleHints"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing %s", k)
		}
	}
	if m["id"] != "0f8b2c3d4e5f60718293a4b5c6d7e8f9" || m["key"] != "general" || m["isDefault"] != true || m["displayName"] != "General" {
		t.Fatalf("first mode: %v", m)
	}
	if ex := m["exampleUtterances"].([]any); len(ex) != 0 {
		t.Fatalf("examples without includeExamples: %v", ex)
	}
}

// Seed test 3: includeExamples.
func TestListModesIncludeExamples(t *testing.T) {
	t.Parallel()
	l, err := call(t, tool.ListModes(catalog(sampleModes, nil), nil), `{"includeExamples": true}`)
	if err != nil {
		t.Fatal(err)
	}
	ex := l.Modes[1]["exampleUtterances"].([]any)
	if len(ex) != 2 || ex[0] != "open the acp ddr" {
		t.Fatalf("examples: %v", ex)
	}
}

// Seed test 4: catalog failure; plus a nil catalog, a nil list and a panic.
func TestListModesCatalogFailure(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]tool.ModeCatalog{
		"Error":   catalog(nil, errors.New("database is down")),
		"NilCat":  nil,
		"NilList": catalog(nil, nil),
		"Panic":   tool.ModeCatalogFunc(func(context.Context) ([]tool.ModeSummary, error) { panic("bug") }),
	} {
		var logBuf bytes.Buffer
		tl := tool.ListModes(c, slog.New(slog.NewTextHandler(&logBuf, nil)))
		out, err := tl.Call(context.Background(), json.RawMessage(`{}`))
		var te *tool.Error
		if out != nil || !errors.As(err, &te) || te.Code != "catalog_unavailable" || te.Message == "" {
			t.Errorf("%s: out %s, err %v", name, out, err)
		}
		if !strings.Contains(logBuf.String(), "level=ERROR") {
			t.Errorf("%s: the failure was not logged", name)
		}
	}
}

func TestListModesIsIdempotent(t *testing.T) {
	t.Parallel()
	tl := tool.ListModes(catalog(sampleModes, nil), nil)
	a, _ := tl.Call(context.Background(), json.RawMessage(`{"includeExamples":true}`))
	b, _ := tl.Call(context.Background(), json.RawMessage(`{"includeExamples":true}`))
	if !bytes.Equal(a, b) {
		t.Fatalf("two calls differ:\n%s\n%s", a, b)
	}
}
