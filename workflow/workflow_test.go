package workflow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/workflow"
)

func known(t string) bool {
	return t == "catalog_search" || t == "send_template" || t == "agent_get_context"
}

func TestValid(t *testing.T) {
	def, err := workflow.Parse([]byte(`name: outreach
tasks:
  - id: find
    tool: catalog_search
    args: {catalog_id: mailer_lists, query: pilot}
  - id: context
    tool: agent_get_context
  - id: send
    tool: send_template
    args: {list_id: "${find.output.items.0.id}"}
    depends_on: [find, context]
`), "w.yaml", known)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := def.Layers()
	if err != nil || len(layers) != 2 || len(layers[0]) != 2 || layers[1][0].ID != "send" {
		t.Fatalf("%+v %v", layers, err)
	}
}

func TestProblems(t *testing.T) {
	_, err := workflow.Parse([]byte(`name: broken
tasks:
  - id: a
    tool: catalog_search
    depends_on: [c]
  - id: b
    tool: nope
    depends_on: [a, ghost]
  - id: c
    tool: send_template
    depends_on: [b]
    args: {list_id: "${a.output.x}", other: "${b.result}", open: "${b.output"}
  - id: a
    tool: catalog_search
`), "w.yaml", known)
	var ps workflow.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("%v", err)
	}
	all := err.Error()
	for _, want := range []string{
		`w.yaml:7: tasks[1].tool: unknown tool "nope"`,
		`w.yaml:8: tasks[1].depends_on[1]: unknown task "ghost"`,
		`w.yaml:12: tasks[2].args.list_id: "${a.output.x}" refers to task "a", which is not among this task's depends_on`,
		`tasks[2].args.other: "${b.result}": a reference is ${task_id.output}`,
		`tasks[2].args.open: "${b.output": an unclosed ${`,
		`w.yaml:13: tasks[3].id: "a": the same id as tasks[0]`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no problem %q in:\n%s", want, all)
		}
	}
	// arguments the audit log could not read back: names that differ only
	// in letter case (a definition from MCP arrives as a map)
	err = workflow.Check(&workflow.Definition{Tasks: []workflow.Task{{ID: "a", Tool: "catalog_search", Args: map[string]any{"query": "x", "Query": "y"}}}}, "", known)
	if err == nil || !strings.Contains(err.Error(), `tasks[0].args: canonjson: map keys "Query" and "query" differ only in letter case`) {
		t.Fatalf("case-variant args: %v", err)
	}
	// a cycle, with its path, beside the other problems
	_, err = workflow.Parse([]byte("tasks:\n  - {id: a, tool: nope, depends_on: [b]}\n  - {id: b, tool: catalog_search, depends_on: [a]}\n"), "c.yaml", known)
	if err == nil || !strings.Contains(err.Error(), `unknown tool "nope"`) || !strings.Contains(err.Error(), "a cycle: a → b → a") {
		t.Fatalf("%v", err)
	}
	_, err = workflow.Parse([]byte("tasks:\n  - {id: a, tool: catalog_search, depends_on: [c]}\n  - {id: b, tool: catalog_search, depends_on: [a]}\n  - {id: c, tool: catalog_search, depends_on: [b]}\n"), "c.yaml", known)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:2: tasks[0].depends_on: a cycle: a → c → b → a") {
		t.Fatalf("%v", err)
	}
	for _, c := range []struct{ in, want string }{
		{"", "the file is empty"},
		{"tasks: []", "no tasks"},
		{"tasks: [{id: a, tool: catalog_search, when: x}]", "field when not found"},
		{"tasks: [{id: a, tool: catalog_search, depends_on: [a]}]", `"a" depends on itself`},
	} {
		if _, err := workflow.Parse([]byte(c.in), "x.yaml", known); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("tasks:\n  - {id: a, tool: catalog_search, args: {q: \"${b.output}\"}, depends_on: [b]}\n  - {id: b, tool: catalog_search}\n"))
	f.Add([]byte("tasks: [{id: a, tool: x, depends_on: [a]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		def, err := workflow.Parse(data, "f.yaml", known)
		if err == nil {
			if _, err := def.Layers(); err != nil {
				t.Fatalf("a valid definition without layers: %v", err)
			}
		}
	})
}
