package agentplane

// InvocationContext is what a tool is told about a call besides its
// arguments, in one shape for every kind of tool: who asks and with which
// roles, from which front end, in which session and mode, on which active
// item (as of the snapshot the call was decided on), the call's keys, and
// how it was authorised. A tool's input schema stays about its arguments.
//
// Go tools read it from tool.CallInfo; HTTP tools get it in the request
// body beside "args" ("context"; the idempotency key also as the
// Idempotency-Key header); tools mounted from MCP servers get it in the
// call's _meta under MetaContextKey. Its JSON Schema is published as
// docs/schemas/invocation_context.schema.json.
type InvocationContext struct {
	Principal ContextPrincipal `json:"principal"`
	// Origin is who asked the gate: user, api, llm, mcp, workflow or
	// agent_internal.
	Origin    string `json:"origin"`
	SessionID string `json:"session_id"`
	// Mode is the mode the call runs in (a launcher's target mode when it
	// switches to one).
	Mode string `json:"mode"`
	// ActiveWorkContext is the session's active item and its related
	// entities when the call was decided on.
	ActiveWorkContext ActiveWorkContext `json:"active_work_context"`
	// SnapshotVersion is the session version the call was decided on.
	SnapshotVersion int64 `json:"snapshot_version"`
	// RequestID is the call's request id within the session and for the
	// principal: the caller's, or one the gate made (starting with "~gate-")
	// when the caller sent none.
	RequestID string `json:"request_id,omitempty"`
	// IdempotencyKey is what a downstream service dedups the call by: 32
	// hex digits derived from the principal, the session and the request
	// (its request id, or a workflow task's one key for all its
	// attempts). A retried request gets the same key; two principals' or
	// two sessions' calls never share one, whatever ids their clients or
	// models sent.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Authorization says why the call may run.
	Authorization Authorization `json:"authorization"`
}

// ContextPrincipal is who a call acts for.
type ContextPrincipal struct {
	UserID string   `json:"user_id"`
	Roles  []string `json:"roles"`
}

// How a call was authorised (Authorization.Kind).
const (
	// AuthorizedByHuman: the human confirmed exactly this call (a
	// confirmation token, or "yes" to the pending question).
	AuthorizedByHuman = "human_confirmation"
	// AuthorizedByApproval: the human approved the workflow layer holding
	// this call (Authorization.Approval names the approval).
	AuthorizedByApproval = "workflow_approval"
	// AuthorizedByPolicy: the confirmation policy asks for no confirmation
	// (a read, or the human asked for it directly).
	AuthorizedByPolicy = "policy"
)

// Authorization is how a call came to be allowed to run.
type Authorization struct {
	Kind string `json:"kind"` // AuthorizedByHuman, AuthorizedByApproval or AuthorizedByPolicy
	// Approval is the workflow approval's id (it names its workflow), for
	// AuthorizedByApproval.
	Approval string `json:"approval,omitempty"`
}

// MetaContextKey is the _meta key under which tools mounted from MCP
// servers receive the invocation context.
const MetaContextKey = "agentplane/context"
