package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/workflow"
)

const outreach = `{"session_id": %q, "name": "pilot outreach", "wait": true, "tasks": [
  {"id": "tpl", "tool": "agent_set_active_entity", "args": {"catalog_id": "email_templates", "id": "TPL-123"}},
  {"id": "find", "tool": "catalog_search", "args": {"catalog_id": "mailer_lists", "query": "q1 pilot"}},
  {"id": "send", "tool": "send_template", "args": {"list_id": "${find.output.items.0.id}"}, "depends_on": ["tpl", "find"]}]}`

// A workflow over HTTP: started, paused for the human's approval of the
// external send with its resolved arguments, approved by id, finished;
// its events streamed with resume.
func TestWorkflowsThroughTheAPI(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", map[string]any{"mode": "sales"})
	var created httpapi.WorkflowCreated
	if st := e.call("POST", "/v1/workflows", "", strings.Replace(outreach, "%q", strconv.Quote(s.SessionID), 1), &created); st != http.StatusCreated {
		t.Fatalf("%d %+v", st, created)
	}
	w := created.Workflow
	if w.Status != workflow.StatusAwaitingApproval || len(w.Approval.Tasks) != 1 || string(w.Approval.Tasks[0].Args) != `{"list_id":"LIST-9"}` {
		t.Fatalf("%+v", w)
	}
	var errBody httpapi.ErrorBody
	st := e.call("POST", "/v1/workflows/"+w.ID+"/commands", "", map[string]any{"type": "approval_response", "checkpoint_id": "other", "approved": true}, &errBody)
	errCode(t, st, errBody, http.StatusConflict, "invalid_state")
	var ans httpapi.CommandAnswer
	if st := e.call("POST", "/v1/workflows/"+w.ID+"/commands?wait=true", "", map[string]any{"type": "approval_response", "checkpoint_id": w.Approval.CheckpointID, "approved": true}, &ans); st != http.StatusOK {
		t.Fatalf("%d", st)
	}
	if ans.Workflow.Status != workflow.StatusCompleted || len(e.outbox.Sends()) != 1 {
		t.Fatalf("%+v; %d sends", ans.Workflow, len(e.outbox.Sends()))
	}
	// the same approval again: refused (the workflow has ended)
	st = e.call("POST", "/v1/workflows/"+w.ID+"/commands", "", map[string]any{"type": "approval_response", "checkpoint_id": w.Approval.CheckpointID, "approved": true}, &errBody)
	errCode(t, st, errBody, http.StatusConflict, "invalid_state")
	var view map[string]any
	if st := e.call("GET", "/v1/workflows/"+w.ID, "", nil, &view); st != http.StatusOK || len(view["checkpoints"].([]any)) != 3 {
		t.Fatalf("%d %v", st, view["checkpoints"])
	}
	var list struct{ Workflows []workflow.Workflow }
	if e.call("GET", "/v1/workflows", "", nil, &list); len(list.Workflows) != 1 {
		t.Fatalf("%+v", list)
	}
	// the event stream, from the start and resumed after the 5th
	all := workflowEvents(t, e, w.ID, "")
	if len(all) != int(ans.Workflow.Seq)+1 || all[len(all)-1].kind != "closed" {
		t.Fatalf("%d events for seq %d", len(all), ans.Workflow.Seq)
	}
	if after := workflowEvents(t, e, w.ID, strconv.FormatInt(ans.Workflow.Seq, 10)); len(after) != 1 || after[0].kind != "closed" {
		t.Fatalf("resumed after the last event: %+v", after) // the stream ends at once
	}
	rest := workflowEvents(t, e, w.ID, "5")
	if len(rest) != len(all)-5 || rest[0].id != 6 {
		t.Fatalf("resumed: %d events from %d", len(rest), rest[0].id)
	}
	for _, ev := range all[:len(all)-1] {
		var data workflow.Event
		if err := json.Unmarshal([]byte(ev.data), &data); err != nil || data.Type != ev.kind || data.Seq != ev.id {
			t.Fatalf("%+v: %v", ev, err)
		}
		if data.Type == workflow.EventApprovalRequired && data.CheckpointID == "" {
			t.Fatal("approval_required without its checkpoint_id")
		}
	}
}

