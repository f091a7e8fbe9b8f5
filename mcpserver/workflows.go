package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/workflow"
)

// The workflow meta-tools (the seed's pml:execute_workflow, pml:continue,
// … — MCP tool names cannot hold ":"): request/response control of
// workflows for external agents, which cannot follow an event stream.
// Each runs the workflow to its next pause (a decision, an approval, an
// interruption) or its end and answers with where it stands.
const (
	ToolWorkflowExecute            = "workflow_execute"
	ToolWorkflowContinue           = "workflow_continue"
	ToolWorkflowAbort              = "workflow_abort"
	ToolWorkflowReplan             = "workflow_replan_dag"
	ToolWorkflowApprovalResponse   = "workflow_approval_response"
	ToolWorkflowCheckpointResponse = "workflow_checkpoint_response"
	ToolWorkflowStatus             = "workflow_status"
)

// ApproverRole is the role an agent needs to approve a workflow's layer
// through MCP without asking the human (an authorized agent); other
// clients' approvals are put to the human by elicitation.
const ApproverRole = "workflow_approver"

// Progress is what a workflow meta-tool answers: the workflow's status,
// the results of its latest layer, and what it waits for.
type Progress struct {
	WorkflowID   string                     `json:"workflow_id"`
	Status       string                     `json:"status"`
	Layer        int                        `json:"layer"`
	LayerResults []workflow.TaskResult      `json:"layer_results"`
	Approval     *workflow.Approval         `json:"approval,omitempty"`
	Decision     *workflow.DecisionRequest  `json:"decision,omitempty"`
	Interruption *workflow.Interruption     `json:"interruption,omitempty"`
	Reason       string                     `json:"reason,omitempty"`
	Results      map[string]json.RawMessage `json:"results,omitempty"` // every completed task's output, when it has ended
}

func progress(w *workflow.Workflow) Progress {
	p := Progress{WorkflowID: w.ID, Status: w.Status, Layer: w.Layer, LayerResults: []workflow.TaskResult{}, Approval: w.Approval,
		Decision: w.Decision, Interruption: w.Interruption, Reason: w.Reason}
	for _, t := range w.Tasks {
		if t.Layer == w.Layer && w.Layer > 0 {
			p.LayerResults = append(p.LayerResults, workflow.TaskResult{ID: t.ID, Tool: t.Tool, Status: t.Status, Output: t.Output, Error: t.Error})
		}
	}
	if workflow.Terminal(w.Status) {
		p.Results = map[string]json.RawMessage{}
		for _, t := range w.Tasks {
			if t.Status == workflow.TaskCompleted {
				p.Results[t.ID] = t.Output
			}
		}
	}
	return p
}

// waitLimit bounds how long a meta-tool waits for the next pause.
const waitLimit = 5 * time.Minute

var workflowID = `"workflow_id":{"type":"string","description":"The workflow's id, from workflow_execute."}`

// decisionID names the pause a command answers: a pause is answered once.
var decisionID = `"decision_id":{"type":"string","description":"The decision_id of the decision, approval or interruption this answers (from workflow_status); ` +
	`without it, the one pending now. A pause answered already refuses the call (already_answered)."}`

