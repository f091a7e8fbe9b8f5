package eval_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/eval"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/router"
)

func demoRouter(t *testing.T) *router.Router {
	cfg, err := demo.Config(nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestDemoFile: the demo's labelled file is decided as labelled.
func TestDemoFile(t *testing.T) {
	f, err := os.Open("../examples/routing.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases, err := eval.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	rep := eval.Run(context.Background(), demoRouter(t), cases, time.Now())
	for _, m := range rep.Misses {
		t.Errorf("line %d %q: got %s %s(%s)\n%s", m.Case.Line, m.Case.Text, m.Decision.Action, m.Decision.CommandID, m.Decision.ResolvedID, strings.Join(m.Decision.Trace, "\n"))
	}
	if rep.Cases < 30 || rep.MustNotAct < 10 || rep.Hijacked != 0 || rep.Accuracy != 1 {
		t.Errorf("%d cases, %d must not act, %d hijacked, accuracy %v", rep.Cases, rep.MustNotAct, rep.Hijacked, rep.Accuracy)
	}
}

// TestScores: wrong labels show as misses, confusions and scores.
func TestScores(t *testing.T) {
	cases, err := eval.Read(strings.NewReader(`
# a comment
{"text": "switch to ddr mode", "expect": {"action": "invoke_command", "command_id": "set_mode", "resolved_id": "ddr"}}
{"text": "switch to ddr mode", "expect": {"action": "invoke_command", "command_id": "set_mode", "resolved_id": "sales"}}
{"text": "load renewal reminder", "expect": {"action": "invoke_command", "command_id": "set_mode"}}
{"text": "what can you do", "expect": {"action": "invoke_command", "command_id": "set_mode"}}
{"text": "switch to sales mode", "expect": {"action": "continue_with_llm"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := eval.Run(context.Background(), demoRouter(t), cases, time.Now())
	if rep.Cases != 5 || rep.Correct != 1 || len(rep.Misses) != 4 || rep.MustNotAct != 1 || rep.Hijacked != 1 {
		t.Fatalf("%+v", rep)
	}
	want := map[string][2]int{"set_mode": {4, 3}, "set_active_email_template": {0, 1}} // expected, predicted
	for _, s := range rep.Commands {
		if w, ok := want[s.CommandID]; !ok || w != [2]int{s.Expected, s.Predicted} {
			t.Errorf("%+v", s)
		}
	}
	if s := rep.Commands[1]; s.CommandID != "set_mode" || s.Correct != 2 || s.Recall != 0.5 || s.Precision != 2.0/3 {
		t.Errorf("set_mode %+v", s)
	}
	if len(rep.Confusions) != 3 {
		t.Errorf("confusions %+v", rep.Confusions)
	}
}

// TestBadFiles: every malformed line is refused, naming its line.
func TestBadFiles(t *testing.T) {
	for in, want := range map[string]string{
		``:                   "no cases",
		"{\"text\": \"x\"}":  "line 1: expect.action is missing",
		"\n{\"txt\": \"x\"}": "line 2: json: unknown field",
		`{"text": "x", "expect": {"action": "run"}}`:                                      `expect.action "run" is not a decision`,
		`{"text": "x", "expect": {"action": "open_picker"}}`:                              "expect.command_id is missing",
		`{"text": "x", "expect": {"action": "continue_with_llm"}} {}`:                     "more than one JSON value",
		`{"text": "x", "active": {"id": "A"}, "expect": {"action": "continue_with_llm"}}`: "active needs entity_type and id",
		`not json`: "line 1: invalid character",
	} {
		_, err := eval.Read(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// FuzzRead: no input panics the reader.
func FuzzRead(f *testing.F) {
	f.Add(`{"text": "x", "expect": {"action": "continue_with_llm"}}`)
	f.Add("\xff{")
	f.Fuzz(func(t *testing.T, s string) { eval.Read(strings.NewReader(s)) })
}
