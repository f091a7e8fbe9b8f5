package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
)

// chatWithLLM runs the chat with an LLM endpoint from the environment.
func chatWithLLM(t *testing.T, srv *llmtest.Server, stdin string) (string, string, int) {
	t.Helper()
	return runEnv(t, map[string]string{"AGENTPLANE_LLM_BASE_URL": srv.URL, "AGENTPLANE_LLM_MODEL": "test-model"}, stdin, "chat", "--mode", "sales")
}

// The chat streams the model's text, shows what its calls did, and asks
// the human to confirm an external action the model proposed; "yes" runs
// it once.
func TestChatWithLLM(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Reply{Text: "Here is a sharper draft for the CFO."},
		llmtest.Reply{Text: "Sending it now.", ToolCalls: []llmtest.Call{{Name: "send_template", Arguments: `{"list_id":"LIST-9"}`}}},
	)
	out, errOut, code := chatWithLLM(t, srv, "open the q1 cfo outreach template\nrewrite this template for the CFO persona\nplease mail it to the pilot group\nyes\n")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"… Here is a sharper draft for the CFO.",
		"… Sending it now.",
		"? Confirm send_template with {\"list_id\":\"LIST-9\"}?\n  (yes / no)",
		"✓ send_template done.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("transcript lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// An endpoint that does not serve the model is a warning at start.
