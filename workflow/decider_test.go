package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/workflow"
)

// The seed's use case 1: a rule-based decision engine. Too many errors
// abort; XML files found without a parser replan; otherwise continue.
type ruleBased struct{ decisions []string }

func (r *ruleBased) Decide(_ context.Context, ev workflow.Event, w *workflow.Workflow) (workflow.Command, bool) {
	if ev.Type != workflow.EventDecisionRequired {
		return workflow.Command{}, false
	}
	errs, hasParser := 0, false
	var xml []string
	for _, t := range w.Tasks {
		if t.Status == workflow.TaskFailed {
			errs++
		}
		hasParser = hasParser || t.Tool == "parse_xml"
		var out struct{ Files []string }
		json.Unmarshal(t.Output, &out)
		for _, f := range out.Files {
			if strings.HasSuffix(f, ".xml") {
				xml = append(xml, f)
			}
		}
	}
	var c workflow.Command
	switch {
	case errs > 3:
		c = workflow.Command{Type: "abort", Reason: "Too many errors"}
	case ev.Layer > 10:
		c = workflow.Command{Type: "abort", Reason: "Workflow too long"}
	case len(xml) > 0 && !hasParser:
		ctx, _ := json.Marshal(map[string]any{"xml_files": xml})
		c = workflow.Command{Type: "replan_dag", NewRequirement: "Add XML parser", AvailableContext: ctx}
	default:
		c = workflow.Command{Type: "continue", Reason: "validation passed"}
	}
	r.decisions = append(r.decisions, c.Type)
	return c, true
}

func TestRuleBasedAgent(t *testing.T) {
	e := newEnv(t, nil)
	w := e.start(t, `per_layer_validation: true
tasks:
  - {id: files, tool: list_files}
  - {id: report, tool: noop, depends_on: [files]}
`, "")
	agent := &ruleBased{}
	end, err := e.eng.Follow(context.Background(), w.ID, agent)
	if err != nil {
		t.Fatal(err)
	}
	if end.Status != workflow.StatusCompleted || strings.Join(agent.decisions, ",") != "replan_dag,continue" {
		t.Fatalf("%s after %v", end.Status, agent.decisions)
	}
	if end.Tasks[2].Tool != "parse_xml" || end.Tasks[2].Status != workflow.TaskCompleted {
		t.Fatalf("%+v", end.Tasks)
	}

	// errors pile up: the rules abort
	w = e.start(t, `per_layer_validation: true
tasks:
  - {id: b1, tool: broken}
  - {id: b2, tool: broken}
  - {id: b3, tool: broken}
  - {id: b4, tool: broken}
  - {id: n, tool: noop}
  - {id: later, tool: noop, depends_on: [n]}
`, "")
	agent = &ruleBased{}
	end, err = e.eng.Follow(context.Background(), w.ID, agent)
	if err != nil || end.Status != workflow.StatusAborted || end.Reason != "Too many errors" || end.Tasks[5].Status != workflow.TaskPending {
		t.Fatalf("%+v %v", end, err)
	}
}

// The seed's use case 2: several agents review each layer in parallel;
// any abort wins, then an optimization (replan), else continue.
type review func(w *workflow.Workflow) workflow.Command

type multiAgent struct{ agents []review }

func (m multiAgent) Decide(ctx context.Context, ev workflow.Event, w *workflow.Workflow) (workflow.Command, bool) {
	if ev.Type != workflow.EventDecisionRequired {
		return workflow.Command{}, false
	}
	votes := make([]workflow.Command, len(m.agents))
	var wg sync.WaitGroup
	for i, a := range m.agents {
		wg.Add(1)
		go func() { defer wg.Done(); votes[i] = a(w) }()
	}
	wg.Wait()
	var reasons []string
	for _, v := range votes {
		if v.Type == "abort" {
			reasons = append(reasons, v.Reason)
		}
	}
	if len(reasons) > 0 {
		return workflow.Command{Type: "abort", Reason: strings.Join(reasons, "; ")}, true
	}
	for _, v := range votes {
		if v.Type == "replan_dag" {
			return v, true
		}
	}
	return workflow.Command{Type: "continue"}, true
}

func TestMultiAgentConsensus(t *testing.T) {
	e := newEnv(t, nil)
	security := func(w *workflow.Workflow) workflow.Command {
		for _, t := range w.Tasks {
			if t.Status == workflow.TaskCompleted && strings.Contains(string(t.Output), "secret") {
				return workflow.Command{Type: "abort", Reason: "Security threat detected: a secret in " + t.ID}
			}
		}
		return workflow.Command{Type: "continue"}
	}
	cost := func(w *workflow.Workflow) workflow.Command {
		if w.Layer >= 3 {
			return workflow.Command{Type: "abort", Reason: "budget exceeded"}
		}
		return workflow.Command{Type: "continue"}
	}
	performance := func(w *workflow.Workflow) workflow.Command { return workflow.Command{Type: "continue"} }
	w := e.start(t, `per_layer_validation: true
tasks:
  - {id: a, tool: noop}
  - {id: b, tool: count_words, args: {text: "x y"}, depends_on: [a]}
  - {id: c, tool: noop, depends_on: [b]}
  - {id: d, tool: noop, depends_on: [c]}
`, "")
	end, err := e.eng.Follow(context.Background(), w.ID, multiAgent{[]review{security, performance, cost}})
	if err != nil || end.Status != workflow.StatusAborted || end.Reason != "budget exceeded" || end.Layer != 3 {
		t.Fatalf("%+v %v", end, err)
	}
}