// addWorkflowTools registers the meta-tools on a bound MCP server.
func (b *binding) addWorkflowTools(eng *workflow.Engine) {
	task := `{"type":"object","required":["id","tool"],"additionalProperties":false,"properties":{"id":{"type":"string"},"tool":{"type":"string"},` +
		`"args":{"type":"object","description":"The tool's arguments; a string ${task_id.output.path} takes a dependency's output."},"depends_on":{"type":"array","items":{"type":"string"}}}}`
	tools := []struct {
		name, desc, schema string
		run                func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*workflow.Workflow, error)
	}{
		{ToolWorkflowExecute, "Start a workflow — tool calls in dependency layers, run through agentplane's gate in this session — and run it to its first pause " +
			"(a decision after a layer with per_layer_validation, a human approval before an external action) or its end. Returns workflow_id, status and the latest layer's results.",
			`{"type":"object","required":["tasks"],"properties":{"name":{"type":"string"},"tasks":{"type":"array","minItems":1,"items":` + task + `},` +
				`"per_layer_validation":{"type":"boolean","description":"Pause after each layer for continue, abort or replan."},` +
				`"resume_policy":{"enum":["manual","automatic"]},"max_attempts":{"type":"integer","minimum":1,"maximum":10}}}`,
			func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (*workflow.Workflow, error) {
				var in struct {
					Name               string          `json:"name"`
					Tasks              []workflow.Task `json:"tasks"`
					PerLayerValidation bool            `json:"per_layer_validation"`
					ResumePolicy       string          `json:"resume_policy"`
					MaxAttempts        int             `json:"max_attempts"`
				}
				if err := strict(args, &in); err != nil {
					return nil, err
				}
				session, err := b.open(ctx)
				if err != nil {
					return nil, err
				}
				w, err := eng.Start(ctx, workflow.Start{SessionID: session, Principal: b.p.ID, Roles: b.p.Roles,
					Definition:   &workflow.Definition{Name: in.Name, PerLayerValidation: in.PerLayerValidation, Tasks: in.Tasks},
					ResumePolicy: in.ResumePolicy, MaxAttempts: in.MaxAttempts})
				if err != nil {
					return nil, err
				}
				return eng.Wait(ctx, w.ID, b.p.ID, 0)
			}},
		{ToolWorkflowContinue, "Continue a workflow waiting for a decision, to its next pause or end.",
			`{"type":"object","required":["workflow_id"],"properties":{` + workflowID + `,` + decisionID + `,"reason":{"type":"string"}}}`,
			b.command(eng, workflow.CommandContinue)},
		{ToolWorkflowAbort, "Abort a workflow, with the reason.",
			`{"type":"object","required":["workflow_id","reason"],"properties":{` + workflowID + `,` + decisionID + `,"reason":{"type":"string","minLength":1}}}`,
			b.command(eng, workflow.CommandAbort)},
		{ToolWorkflowReplan, "Add tasks to a workflow waiting for a decision: agentplane picks the tool whose usage fits the requirement (ranked by how tools were used together before), " +
			"taking its arguments from available_context, then runs on to the next pause.",
			`{"type":"object","required":["workflow_id","new_requirement"],"properties":{` + workflowID + `,` + decisionID + `,"new_requirement":{"type":"string","minLength":1},` +
				`"available_context":{"type":"object","description":"What you found; its members fill the new task's arguments by name."}}}`,
			b.command(eng, workflow.CommandReplan)},
		{ToolWorkflowApprovalResponse, "Answer a workflow's approval request (its checkpoint_id) before a layer that acts on the world. " +
			"Approving is the human's decision: agentplane asks the user to confirm it unless this client's principal is an authorized approver.",
			`{"type":"object","required":["workflow_id","checkpoint_id","approved"],"properties":{` + workflowID + `,` + decisionID + `,"checkpoint_id":{"type":"string"},` +
				`"approved":{"type":"boolean"},"feedback":{"type":"string"}}}`,
			b.command(eng, workflow.CommandApprovalResponse)},
		{ToolWorkflowCheckpointResponse, "Resume a workflow interrupted by a crash: continue from where it was, rollback to one of its checkpoints, or modify tasks that have not run.",
			`{"type":"object","required":["workflow_id","checkpoint_id","decision"],"properties":{` + workflowID + `,` + decisionID + `,"checkpoint_id":{"type":"string"},` +
				`"decision":{"enum":["continue","rollback","modify"]},"modifications":{"type":"object","properties":{"args":{"type":"object"},"skip":{"type":"array","items":{"type":"string"}}}}}}`,
			b.command(eng, workflow.CommandCheckpointResponse)},
		{ToolWorkflowStatus, "Where a workflow stands: status, latest layer's results, what it waits for.",
			`{"type":"object","required":["workflow_id"],"properties":{` + workflowID + `}}`,
			func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (*workflow.Workflow, error) {
				var in struct {
					WorkflowID string `json:"workflow_id"`
				}
				if err := strict(args, &in); err != nil {
					return nil, err
				}
				return eng.Get(ctx, in.WorkflowID, b.p.ID)
			}},
	}
	for _, t := range tools {
		run := t.run
		// status only reads; abort changes agentplane's state only, and
		// twice is once; the rest run the workflow on, whose tasks may act
		// on the world (its external layers wait for the human's approval)
		ann := annotations(tool.ImpactExternal, false)
		switch t.name {
		case ToolWorkflowStatus:
			ann = annotations(tool.ImpactRead, true)
		case ToolWorkflowAbort:
			ann = annotations(tool.ImpactInternal, true)
		}
		b.srv.AddTool(&mcp.Tool{Name: t.name, Description: t.desc, InputSchema: json.RawMessage(t.schema), Annotations: ann},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args := req.Params.Arguments
				if len(args) == 0 || string(args) == "null" {
					args = json.RawMessage(`{}`)
				}
				ctx, cancel := context.WithTimeout(ctx, waitLimit)
				defer cancel()
				w, err := run(ctx, req, args)
				if err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: errText(err)}}}, nil
				}
				p := progress(w)
				data, _ := json.Marshal(p)
				var obj map[string]any
				json.Unmarshal(data, &obj)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}, StructuredContent: obj}, nil
			})
	}
}

