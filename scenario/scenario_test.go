package scenario_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/scenario"
	"github.com/agentplane/agentplane/tool"
)

// demoCore is the demo runtime the files run against.
func demoCore(t *testing.T) *core.Core { return demotest.Core(t, nil) }

// demoTools gives each file the demo's send tool over a fresh outbox,
// beside the built-in tools.
func demoTools() *scenario.Options {
	return &scenario.Options{Tools: func(v core.View, now func() time.Time) ([]tool.Tool, error) {
		t, ok := v.Tool(demo.SendTemplateTool)
		if !ok {
			return nil, nil
		}
		return []tool.Tool{&tool.Func{S: t.Spec, Fn: demo.Programs(now)[demo.Program]}}, nil
	}}
}

// failures runs a file and returns its failures.
func failures(t *testing.T, c *core.Core, path string, opts *scenario.Options) []scenario.Failure {
	t.Helper()
	res, err := scenario.Run(context.Background(), c, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.Failures
}

// TestExamples runs the demo's conversation suite under examples/.
func TestExamples(t *testing.T) {
	t.Parallel()
	c := demoCore(t)
	files, _ := filepath.Glob("../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example conversations")
	}
	for _, f := range files {
		for _, x := range failures(t, c, f, demoTools()) {
			t.Error(x)
		}
	}
}

// TestMediaExamples runs the media configuration's suite under
// examples/media: statements never act, fillers never eat names, a
// clearing command acts on its own item, launcher arguments, declined
// questions, closeness.
func TestMediaExamples(t *testing.T) {
	t.Parallel()
	c, err := core.New(context.Background(), core.Source{Path: "../examples/media/agentplane.yaml"}, &core.Options{SkipMCP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	files, _ := filepath.Glob("../examples/media/tests/*.yaml")
	if len(files) < 7 {
		t.Fatalf("%d media conversations", len(files))
	}
	for _, f := range files {
		for _, x := range failures(t, c, f, nil) {
			t.Error(x)
		}
	}
}

// TestHelpdeskExamples runs the help desk's suite under
// examples/helpdesk/tests, as its people, against the stubs the files
// declare: no service runs.
func TestHelpdeskExamples(t *testing.T) {
	t.Parallel()
	c, err := core.New(context.Background(), core.Source{Path: "../examples/helpdesk/agentplane.yaml"},
		&core.Options{SkipMCP: true, Getenv: func(string) string { return "unused-secret" }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	files, _ := filepath.Glob("../examples/helpdesk/tests/*.yaml")
	if len(files) < 2 {
		t.Fatalf("%d help desk conversations", len(files))
	}
	for _, f := range files {
		res, err := scenario.Run(context.Background(), c, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range res.Failures {
			t.Error(x)
		}
		if res.Principal == scenario.DefaultPrincipal || !slices.Contains(res.Stubbed, "catalog tickets") {
			t.Errorf("%s: as %s, stubbed %v", f, res.Principal, res.Stubbed)
		}
	}
}

func TestFailuresNameFileAndLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte(`name: wrong expectations
turns:
  - user: switch to ddr mode
    expect: {decision: invoke_command, resolved_id: ddr}
  - user: switch to sales mode
    expect: {resolved_id: general, mode: ddr, status: failed}
`), 0o644)
	var got []string
	for _, f := range failures(t, demoCore(t), path, nil) {
		got = append(got, f.String())
	}
	want := []string{
		path + `:5: turn 2: resolved id is "sales", want "general"`,
		path + `:5: turn 2: status is "success", want "failed"`,
		path + `:5: turn 2: mode is "sales", want "ddr"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("failures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown-key.yaml": "name: x\nturns:\n  - user: hi\n    expct: {}\n",
		"two-kinds.yaml":   "turns:\n  - user: hi\n    confirm: true\n",
		"none.yaml":        "turns:\n  - expect: {}\n",
		"bad-mode.yaml":    "mode: nope\nturns:\n  - user: hi\n",
		"no-turns.yaml":    "name: nothing to test\nturns: []\n",
		"empty.yaml":       "\n",
		"two-docs.yaml":    "turns:\n  - user: hi\n---\nturns:\n  - user: switch to ddr mode\n    expect: {mode: sales}\n",
	} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(body), 0o644)
		if _, err := scenario.Run(context.Background(), demoCore(t), path, nil); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: the error does not name the file: %v", name, err)
		}
	}
}

// TestDocumentedExample runs the conversation file the documentation
// shows (docs/audit.md), so it cannot go stale.
func TestDocumentedExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/audit.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(# a conversation file.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/audit.md has no conversation-file example")
	}
	path := filepath.Join(t.TempDir(), "readme.yaml")
	os.WriteFile(path, m[1], 0o644)
	c := demoCore(t)
	for _, f := range failures(t, c, path, demoTools()) {
		t.Error(f)
	}
}

// A scripted LLM turn whose expectations do not hold fails, naming each,
// at the turn's line.
func TestScriptedLLMFailures(t *testing.T) {
	t.Parallel()
	c := demoCore(t)
	path := filepath.Join(t.TempDir(), "llm.yaml")
	os.WriteFile(path, []byte(`name: wrong expectations
mode: sales
turns:
  - user: hello there
    llm:
      - tool_calls: [{name: open_ddrs, args: {}}]
      - text: hi
      - text: unused
    expect:
      llm:
        text: goodbye
        calls: [success]
        prompt: ["Mode: DDR"]
        offered: [open_ddrs]
        not_offered: [catalog_search]
`), 0o644)
	var got []string
	for _, f := range failures(t, c, path, demoTools()) {
		got = append(got, f.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		`llm.yaml:4: turn 1: the LLM's text is "hi", which does not contain "goodbye"`,
		`the LLM's calls were ["rejected:unknown_action"], want ["success"]`,
		`the system prompt is`,
		`tool open_ddrs is not offered to the LLM`,
		`tool catalog_search is offered to the LLM`,
		`1 scripted LLM replies were not used`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no failure %q in:\n%s", want, all)
		}
	}
}