// The seed's use case 3: a background workflow nobody watches; its agent
// recovers from a failed layer by replanning, and approves nothing (an
// approval is left to a human, who answers later).
func TestBackgroundAutonomous(t *testing.T) {
	e := newEnv(t, nil)
	w := e.start(t, `per_layer_validation: true
tasks:
  - {id: fetch, tool: broken}
  - {id: use, tool: noop, depends_on: [fetch]}
`, workflow.ResumeAutomatic)
	var log []string
	agent := workflow.DeciderFunc(func(_ context.Context, ev workflow.Event, w *workflow.Workflow) (workflow.Command, bool) {
		if ev.Type != workflow.EventDecisionRequired {
			log = append(log, "left "+ev.Type)
			return workflow.Command{}, false
		}
		for _, r := range ev.Results {
			if r.Status == workflow.TaskFailed && !strings.Contains(string(mustJSON(w.Tasks)), "list_files") {
				log = append(log, "replan")
				return workflow.Command{Type: "replan_dag", NewRequirement: "Recover from error: list the files of the directory instead"}, true
			}
		}
		log = append(log, "continue")
		return workflow.Command{Type: "continue"}, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan *workflow.Workflow)
	go func() {
		end, err := e.eng.Follow(ctx, w.ID, agent)
		if err != nil {
			t.Error(err)
		}
		done <- end
	}()
	end := <-done
	if end.Status != workflow.StatusCompleted || strings.Join(log, ",") != "replan,continue" {
		t.Fatalf("%s after %v: %+v", end.Status, log, end.Tasks)
	}
	if end.Tasks[1].Status != workflow.TaskSkipped || end.Tasks[2].Tool != "list_files" || end.Tasks[2].Status != workflow.TaskCompleted {
		t.Fatalf("%+v", end.Tasks)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// The seed's use case 4: an internal agent that asks an LLM directly (an
// OpenAI-compatible endpoint, through the LLM connection's client) what
// to do after each layer, and turns its answer into a command.
type llmAgent struct{ model llm.Model }

func (a llmAgent) Decide(ctx context.Context, ev workflow.Event, w *workflow.Workflow) (workflow.Command, bool) {
	if ev.Type != workflow.EventDecisionRequired {
		return workflow.Command{}, false
	}
	results, _ := json.Marshal(ev.Results)
	res, _, err := a.model.Complete(ctx, llm.Request{Messages: []agentplane.LLMMessage{
		{Role: "system", Content: "Decide what the workflow does next. Answer one line: continue | abort: REASON | replan: REQUIREMENT"},
		{Role: "user", Content: fmt.Sprintf("Layer %d results: %s", ev.Layer, results)},
	}}, nil)
	if err != nil {
		return workflow.Command{Type: "abort", Reason: "the model did not answer: " + err.Error()}, true
	}
	line := strings.TrimSpace(res.Text)
	switch verb, rest, _ := strings.Cut(line, ":"); strings.TrimSpace(verb) {
	case "abort":
		return workflow.Command{Type: "abort", Reason: strings.TrimSpace(rest)}, true
	case "replan":
		return workflow.Command{Type: "replan_dag", NewRequirement: strings.TrimSpace(rest), AvailableContext: json.RawMessage(`{"xml_files":["config.xml"]}`)}, true
	case "continue":
		return workflow.Command{Type: "continue"}, true
	}
	return workflow.Command{Type: "abort", Reason: "the model answered " + strconv.Quote(line)}, true
}

func TestLLMAgent(t *testing.T) {
	e := newEnv(t, nil)
	srv := llmtest.New(t, llmtest.Reply{Text: "replan: parse the XML files found"}, llmtest.Reply{Text: "abort: nothing left to check"})
	model := llm.NewOpenAI(llm.Settings{LLM: config.LLM{BaseURL: srv.URL, Model: "test-model", Timeout: 5 * time.Second}}, nil)
	w := e.start(t, "per_layer_validation: true\ntasks: [{id: files, tool: list_files}, {id: n, tool: noop, depends_on: [files]}]", "")
	end, err := e.eng.Follow(context.Background(), w.ID, llmAgent{model})
	if err != nil {
		t.Fatal(err)
	}
	if end.Status != workflow.StatusAborted || end.Reason != "nothing left to check" || len(end.Tasks) != 3 || end.Tasks[2].Tool != "parse_xml" {
		t.Fatalf("%+v", end)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(fmt.Sprint(reqs[0]), "config.xml") || !strings.Contains(fmt.Sprint(reqs[1]), "parse_xml_r1") {
		t.Fatalf("the model was asked %d times: %v", len(reqs), reqs)
	}
}