func TestChatLLMProblemsAtStart(t *testing.T) {
	srv := llmtest.New(t)
	srv.Models = []string{"other-model"}
	_, errOut, code := chatWithLLM(t, srv, "")
	if code != 0 || !strings.Contains(errOut, `does not serve model "test-model" (it serves other-model)`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// validate checks the LLM endpoint the environment configures: its key
// variable, whether it answers, whether it serves the model.
func TestValidateChecksTheLLM(t *testing.T) {
	srv := llmtest.New(t)
	run := func(env map[string]string) (string, int) {
		out, _, code := runEnv(t, env, "", "validate")
		return out, code
	}
	out, code := run(map[string]string{"AGENTPLANE_LLM_BASE_URL": srv.URL, "AGENTPLANE_LLM_MODEL": "test-model"})
	if code != 0 || !strings.Contains(out, "serves test-model") {
		t.Fatalf("%d %s", code, out)
	}
	out, code = run(map[string]string{"AGENTPLANE_LLM_BASE_URL": srv.URL, "AGENTPLANE_LLM_MODEL": "gpt-9"})
	if code != 1 || !strings.Contains(out, `does not serve model "gpt-9"`) {
		t.Fatalf("%d %s", code, out)
	}
	out, code = run(map[string]string{"AGENTPLANE_LLM_BASE_URL": "http://127.0.0.1:1/v1", "AGENTPLANE_LLM_MODEL": "m"})
	if code != 1 || !strings.Contains(out, "127.0.0.1:1") {
		t.Fatalf("%d %s", code, out)
	}
	out, code = run(map[string]string{"AGENTPLANE_LLM_BASE_URL": srv.URL})
	if code != 1 || !strings.Contains(out, "set both AGENTPLANE_LLM_BASE_URL and AGENTPLANE_LLM_MODEL") {
		t.Fatalf("%d %s", code, out)
	}
}

// agentplane notify sends, lists, shows, acknowledges and lists dead
// letters in the database's ledger; bad input is named.
func TestNotifyCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "n.db")
	run := func(args ...string) (string, string, int) {
		return runEnv(t, map[string]string{"AGENTPLANE_DB": db}, "", append([]string{"notify"}, args...)...)
	}
	out, errOut, code := run("send", "--user", "alice", "--title", "Invoice ready")
	if code != 0 || !strings.Contains(out, `"channel": "A"`) || !strings.Contains(out, `"state": "PENDING"`) {
		t.Fatalf("%d %s %s", code, out, errOut)
	}
	var sent struct{ ID string }
	json.Unmarshal([]byte(out), &sent)
	if out, _, code := run("list", "--user", "alice"); code != 0 || !strings.Contains(out, sent.ID) {
		t.Fatalf("%d %s", code, out)
	}
	// listed here, not on a stream: its owner acknowledges it all the same
	if _, errOut, code := run("ack", sent.ID, "--user", "bob"); code != 1 || !strings.Contains(errOut, "no such notification") {
		t.Fatalf("bob acked alice's: %d %s", code, errOut)
	}
	if out, errOut, code := run("ack", sent.ID, "--user", "alice"); code != 0 || !strings.Contains(out, `"state": "DELIVERED"`) {
		t.Fatalf("acking a PENDING notification: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := run("ack", sent.ID, "--user", "alice"); code != 1 || !strings.Contains(errOut, "DELIVERED") {
		t.Fatalf("a second ack: %d %s", code, errOut)
	}
	if _, errOut, code := run("send", "--user", "alice", "--title", "x", "--address", "SESSION"); code != 1 || !strings.Contains(errOut, "session_id: missing") {
		t.Fatalf("%d %s", code, errOut)
	}
	if _, errOut, code := run("show", "nope"); code != 1 || !strings.Contains(errOut, "no such notification") {
		t.Fatalf("%d %s", code, errOut)
	}
	if out, _, code := run("dead"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("%d %s", code, out)
	}
}

// agentplane workflow validate: valid, or every problem with its line.
func TestWorkflowValidate(t *testing.T) {
	out, _, code := run(t, "", "workflow", "validate", "../../examples/workflows/outreach.yaml")
	if code != 0 || !strings.Contains(out, "valid (4 tasks in 3 layers)") {
		t.Fatalf("%d %s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("tasks:\n  - {id: a, tool: nope, depends_on: [b]}\n  - {id: b, tool: catalog_search, depends_on: [a]}\n"), 0o644)
	out, _, code = run(t, "", "workflow", "validate", bad)
	if code != 1 || !strings.Contains(out, `bad.yaml:2: tasks[0].tool: unknown tool "nope"`) || !strings.Contains(out, "a cycle: a → b → a") {
		t.Fatalf("%d %s", code, out)
	}
}

// An LLM that fails in the chat gives the person at once the
// notifications the agent held for them, as an HTTP turn does: both take
// the one conversation step (plane.Runtime.Step). The chat had its own
// copy, which never told the bus: the alert waited for its TTL.
func TestChatAgentFailureReachesTheBus(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "a.db")
	srv := llmtest.New(t)
	srv.Respond = func(map[string]any) llmtest.Reply {
		return llmtest.Reply{Status: 503, Body: `{"error":{"message":"overloaded"}}`}
	}
	env := map[string]string{"AGENTPLANE_LLM_BASE_URL": srv.URL, "AGENTPLANE_LLM_MODEL": "test-model", "AGENTPLANE_DB": db}
	open := func() *plane.Runtime { // with the agent: its notifications wait for its next prompt
		t.Helper()
		rt, err := plane.Open(ctx, plane.Options{Config: core.Source{YAML: demo.YAML, Name: demo.Name}, DB: db, OpenStore: drivers.Open, Core: core.Options{Programs: demo.Programs(nil)},
			LLM: true, Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	rt := open()
	e, err := rt.Bus.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: principal, Target: notify.TargetAgent,
		Handler: notify.HandlerSystem, Title: "build failed", TTLSeconds: 600}, 0)
	rt.Close(time.Second)
	if err != nil || e.Channel != notify.ChannelAgent {
		t.Fatalf("%+v %v", e, err)
	}
	out, errOut, code := runEnv(t, env, "tell me a joke about databases\n", "chat")
	if code != 0 || !strings.Contains(out, "! ") {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	rt = open()
	defer rt.Close(time.Second)
	n, err := rt.Ledger.Get(ctx, e.ID)
	if err != nil || n.State != notify.StateEscalated || n.Channel != notify.ChannelInbox {
		t.Fatalf("after the LLM failed in the chat: %+v %v\n%s", n, err, out)
	}
}
