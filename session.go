package agentplane

import (
	"encoding/json"
	"slices"
	"time"
)

// LocalPrincipal is the principal of the terminal and of a server with
// no API keys. It also reaches the sessions nobody owns (stored before
// sessions had owners).
const LocalPrincipal = "local"

// Session is the authoritative runtime state of one conversation: its mode,
// its active work context, and the explicit pending state the router uses on
// the next turn. Version grows by one with every change and guards
// optimistic updates.
type Session struct {
	ID string `json:"id"`
	// Owner is the principal the session belongs to: through the API,
	// only it sees and changes the session. Empty: nobody's (a session
	// stored before sessions had owners; the local principal reaches it).
	Owner string `json:"owner,omitempty"`
	// UI says the session's client renders pickers and dialogs: the
	// default of its turns' TurnInput.UI where the client does not say.
	UI                  bool                 `json:"ui,omitempty"`
	Mode                string               `json:"mode"` // mode key
	AWC                 ActiveWorkContext    `json:"awc"`
	PendingPicker       *PendingPicker       `json:"pending_picker,omitempty"`
	PendingConfirmation *PendingConfirmation `json:"pending_confirmation,omitempty"`
	Version             int64                `json:"version"`
}

// PendingPicker is a picker (or, without UI, a question listing candidates)
// the session is waiting on. Text that resolves strictly inside its source,
// or the number of one of its options, invokes CommandID.
type PendingPicker struct {
	CommandID     string         `json:"command_id"`
	Source        ResolverSource `json:"source"`
	PrefilterText string         `json:"prefilter_text,omitempty"`
	OptionIDs     []string       `json:"option_ids,omitempty"` // the numbered options of a question
	// Mode is the mode a selection runs in when it is not the session's
	// (a launcher's target mode).
	Mode      string    `json:"mode,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PendingConfirmation is a side-effecting invocation waiting for the
// human's yes or no. Its confirmation token is not part of the session:
// the human's client received it, and the store keeps only its digest.
type PendingConfirmation struct {
	CommandID  string `json:"command_id,omitempty"`
	ResolvedID string `json:"resolved_id,omitempty"`
	// Tool and Args, instead of CommandID and ResolvedID: a tool call
	// proposed by the LLM, with its canonical arguments.
	Tool     string          `json:"tool,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Question string          `json:"question"`
	// Mode is the mode the command runs in when it is not the session's
	// (a launcher's target mode).
	Mode      string    `json:"mode,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Clone returns a deep copy of the session.
func (s *Session) Clone() *Session {
	c := *s
	c.AWC = s.AWC.Clone()
	if s.PendingPicker != nil {
		p := *s.PendingPicker
		p.OptionIDs = slices.Clone(p.OptionIDs)
		c.PendingPicker = &p
	}
	if s.PendingConfirmation != nil {
		p := *s.PendingConfirmation
		p.Args = slices.Clone(p.Args)
		c.PendingConfirmation = &p
	}
	return &c
}