func workflowEvents(t *testing.T, e *env, id, last string) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/workflows/"+id+"/events", nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return readSSE(t, resp.Body, 1000)
}

func TestWorkflowBadInput(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	for _, c := range []struct {
		body   string
		status int
		code   string
		msg    string
	}{
		{`{"session_id": "` + s.SessionID + `", "tasks": [{"id": "a", "tool": "nope"}]}`, 400, "invalid_input", `unknown tool "nope"`},
		{`{"session_id": "` + s.SessionID + `", "tasks": [{"id": "a", "tool": "catalog_search", "depends_on": ["b"]}, {"id": "b", "tool": "catalog_search", "depends_on": ["a"]}]}`, 400, "invalid_input", "a cycle: a → b → a"},
		{`{"session_id": "` + s.SessionID + `", "tasks": [{"id": "a", "tool": "catalog_search", "args": {"q": "${b.output}"}}, {"id": "b", "tool": "catalog_search"}]}`, 400, "invalid_input", "not among this task's depends_on"},
		{`{"session_id": "` + s.SessionID + `", "tasks": [{"id": "a", "tool": "catalog_search", "extra": 1}]}`, 400, "invalid_input", "extra"},
		{`{"session_id": "nope", "tasks": [{"id": "a", "tool": "catalog_search"}]}`, 404, "not_found", "nope"},
		{`{"tasks": []}`, 400, "invalid_input", "session_id"},
	} {
		var body httpapi.ErrorBody
		st := e.call("POST", "/v1/workflows", "", c.body, &body)
		errCode(t, st, body, c.status, c.code)
		if !strings.Contains(body.Error.Message, c.msg) {
			t.Errorf("%s: %q does not say %q", c.body, body.Error.Message, c.msg)
		}
	}
	var body httpapi.ErrorBody
	st := e.call("POST", "/v1/workflows/wf_nope/commands", "", `{"type": "continue"}`, &body)
	errCode(t, st, body, 404, "not_found")
	var list struct{ Workflows []workflow.Workflow }
	if e.call("GET", "/v1/workflows", "", nil, &list); len(list.Workflows) != 0 {
		t.Fatalf("bad input created %+v", list)
	}
}

// A start retried with its Idempotency-Key answers with the workflow the
// first one started; the key for another workflow is a conflict.
func TestWorkflowStartIsIdempotent(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	body := `{"session_id": "` + s.SessionID + `", "tasks": [{"id": "a", "tool": "catalog_search", "args": {"catalog_id": "email_templates", "query": "pilot"}}]}`
	var first, again httpapi.WorkflowCreated
	if st := e.call("POST", "/v1/workflows", "", body, &first, "Idempotency-Key", "start-1"); st != http.StatusCreated {
		t.Fatalf("%d", st)
	}
	if st := e.call("POST", "/v1/workflows", "", body, &again, "Idempotency-Key", "start-1"); st != http.StatusCreated || again.WorkflowID != first.WorkflowID {
		t.Fatalf("%d: %s then %s", st, first.WorkflowID, again.WorkflowID)
	}
	var errBody httpapi.ErrorBody
	other := strings.Replace(body, `"pilot"`, `"cfo"`, 1)
	st := e.call("POST", "/v1/workflows", "", other, &errBody, "Idempotency-Key", "start-1")
	errCode(t, st, errBody, http.StatusConflict, "request_conflict")
	var list struct{ Workflows []workflow.Workflow }
	if e.call("GET", "/v1/workflows", "", nil, &list); len(list.Workflows) != 1 {
		t.Fatalf("%d workflows", len(list.Workflows))
	}
}
