package workflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/canonjson"
)

// Statuses of a workflow.
const (
	StatusRunning          = "running"           // a layer runs, or is about to
	StatusAwaitingApproval = "awaiting_approval" // approval_required: a human answers approval_response
	StatusAwaitingDecision = "awaiting_decision" // decision_required: continue | abort | replan_dag
	StatusInterrupted      = "interrupted"       // it was running when its runner died: checkpoint_response
	StatusCompleted        = "completed"
	StatusAborted          = "aborted"
	StatusFailed           = "failed"
)

// liveStatuses lists, quoted for SQL, every status but the terminal ones:
// what the claimable workflows' query names, as a range of its index
// (TestLiveStatuses holds it to the constants above).
const liveStatuses = `'` + StatusRunning + `', '` + StatusAwaitingApproval + `', '` + StatusAwaitingDecision + `', '` + StatusInterrupted + `'`

// Terminal reports whether a status never changes again.
func Terminal(status string) bool {
	return status == StatusCompleted || status == StatusAborted || status == StatusFailed
}

// Paused reports whether a workflow in this status waits for a command.
func Paused(status string) bool {
	return status == StatusAwaitingApproval || status == StatusAwaitingDecision || status == StatusInterrupted
}

// Statuses of a task.
const (
	TaskPending   = "pending"
	TaskRunning   = "running" // an attempt was started and has not finished (in flight)
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskSkipped   = "skipped" // a dependency failed or was skipped, or a checkpoint_response skipped it
)

// Resume policies: what a workflow that was running when its runner died
// does when another runner takes it over.
const (
	ResumeManual    = "manual"    // interrupted: it waits for checkpoint_response
	ResumeAutomatic = "automatic" // it continues from where it was
)

// Workflow is a workflow's whole state: what it runs, how far it got and
// what it waits for. It is stored as one document, changed only by the
// runner that holds the workflow's lease.
type Workflow struct {
	ID                 string    `json:"workflow_id"`
	Name               string    `json:"name,omitempty"`
	SessionID          string    `json:"session_id"`
	Principal          string    `json:"principal"`
	Roles              []string  `json:"roles,omitempty"`
	Status             string    `json:"status"`
	PerLayerValidation bool      `json:"per_layer_validation"`
	ResumePolicy       string    `json:"resume_policy"`
	MaxAttempts        int       `json:"max_attempts"`
	Layer              int       `json:"layer"` // layers started so far; the current or last one
	Tasks              []TaskRun `json:"tasks"`
	// Dropped are the ids of tasks a rollback dropped (added after the
	// checkpoint it went back to). They are spent: a task's id names its
	// attempts' request ids and its downstream idempotency key, so no task
	// added later may take one — it would be answered with what the dropped
	// task's calls were answered.
	Dropped []string `json:"dropped_tasks,omitempty"`
	// Approval is the pending approval (awaiting_approval).
	Approval *Approval `json:"approval,omitempty"`
	// Decision is the pending decision (awaiting_decision).
	Decision *DecisionRequest `json:"decision,omitempty"`
	// Interruption is what an interrupted workflow offers to resume from.
	Interruption *Interruption `json:"interruption,omitempty"`
	Reason       string        `json:"reason,omitempty"` // why it was aborted or failed
	// RequestDigest identifies what a start with an idempotency key asked
	// for: the same key with another definition is refused.
	RequestDigest string    `json:"request_digest,omitempty"`
	Seq           int64     `json:"seq"`     // its last event
	Counter       int       `json:"counter"` // ids issued: approvals and checkpoints
	Created       time.Time `json:"created"`
	Updated       time.Time `json:"updated"`

	at map[string]int // task id -> its place in Tasks (see task)
}

// TaskRun is a task with what became of it.
type TaskRun struct {
	Task
	Status   string `json:"status"`
	Layer    int    `json:"layer,omitempty"` // the layer it ran in, from 1
	Attempts int    `json:"attempts,omitempty"`
	// RequestID is the gate's request id of its latest attempt (one per
	// attempt); Key is the task's one idempotency key downstream.
	RequestID string                  `json:"request_id,omitempty"`
	Key       string                  `json:"idempotency_key,omitempty"`
	Resolved  json.RawMessage         `json:"resolved_args,omitempty"` // the arguments it ran with
	Output    json.RawMessage         `json:"output,omitempty"`
	Error     *agentplane.ResultError `json:"error,omitempty"`
	Added     string                  `json:"added,omitempty"`    // why replan_dag added it
	Approval  string                  `json:"approval,omitempty"` // the approval it runs under
	n         int                     // its row's place among the workflow's tasks (0: not yet written)
}

