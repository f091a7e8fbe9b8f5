package agentplane

import (
	"fmt"
	"time"
)

// StateSnapshot is the chat control protocol's read-only view of a
// session's state. Published as docs/schemas/state_snapshot.schema.json.
type StateSnapshot struct {
	SnapshotID          string               `json:"snapshot_id"`
	SessionID           string               `json:"session_id"`
	Version             int64                `json:"version"`
	Mode                string               `json:"mode"`
	AWC                 ActiveWorkContext    `json:"awc"`
	PendingPicker       *PendingPicker       `json:"pending_picker,omitempty"`
	PendingConfirmation *PendingConfirmation `json:"pending_confirmation,omitempty"`
	TakenAt             time.Time            `json:"taken_at"`
}

// SnapshotID names the state of a session at a version: "ID@VERSION".
func SnapshotID(sessionID string, version int64) string {
	return fmt.Sprintf("%s@%d", sessionID, version)
}

// Snapshot returns the session's state as a protocol snapshot taken at now.
func (s *Session) Snapshot(now time.Time) StateSnapshot {
	c := s.Clone()
	return StateSnapshot{
		SnapshotID: SnapshotID(s.ID, s.Version), SessionID: s.ID, Version: s.Version,
		Mode: c.Mode, AWC: c.AWC, PendingPicker: c.PendingPicker, PendingConfirmation: c.PendingConfirmation,
		TakenAt: now.UTC(),
	}
}
