package agentplane

import "encoding/json"

// Action is the kind of a router Decision.
type Action string

// The four router actions of the ACP seed.
const (
	ActionOpenPicker    Action = "open_picker"
	ActionInvokeCommand Action = "invoke_command"
	ActionAskQuestion   Action = "ask_clarifying_question"
	ActionContinueLLM   Action = "continue_with_llm"
)

// Reason codes of continue_with_llm decisions.
const (
	ReasonNoControlIntent      = "no_control_intent"     // nothing matched
	ReasonUnresolved           = "unresolved"            // a command matched but its slot resolved to nothing
	ReasonSourceUnavailable    = "source_unavailable"    // the command's catalog or provider failed
	ReasonUnknownCommand       = "unknown_command"       // a slash form named no command
	ReasonInactiveCommand      = "inactive_command"      // a slash form named a command not active here
	ReasonConfirmationDeclined = "confirmation_declined" // the human said no to a pending confirmation
	ReasonEmptyInput           = "empty_input"           // nothing but spaces and punctuation
)

// Decision is the router's single answer to a turn. Which fields are set
// depends on Action; Trace says, line by line, why.
type Decision struct {
	Action Action `json:"action"`

	// invoke_command, and ask_clarifying_question when it asks for confirmation
	CommandID  string `json:"command_id,omitempty"`
	ResolvedID string `json:"resolved_id,omitempty"`
	// Tool and Args, instead of a command: the tool call the LLM proposed
	// that a confirmation question asks about, or that the human's yes
	// runs.
	Tool string          `json:"tool,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// Confirmed is set on an invoke_command that answers a pending confirmation.
	Confirmed bool `json:"confirmed,omitempty"`
	// TargetMode, on an invoke_command, an open_picker or a question, is
	// the mode the command runs in when it is not the session's: a
	// launcher's target mode, which the session switches to when the
	// command runs.
	TargetMode string `json:"target_mode,omitempty"`

	// open_picker
	PickerType    string `json:"picker_type,omitempty"`
	CatalogID     string `json:"catalog_id,omitempty"`
	ProviderID    string `json:"provider_id,omitempty"`
	PrefilterText string `json:"prefilter_text,omitempty"`
	HighlightID   string `json:"highlight_id,omitempty"`

	// ask_clarifying_question
	QuestionText string   `json:"question_text,omitempty"`
	Options      []string `json:"options,omitempty"`
	// OptionIDs are the item ids behind Options when the question lists
	// candidates (a picker without UI); empty for a confirmation.
	OptionIDs []string `json:"option_ids,omitempty"`

	// continue_with_llm
	ReasonCode string `json:"reason_code,omitempty"`

	// Sources names the answer of each provider the decision read: the
	// source (ResolverSource.String: "provider:loans", or "catalog:tickets"
	// for a catalog an HTTP provider serves) → the answer's version,
	// "sha256:" and the SHA-256 of its items' canonical JSON. The answers
	// are kept by version in the store, and replay decides the record on
	// them. A decision that read no provider has none.
	Sources map[string]string `json:"sources,omitempty"`

	Trace []string `json:"trace"`
}

// Source returns the resolver source of an open_picker decision.
func (d *Decision) Source() ResolverSource {
	return ResolverSource{CatalogID: d.CatalogID, ProviderID: d.ProviderID}
}

// IsConfirmationQuestion reports whether the decision asks the human to
// confirm an invocation.
func (d *Decision) IsConfirmationQuestion() bool {
	return d.Action == ActionAskQuestion && (d.CommandID != "" && d.ResolvedID != "" || d.Tool != "") && len(d.OptionIDs) == 0
}
