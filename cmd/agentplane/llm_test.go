package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/llmtest"
)

// chatWithLLM runs the chat with an LLM endpoint from the environment.
func chatWithLLM(t *testing.T, srv *llmtest.Server, stdin string, env map[string]string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	db := filepath.Join(t.TempDir(), "agentplane.db")
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
		switch k {
		case "AGENTPLANE_DB":
			return db
		case "AGENTPLANE_LLM_BASE_URL":
			return srv.URL
		case "AGENTPLANE_LLM_MODEL":
			return "test-model"
		}
		return env[k]
	}}
	code := m.Run(context.Background(), []string{"chat", "--mode", "sales"})
	return out.String(), errOut.String(), code
}

// The chat streams the model's text, shows what its calls did, and asks
// the human to confirm an external action the model proposed; "yes" runs
// it once.
func TestChatWithLLM(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Reply{Text: "Here is a sharper draft for the CFO."},
		llmtest.Reply{Text: "Sending it now.", ToolCalls: []llmtest.Call{{Name: "send_template", Arguments: `{"list_id":"LIST-9"}`}}},
	)
	out, errOut, code := chatWithLLM(t, srv, "open the q1 cfo outreach template\nrewrite this template for the CFO persona\nplease mail it to the pilot group\nyes\n", nil)
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
	_, errOut, code := chatWithLLM(t, srv, "", nil)
	if code != 0 || !strings.Contains(errOut, `does not serve model "test-model" (it serves other-model)`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
