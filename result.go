package agentplane

import "encoding/json"

// Status is the outcome of an attempted action.
type Status string

// Statuses of the chat control protocol.
const (
	StatusSuccess              Status = "success"
	StatusRejected             Status = "rejected"              // the request was wrong or not allowed; nothing ran
	StatusFailed               Status = "failed"                // the tool ran and failed, or could not run
	StatusConfirmationRequired Status = "confirmation_required" // the human must confirm first; nothing ran
)

// ExecutionResult is the chat control protocol's answer to an intent: what
// happened, why, what the tool returned, and how the state changed.
// Published as docs/schemas/execution_result.schema.json.
type ExecutionResult struct {
	Status  Status       `json:"status"`
	Message string       `json:"message"`
	Error   *ResultError `json:"error,omitempty"`
	// Tool is the tool that ran or would run.
	Tool string `json:"tool,omitempty"`
	// Output is the tool's output, when it ran.
	Output json.RawMessage `json:"output,omitempty"`
	// StateDiff is an RFC 6902 JSON Patch from the state before to the
	// state after; empty when nothing changed.
	StateDiff []PatchOp `json:"state_diff"`
	// SnapshotID names the state snapshot after the action.
	SnapshotID string `json:"snapshot_id,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	// ConfirmationToken comes with a confirmation_required result, and only
	// on the human's channel (origin user or api): re-issuing the same
	// invocation with it confirms it.
	ConfirmationToken string `json:"confirmation_token,omitempty"`

	// Session is the session after the action, for the caller; it is not
	// part of the wire form.
	Session *Session `json:"-"`
	// Seq is the sequence number of the action's audit record in the
	// session (its event id), for the caller; 0 when none was written.
	Seq int64 `json:"-"`
}

// ResultError says why an action was rejected or failed.
type ResultError struct {
	Code   string `json:"code"` // one of the Code* constants
	Detail string `json:"detail"`
}

// PatchOp is one RFC 6902 JSON Patch operation.
type PatchOp struct {
	Op    string          `json:"op"` // add | remove | replace | move | copy | test
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}
