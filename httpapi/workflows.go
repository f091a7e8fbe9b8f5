package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/workflow"
)

// WorkflowBody starts a workflow: POST /v1/workflows.
type WorkflowBody struct {
	SessionID          string          `json:"session_id"`
	Name               string          `json:"name,omitempty"`
	Tasks              []workflow.Task `json:"tasks"`
	PerLayerValidation bool            `json:"per_layer_validation,omitempty"`
	ResumePolicy       string          `json:"resume_policy,omitempty"`
	MaxAttempts        int             `json:"max_attempts,omitempty"`
	// Wait answers when the workflow first pauses or ends, instead of at
	// once.
	Wait bool `json:"wait,omitempty"`
}

// WorkflowCreated answers POST /v1/workflows.
type WorkflowCreated struct {
	WorkflowID string             `json:"workflow_id"`
	Status     string             `json:"status"`
	Workflow   *workflow.Workflow `json:"workflow"`
}

// WorkflowView is a workflow with the checkpoints it keeps.
type WorkflowView struct {
	*workflow.Workflow
	Checkpoints []workflow.Checkpoint `json:"checkpoints"`
}

// CommandAnswer answers POST /v1/workflows/{id}/commands: the command's
// place in the queue, that it was applied, and the workflow after it (or,
// with ?wait=true, at its next pause or end).
type CommandAnswer struct {
	Seq      int64              `json:"seq"`
	Status   string             `json:"status"`
	Workflow *workflow.Workflow `json:"workflow"`
}

// maxWait bounds how long a request waits for a workflow to pause.
const maxWait = 5 * time.Minute

func (s *Server) createWorkflow(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var body WorkflowBody
	if err := decode(r, &body, false); err != nil {
		return err
	}
	if body.SessionID == "" {
		return invalid("field \"session_id\" is required: the session the workflow's tasks run in")
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	def := &workflow.Definition{Name: body.Name, PerLayerValidation: body.PerLayerValidation, Tasks: body.Tasks}
	wf, err := s.workflows.Start(r.Context(), workflow.Start{SessionID: body.SessionID, Principal: p.ID, Roles: p.Roles, Definition: def,
		ResumePolicy: body.ResumePolicy, MaxAttempts: body.MaxAttempts, RequestID: key})
	if err != nil {
		return err
	}
	if body.Wait {
		ctx, cancel := context.WithTimeout(r.Context(), maxWait)
		defer cancel()
		if wf, err = s.workflows.Wait(ctx, wf.ID, p.ID, 0); err != nil {
			return err
		}
	}
	w.Header().Set("Location", "/v1/workflows/"+wf.ID)
	writeJSON(w, http.StatusCreated, WorkflowCreated{WorkflowID: wf.ID, Status: wf.Status, Workflow: wf})
	return nil
}

func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	limit, err := limitParam(r, 0, 500)
	if err != nil {
		return err
	}
	list, err := s.workflows.List(r.Context(), p.ID, limit)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*workflow.Workflow{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"workflows": list})
	return nil
}

// workflow returns the principal's workflow named in the path.
func (s *Server) workflow(r *http.Request, p auth.Principal) (*workflow.Workflow, error) {
	id := r.PathValue("id")
	if len(id) > 128 {
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "no workflow %q", truncate(id, 40))
	}
	return s.workflows.Get(r.Context(), id, p.ID)
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wf, err := s.workflow(r, p)
	if err != nil {
		return err
	}
	cps, err := s.workflows.Checkpoints(r.Context(), wf.ID)
	if err != nil {
		return err
	}
	if cps == nil {
		cps = []workflow.Checkpoint{}
	}
	writeJSON(w, http.StatusOK, WorkflowView{Workflow: wf, Checkpoints: cps})
	return nil
}

// postCommand queues a command and answers once it is processed: 200
// when applied, 409 invalid_state with the reason when the workflow's
// state refused it, 409 already_answered when the decision it answers
// (decision_id, or the one pending as the request came) was answered by
// another command (nothing changed either way). Under an Idempotency-Key
// it is applied once: sent again, it gets the first one's answer.
func (s *Server) postCommand(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wf, err := s.workflow(r, p)
	if err != nil {
		return err
	}
	var cmd workflow.Command
	if err := decode(r, &cmd, false); err != nil {
		return err
	}
	wait, err := boolParam(r, "wait")
	if err != nil {
		return err
	}
	if cmd.RequestID, err = idempotencyKey(r); err != nil {
		return err
	}
	var seq int64
	if !wait { // the workflow as the command left it
		seq, wf, err = s.workflows.CommandResult(r.Context(), wf.ID, p.ID, cmd)
	} else if seq, err = s.workflows.Command(r.Context(), wf.ID, p.ID, cmd); err == nil { // the next change after it
		ctx, cancel := context.WithTimeout(r.Context(), maxWait)
		defer cancel()
		wf, err = s.workflows.Wait(ctx, wf.ID, p.ID, wf.Seq)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, CommandAnswer{Seq: seq, Status: workflow.CommandApplied, Workflow: wf})
	return nil
}

// getWorkflowEvents serves the workflow's events as Server-Sent Events:
// id is the event's seq, event its type, data its JSON. It starts after
// Last-Event-ID (or ?after=), follows new events, and ends with a
// "closed" event once the workflow has ended and everything was sent, or
// when the server drains.
func (s *Server) getWorkflowEvents(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wf, err := s.workflow(r, p)
	if err != nil {
		return err
	}
	after, err := resumePoint(r)
	if err != nil {
		return err
	}
	release, err := s.limits.holdStream(p)
	if err != nil {
		return err
	}
	defer release()
	sink, done := s.openSSE(w)
	defer done()
	st := &events.Stream{Feed: &workflowFeed{j: s.workflows, wf: wf, stop: s.drained, why: &s.drainReason, log: s.log}, Sink: sink, After: after, Heartbeat: s.heartbeat}
	st.Run(r.Context())
	return nil
}