// command is a meta-tool that queues a command of type typ and runs the
// workflow to its next pause or end.
func (b *binding) command(eng *workflow.Engine, typ string) func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*workflow.Workflow, error) {
	return func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*workflow.Workflow, error) {
		var in struct {
			WorkflowID string `json:"workflow_id"`
			workflow.Command
		}
		if err := strict(args, &in); err != nil {
			return nil, err
		}
		in.Command.Type = typ
		if id, ok := req.Params.Meta[RequestIDKey].(string); ok {
			if err := checkRequestID(id); err != nil {
				return nil, err
			}
			in.Command.RequestID = id // sent again, it gets the first one's answer
		}
		w, err := eng.Get(ctx, in.WorkflowID, b.p.ID)
		if err != nil {
			return nil, err
		}
		if typ == workflow.CommandApprovalResponse && in.Approved != nil && *in.Approved && !slices.Contains(b.p.Roles, ApproverRole) {
			if err := b.approve(ctx, req, w, in.CheckpointID); err != nil {
				return nil, err
			}
		}
		if _, err := eng.Command(ctx, w.ID, b.p.ID, in.Command); err != nil {
			return nil, err
		}
		return eng.Wait(ctx, w.ID, b.p.ID, w.Seq)
	}
}

// approve puts a model's approval to the human by elicitation: only a yes
// there lets it through.
func (b *binding) approve(ctx context.Context, req *mcp.CallToolRequest, w *workflow.Workflow, checkpoint string) error {
	must := agentplane.Errorf(agentplane.CodeConfirmationRequired,
		"not approved: approving %s of workflow %s is the human's decision; ask the user to approve it in agentplane (or answer through a principal with the %s role)",
		checkpoint, w.ID, ApproverRole)
	params := req.Session.InitializeParams()
	if params == nil || params.Capabilities == nil || params.Capabilities.Elicitation == nil || w.Approval == nil || w.Approval.CheckpointID != checkpoint {
		return must
	}
	calls, _ := json.MarshalIndent(w.Approval.Tasks, "", "  ")
	answer, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
		Message:         fmt.Sprintf("Approve layer %d of workflow %s? It runs:\n%s", w.Approval.Layer, w.ID, calls),
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve?","description":"Yes runs these calls once."}},"required":["approve"]}`),
	})
	if err != nil || answer.Action != "accept" || answer.Content["approve"] != true {
		return agentplane.Errorf(agentplane.CodeConfirmationRequired, "not approved: the human did not approve %s", checkpoint)
	}
	return nil
}

// strict decodes a meta-tool's arguments, refusing unknown members.
func strict(args json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return agentplane.Errorf(agentplane.CodeInvalidArgs, "arguments: %v", err)
	}
	return nil
}

func errText(err error) string {
	if code := agentplane.ErrorCode(err); code != "" {
		return code + ": " + err.Error()
	}
	return err.Error()
}
