package agentplane

import "encoding/json"

// IntentType is the kind of an Intent.
type IntentType string

// Intent types of the chat control protocol.
const (
	IntentActionCall           IntentType = "action_call"
	IntentClarificationRequest IntentType = "clarification_request" // mutates nothing
)

// Intent is a structured request to perform an action, or to ask the human
// a clarifying question. Published as docs/schemas/intent.schema.json.
type Intent struct {
	Type IntentType `json:"type"`
	// Action is a command id or a tool name (action_call).
	Action string `json:"action,omitempty"`
	// Args are the action's arguments: for a command, one member named
	// after its parameter holding the resolved id.
	Args json.RawMessage `json:"args,omitempty"`
	// Question is the question to ask (clarification_request).
	Question  string `json:"question,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Origin    string `json:"origin,omitempty"` // user | llm | mcp | workflow | agent_internal | api
	// Mode, on an action_call of a command, is the mode it runs in when
	// that is not the session's: the target mode of a launcher active in
	// the session's mode that selects this command (see Decision.TargetMode).
	Mode string `json:"mode,omitempty"`
	// ConfirmationToken confirms an action that needed confirmation; only
	// the human's channel ever holds one.
	ConfirmationToken string `json:"confirmation_token,omitempty"`
}