// Approval is a pending human approval of a layer: its own checkpoint id,
// the tasks and the arguments they will run with.
type Approval struct {
	// ID names this pause: a command answering it may name it
	// (decision_id), and a second answer is refused as answered already.
	ID           string     `json:"decision_id"`
	CheckpointID string     `json:"checkpoint_id"`
	Layer        int        `json:"layer"`
	Tasks        []TaskCall `json:"tasks"`
}

// TaskCall is a task with its resolved arguments.
type TaskCall struct {
	ID     string          `json:"id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	Impact string          `json:"impact"`
}

// DecisionRequest is a pending per-layer decision.
type DecisionRequest struct {
	// ID names this pause: continue, abort and replan_dag may name it
	// (decision_id), and a second answer is refused as answered already.
	ID      string   `json:"decision_id"`
	Layer   int      `json:"layer"`
	Options []string `json:"options"`
}

// Interruption is where an interrupted workflow can resume from: the
// newest checkpoint, and every one kept.
type Interruption struct {
	// ID names this pause, as Approval.ID does.
	ID           string   `json:"decision_id"`
	CheckpointID string   `json:"checkpoint_id"`
	Checkpoints  []string `json:"checkpoints"`
	InFlight     []string `json:"in_flight,omitempty"` // tasks running when the runner died
}

// Checkpoint is the state saved after a layer (and at the start); the
// journal keeps the workflow as it was then (restore).
type Checkpoint struct {
	ID      string    `json:"checkpoint_id"`
	Layer   int       `json:"layer"`
	Created time.Time `json:"created"`
	n       int       // order within the workflow
	w       *Workflow // what it keeps, when not the workflow as written with it
}

// KeepCheckpoints is how many checkpoints a workflow keeps: older ones are
// deleted in the transaction that saves a new one.
const KeepCheckpoints = 5

// Event types.
const (
	EventStarted          = "workflow_started"
	EventLayerStarted     = "layer_started"
	EventTaskCompleted    = "task_completed"
	EventTaskFailed       = "task_failed"
	EventTaskSkipped      = "task_skipped"
	EventLayerComplete    = "layer_complete"
	EventDecisionRequired = "decision_required"
	EventApprovalRequired = "approval_required"
	EventCheckpointSaved  = "checkpoint_saved"
	EventReplanned        = "replanned"
	EventInterrupted      = "interrupted"
	EventResumed          = "resumed"
	EventCommandRejected  = "command_rejected"
	EventCompleted        = "completed"
	EventAborted          = "aborted"
	EventFailed           = "failed"
)

// Event is one stored step of a workflow, numbered from 1 per workflow.
type Event struct {
	Seq          int64                   `json:"seq"`
	Type         string                  `json:"type"`
	WorkflowID   string                  `json:"workflow_id"`
	Time         time.Time               `json:"time"`
	Layer        int                     `json:"layer,omitempty"`
	Task         string                  `json:"task,omitempty"`
	Tool         string                  `json:"tool,omitempty"`
	Attempts     int                     `json:"attempts,omitempty"`
	Output       json.RawMessage         `json:"output,omitempty"`
	Error        *agentplane.ResultError `json:"error,omitempty"`
	Tasks        []TaskCall              `json:"tasks,omitempty"`   // approval_required, layer_started, replanned
	Results      []TaskResult            `json:"results,omitempty"` // layer_complete, decision_required
	CheckpointID string                  `json:"checkpoint_id,omitempty"`
	DecisionID   string                  `json:"decision_id,omitempty"` // the pause an event begins (approval_required, decision_required, interrupted) or a command answered
	Options      []string                `json:"options,omitempty"`     // decision_required
	Reason       string                  `json:"reason,omitempty"`
	Command      *Command                `json:"command,omitempty"` // command_rejected, resumed
	Status       string                  `json:"status,omitempty"`  // the workflow's status after the event
}

// Command types: the seed's four control commands and checkpoint_response.
const (
	CommandContinue           = "continue"
	CommandAbort              = "abort"
	CommandReplan             = "replan_dag"
	CommandApprovalResponse   = "approval_response"
	CommandCheckpointResponse = "checkpoint_response"
)

// checkpoint_response decisions.
const (
	ResumeContinue = "continue"
	ResumeRollback = "rollback"
	ResumeModify   = "modify"
)

// Command is a control command for a workflow. Commands are queued per
// workflow and processed one at a time, in order.
//
// A command answers one pause (a decision, an approval, an interruption):
// the one DecisionID names or, without it, the one pending when the
// engine received it. A pause is answered once: a command for a pause
// answered already is refused (already_answered) and changes nothing.
type Command struct {
	Type string `json:"type"`
	// DecisionID is the pause the command answers (the decision_id of
	// the workflow's decision, approval or interruption).
	DecisionID string `json:"decision_id,omitempty"`
	// RequestID is the command's idempotency key: the same command sent
	// again under it gets the first one's answer and is not applied
	// again; another command under it is a request_conflict. Not part of
	// the body: it comes from the Idempotency-Key header (HTTP) or the
	// request id in _meta (MCP).
	RequestID string `json:"-"`
	// abort (required), continue (optional)
	Reason string `json:"reason,omitempty"`
	// replan_dag
	NewRequirement   string          `json:"new_requirement,omitempty"`
	AvailableContext json.RawMessage `json:"available_context,omitempty"`
	// approval_response and checkpoint_response
	CheckpointID string `json:"checkpoint_id,omitempty"`
	Approved     *bool  `json:"approved,omitempty"`
	Feedback     string `json:"feedback,omitempty"`
	// checkpoint_response
	Decision      string         `json:"decision,omitempty"`
	Modifications *Modifications `json:"modifications,omitempty"`
}

// Modifications change an interrupted workflow before it resumes
// (checkpoint_response with decision modify): new arguments for tasks
// that have not run, and tasks to skip.
type Modifications struct {
	Args map[string]map[string]any `json:"args,omitempty"`
	Skip []string                  `json:"skip,omitempty"`
}

// Limits of commands.
const (
	MaxIDBytes          = 255 // decision_id and the request id
	MaxReasonBytes      = 4096
	MaxRequirementBytes = 4096
	MaxContextBytes     = 64 << 10
)

// Check reports what is wrong with the command's fields for its type.
func (c *Command) Check() error {
	bad := func(format string, args ...any) error {
		return agentplane.Errorf(agentplane.CodeInvalidInput, "command %s: "+format, append([]any{c.Type}, args...)...)
	}
	if len(c.Reason) > MaxReasonBytes || len(c.Feedback) > MaxReasonBytes {
		return bad("reason and feedback are at most %d bytes", MaxReasonBytes)
	}
	if len(c.DecisionID) > MaxIDBytes || len(c.RequestID) > MaxIDBytes {
		return bad("decision_id and the request id are at most %d bytes", MaxIDBytes)
	}
	switch c.Type {
	case CommandContinue:
	case CommandAbort:
		if strings.TrimSpace(c.Reason) == "" {
			return bad("reason is required")
		}
	case CommandReplan:
		switch {
		case strings.TrimSpace(c.NewRequirement) == "":
			return bad("new_requirement is required")
		case len(c.NewRequirement) > MaxRequirementBytes:
			return bad("new_requirement is at most %d bytes", MaxRequirementBytes)
		case len(c.AvailableContext) > MaxContextBytes:
			return bad("available_context is at most %d bytes", MaxContextBytes)
		case len(c.AvailableContext) > 0 && !isObject(c.AvailableContext):
			return bad("available_context must be a JSON object")
		}
		if len(c.AvailableContext) > 0 {
			if err := canonjson.Check(c.AvailableContext); err != nil {
				return bad("available_context: %v", err)
			}
		}
	case CommandApprovalResponse:
		switch {
		case c.CheckpointID == "":
			return bad("checkpoint_id is required")
		case c.Approved == nil:
			return bad("approved is required (true or false)")
		}
	case CommandCheckpointResponse:
		switch {
		case c.CheckpointID == "":
			return bad("checkpoint_id is required")
		case c.Decision != ResumeContinue && c.Decision != ResumeRollback && c.Decision != ResumeModify:
			return bad("decision %q: want continue, rollback or modify", c.Decision)
		case c.Decision == ResumeModify && c.Modifications == nil:
			return bad("modify needs modifications {args: {task: {...}}, skip: [task]}")
		case c.Decision != ResumeModify && c.Modifications != nil:
			return bad("modifications go with decision modify only")
		}
		if c.Modifications != nil {
			for task, args := range c.Modifications.Args {
				raw, err := json.Marshal(args)
				if err == nil {
					err = canonjson.Check(raw)
				}
				if err != nil {
					return bad("modifications.args.%s: %v", task, err)
				}
			}
		}
	case "":
		return agentplane.Errorf(agentplane.CodeInvalidInput, "command: type is required: continue, abort, replan_dag, approval_response or checkpoint_response")
	default:
		return agentplane.Errorf(agentplane.CodeInvalidInput, "command: type %q: want continue, abort, replan_dag, approval_response or checkpoint_response", c.Type)
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// pause returns the id of the pause the workflow waits at ("" when it
// waits for no command: running or finished).
func (w *Workflow) pause() string {
	switch {
	case w.Status == StatusAwaitingDecision && w.Decision != nil:
		return w.Decision.ID
	case w.Status == StatusAwaitingApproval && w.Approval != nil:
		return w.Approval.ID
	case w.Status == StatusInterrupted && w.Interruption != nil:
		return w.Interruption.ID
	}
	return ""
}

// task returns the task run with the id, or nil. Its index of places is
// checked at each use and built again when the tasks moved.
func (w *Workflow) task(id string) *TaskRun {
	if i, ok := w.at[id]; ok && i < len(w.Tasks) && w.Tasks[i].ID == id {
		return &w.Tasks[i]
	}
	at := make(map[string]int, len(w.Tasks)) // a new one: copies share the old
	for i := range w.Tasks {
		at[w.Tasks[i].ID] = i
	}
	w.at = at
	if i, ok := at[id]; ok {
		return &w.Tasks[i]
	}
	return nil
}

// nextID issues the workflow's next approval or checkpoint id.
func (w *Workflow) nextID(kind string) string {
	w.Counter++
	return w.ID + "-" + kind + strconv.Itoa(w.Counter)
}

// copy returns a copy that later changes of w do not reach: the runner
// changes a workflow's and its tasks' fields by replacing them, never
// what they point to. The copy shares w's index of task places, which
// task checks at each use and replaces, never changes.
func (w *Workflow) copy() *Workflow {
	c := *w
	c.Tasks = slices.Clone(w.Tasks)
	return &c
}

func unmarshalWorkflow(b []byte) (*Workflow, error) {
	var w Workflow
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("workflow: a stored workflow is corrupt: %w", err)
	}
	return &w, nil
}

// skipBlocked marks skipped every pending task with a failed or skipped
// dependency, transitively, and returns them in task order.
func (w *Workflow) skipBlocked() []*TaskRun {
	var out []*TaskRun
	for changed := true; changed; {
		changed = false
		for i := range w.Tasks {
			t := &w.Tasks[i]
			if t.Status != TaskPending {
				continue
			}
			for _, d := range t.DependsOn {
				if dt := w.task(d); dt != nil && (dt.Status == TaskFailed || dt.Status == TaskSkipped) {
					t.Status = TaskSkipped
					t.Error = &agentplane.ResultError{Code: "dependency_failed", Detail: fmt.Sprintf("dependency %s %s", d, dt.Status)}
					out = append(out, t)
					changed = true
					break
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *TaskRun) int { return w.index(a.ID) - w.index(b.ID) })
	return out
}

func (w *Workflow) index(id string) int {
	return slices.IndexFunc(w.Tasks, func(t TaskRun) bool { return t.ID == id })
}

// ready returns the next layer: the pending tasks whose dependencies all
// completed, in task order.
func (w *Workflow) ready() []*TaskRun {
	var out []*TaskRun
	for i := range w.Tasks {
		t := &w.Tasks[i]
		if t.Status != TaskPending {
			continue
		}
		ok := true
		for _, d := range t.DependsOn {
			if dt := w.task(d); dt == nil || dt.Status != TaskCompleted {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, t)
		}
	}
	return out
}

// running returns the tasks in flight.
func (w *Workflow) running() []*TaskRun {
	var out []*TaskRun
	for i := range w.Tasks {
		if w.Tasks[i].Status == TaskRunning {
			out = append(out, &w.Tasks[i])
		}
	}
	return out
}
