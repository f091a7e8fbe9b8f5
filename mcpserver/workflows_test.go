package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/workflow"
)

func newWorkflowEnv(t *testing.T) *env {
	t.Helper()
	out := demo.NewOutbox(nil)
	rt := demotest.Runtime(t, plane.Options{DB: filepath.Join(t.TempDir(), "m.db"), Core: core.Options{Programs: out.Programs()},
		Workflows: workflow.Options{Poll: 20 * time.Millisecond}})
	s := mcpserver.New(rt, nil)
	t.Cleanup(s.Close) // after the HTTP server's, before the runtime's
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &env{core: rt.Core, outbox: out, url: hs.URL, srv: s}
}

func progressCall(t *testing.T, cs *mcp.ClientSession, name, args string) mcpserver.Progress {
	t.Helper()
	res, text := call(t, cs, name, args)
	return progressOf(t, res, text)
}

func progressOf(t *testing.T, res *mcp.CallToolResult, text string) mcpserver.Progress {
	t.Helper()
	if res.IsError {
		t.Fatal(text)
	}
	var p mcpserver.Progress
	if err := json.Unmarshal([]byte(text), &p); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return p
}

// The seed's external agent flow, over MCP with the go-sdk client: start
// with per-layer validation, then, while a layer is complete, replan when
// something is missing, else continue; finally the results.
func TestExternalAgentLoop(t *testing.T) {
	e := newWorkflowEnv(t)
	cs, _ := e.connect(t, nil)
	got := names(t, cs)
	for _, n := range []string{"workflow_execute", "workflow_continue", "workflow_abort", "workflow_replan_dag", "workflow_approval_response", "workflow_checkpoint_response", "workflow_status"} {
		if !strings.Contains(strings.Join(got, ","), n) {
			t.Fatalf("%s not listed: %v", n, got)
		}
	}
	p := progressCall(t, cs, "workflow_execute", `{"per_layer_validation": true, "tasks": [
		{"id": "templates", "tool": "catalog_search", "args": {"catalog_id": "email_templates", "query": "pilot"}},
		{"id": "context", "tool": "agent_get_context", "depends_on": ["templates"]}]}`)
	var steps []string
	replanned := false
	for p.Status == workflow.StatusAwaitingDecision {
		if len(p.LayerResults) == 0 || p.LayerResults[0].Status != workflow.TaskCompleted {
			t.Fatalf("layer results: %+v", p)
		}
		if !replanned && p.Layer == 1 {
			replanned = true
			steps = append(steps, "replan")
			p = progressCall(t, cs, "workflow_replan_dag", `{"workflow_id": "`+p.WorkflowID+`", "new_requirement": "search the catalog of modes as well",
				"available_context": {"catalog_id": "modes", "query": "sales"}}`)
			continue
		}
		steps = append(steps, "continue")
		p = progressCall(t, cs, "workflow_continue", `{"workflow_id": "`+p.WorkflowID+`"}`)
	}
	if p.Status != workflow.StatusCompleted || strings.Join(steps, ",") != "replan,continue" || len(p.Results) != 3 {
		t.Fatalf("%s after %v: %+v", p.Status, steps, p)
	}
	if !strings.Contains(string(p.Results["catalog_search_r1"]), `"id":"sales"`) {
		t.Fatalf("the replanned search found %s", p.Results["catalog_search_r1"])
	}
	// status, and an abort of a finished workflow is refused
	st := progressCall(t, cs, "workflow_status", `{"workflow_id": "`+p.WorkflowID+`"}`)
	if st.Status != workflow.StatusCompleted {
		t.Fatalf("%+v", st)
	}
	res, text := call(t, cs, "workflow_abort", `{"workflow_id": "`+p.WorkflowID+`", "reason": "late"}`)
	if !res.IsError || !strings.Contains(text, "invalid_state") {
		t.Fatalf("%v %s", res.IsError, text)
	}
}

// An approval through MCP is the human's: without elicitation it is
// refused; with it, the human's yes lets the layer run.
func TestApprovalThroughMCPAsksTheHuman(t *testing.T) {
	e := newWorkflowEnv(t)
	send := `{"tasks": [
		{"id": "mode", "tool": "agent_set_mode", "args": {"mode": "sales"}},
		{"id": "tpl", "tool": "agent_set_active_entity", "args": {"catalog_id": "email_templates", "id": "TPL-123"}, "depends_on": ["mode"]},
		{"id": "send", "tool": "send_template", "args": {"list_id": "LIST-9"}, "depends_on": ["tpl"]}]}`
	for _, human := range []bool{false, true} {
		opts := &mcp.ClientOptions{}
		if human {
			opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				if !strings.Contains(req.Params.Message, "send_template") {
					t.Errorf("the human is asked %q", req.Params.Message)
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
		}
		cs, _ := e.connect(t, opts)
		p := progressCall(t, cs, "workflow_execute", send)
		if p.Status != workflow.StatusAwaitingApproval || p.Approval == nil {
			t.Fatalf("%+v", p)
		}
		res, text := call(t, cs, "workflow_approval_response", `{"workflow_id": "`+p.WorkflowID+`", "checkpoint_id": "`+p.Approval.CheckpointID+`", "approved": true}`)
		if !human {
			if !res.IsError || !strings.Contains(text, "the human's decision") || len(e.outbox.Sends()) != 0 {
				t.Fatalf("approved without the human: %s", text)
			}
			continue
		}
		p = progressOf(t, res, text)
		if p.Status != workflow.StatusCompleted || len(e.outbox.Sends()) != 1 {
			t.Fatalf("%+v; %d sends", p, len(e.outbox.Sends()))
		}
	}
}
