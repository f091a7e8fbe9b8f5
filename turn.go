package agentplane

import "time"

// MaxInputBytes is the longest text a turn may carry.
const MaxInputBytes = 4096

// TurnInput is what a user turn brings to the router.
type TurnInput struct {
	Text      string     `json:"text"`
	Selection *Selection `json:"selection,omitempty"` // a pick from a picker or an option button
	UI        bool       `json:"ui"`                  // the client can render pickers and dialogs
	Roles     []string   `json:"roles,omitempty"`     // the principal's roles
	Now       time.Time  `json:"-"`                   // the turn's time, injected for exact replay
}

// Selection is a structured choice: the command to invoke and the item id.
type Selection struct {
	CommandID string `json:"command_id"`
	ID        string `json:"id"`
}
