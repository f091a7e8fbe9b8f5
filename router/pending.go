package router

import (
	"time"

	"github.com/agentplane/agentplane"
)

// Pending returns the pending picker and pending confirmation a session
// holds after decision d, taken at now, given the pending state prev had:
//
//   - open_picker, or a question listing candidates: a pending picker
//     (expiring after the configured picker TTL) and no confirmation;
//   - a confirmation question: a pending confirmation and no picker;
//   - invoke_command: neither (the pick or the confirmation is used up);
//   - continue_with_llm: no confirmation (anything but yes/no drops it), and
//     prev's picker while it has not expired.
//
// It is a pure function; the gate applies its result.
func (r *Registry) Pending(prev *agentplane.Session, d *agentplane.Decision, now time.Time) (*agentplane.PendingPicker, *agentplane.PendingConfirmation) {
	switch d.Action {
	case agentplane.ActionOpenPicker:
		return &agentplane.PendingPicker{CommandID: d.CommandID, Source: d.Source(), PrefilterText: d.PrefilterText,
			ExpiresAt: now.Add(r.settings.PickerTTL)}, nil
	case agentplane.ActionAskQuestion:
		if d.IsConfirmationQuestion() {
			return nil, &agentplane.PendingConfirmation{CommandID: d.CommandID, ResolvedID: d.ResolvedID,
				Question:  d.QuestionText,
				ExpiresAt: now.Add(r.settings.ConfirmationTTL)}
		}
		cmd, _ := r.Command(d.CommandID)
		var src agentplane.ResolverSource
		if cmd != nil {
			src = cmd.Source
		}
		return &agentplane.PendingPicker{CommandID: d.CommandID, Source: src,
			OptionIDs: append([]string(nil), d.OptionIDs...), ExpiresAt: now.Add(r.settings.PickerTTL)}, nil
	case agentplane.ActionContinueLLM:
		if prev != nil && prev.PendingPicker != nil && now.Before(prev.PendingPicker.ExpiresAt) {
			p := *prev.PendingPicker
			return &p, nil
		}
	}
	return nil, nil
}
