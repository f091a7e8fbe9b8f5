package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store"
)

// Decided is a recorded decision's outcome: the session after it, and the
// confirmation token a confirmation question issued (for the human's
// client only; empty otherwise).
type Decided struct {
	Session           *agentplane.Session
	ConfirmationToken string
	Seq               int64 // the decision's audit record
}

// RecordDecision records a router decision that invoked nothing: its audit
// record, and the pending state it implies (see Pending). A confirmation
// question gets a confirmation token, bound to the version the session has
// once the question is pending; the human's "yes" confirms it in a turn,
// an API client with the token. base is the session the router decided
// on; when the session changed since, the decision is not recorded and the
// error has code version_conflict. A turn with a request id records it
// (with no result); when the id was answered meanwhile, the error is
// store.ErrRequestDone.
func (g *Gate) RecordDecision(ctx context.Context, base *agentplane.Session, principal string, t Turn) (Decided, error) {
	now := t.Input.Now
	if now.IsZero() {
		now = g.now()
	}
	picker, confirm := g.Pending(base, &t.Decision, now)
	c := &store.Commit{SessionID: base.ID}
	state := base
	var token string
	if !equalPicker(picker, base.PendingPicker) || !equalConfirm(confirm, base.PendingConfirmation) {
		next := base.Clone()
		next.PendingPicker, next.PendingConfirmation = picker, confirm
		next.Version++
		if confirm != nil {
			token = g.newToken()
			action, bound := confirm.CommandID, binding(confirm.ResolvedID, confirm.Mode)
			if confirm.Tool != "" {
				action, bound = confirm.Tool, string(confirm.Args)
			}
			c.Issue = &store.Confirmation{Digest: Digest(token), SessionID: base.ID, Action: action,
				Binding: bound, Version: next.Version, ExpiresAt: confirm.ExpiresAt, Pending: true}
		}
		c.Session, state = next, next
	}
	in, d := t.Input, t.Decision
	c.Record = &audit.Record{Session: base.ID, Time: now.UTC(), Kind: audit.KindTurn, Config: g.config, Principal: principal, Base: base.Version,
		Input: &in, Decision: &d, State: state}
	if c.Issue != nil {
		c.Record.Issued = c.Issue.Digest
	}
	if t.RequestID != "" {
		c.Request = &store.Request{Key: store.RequestKey{SessionID: base.ID, Principal: principal, RequestID: t.RequestID},
			Digest: TurnDigest(t.Input), ClaimedAt: now}
	}
	if err := g.store.Commit(ctx, c); err != nil {
		if errors.Is(err, store.ErrRequestDone) {
			return Decided{}, err // the same turn, answered meanwhile
		}
		if agentplane.ErrorCode(err) == agentplane.CodeVersionConflict {
			return Decided{}, agentplane.Errorf(agentplane.CodeVersionConflict, "session %s changed while this turn was routed; send it again", base.ID)
		}
		return Decided{}, fmt.Errorf("gate: record decision on session %s: %w", base.ID, err)
	}
	if c.Session == nil {
		state = c.Record.State // as stored when the record was committed
	}
	return Decided{Session: state, ConfirmationToken: token, Seq: c.Record.Seq}, nil
}

// Pending returns the pending picker and pending confirmation a session
// holds after decision d, taken at now, given the pending state prev had:
//
//   - open_picker, or a question listing candidates: a pending picker
//     (expiring after the configured picker TTL) and no confirmation;
//   - a confirmation question: a pending confirmation and no picker;
//   - a question naming two commands (no command of its own): nothing;
//   - invoke_command: neither (the pick or the confirmation is used up);
//   - continue_with_llm: nothing pending — no confirmation (anything but
//     yes/no drops it), no question (a question answered with anything
//     but one of its options is over: nothing runs from it later), and no
//     picker: the conversation has left the list, and a later "1" or name
//     must not act on it (a pick made on the page is a selection, which
//     needs no pending picker).
//
// It is a pure function; RecordDecision applies its result.
func (g *Gate) Pending(prev *agentplane.Session, d *agentplane.Decision, now time.Time) (*agentplane.PendingPicker, *agentplane.PendingConfirmation) {
	settings := g.reg.Settings()
	switch d.Action {
	case agentplane.ActionOpenPicker:
		return &agentplane.PendingPicker{CommandID: d.CommandID, Source: d.Source(), PrefilterText: d.PrefilterText,
			Mode: d.TargetMode, ExpiresAt: now.Add(settings.PickerTTL)}, nil
	case agentplane.ActionAskQuestion:
		if d.IsConfirmationQuestion() {
			return nil, &agentplane.PendingConfirmation{CommandID: d.CommandID, ResolvedID: d.ResolvedID, Tool: d.Tool, Args: slices.Clone(d.Args),
				Question: d.QuestionText, Mode: d.TargetMode, ExpiresAt: now.Add(settings.ConfirmationTTL)}
		}
		if d.CommandID == "" {
			return nil, nil // a question naming two commands: the answer is routed afresh
		}
		var src agentplane.ResolverSource
		if cmd, ok := g.reg.Command(d.CommandID); ok {
			src = cmd.Source
		}
		return &agentplane.PendingPicker{CommandID: d.CommandID, Source: src,
			OptionIDs: slices.Clone(d.OptionIDs), Mode: d.TargetMode, ExpiresAt: now.Add(settings.PickerTTL)}, nil
	}
	return nil, nil
}

// Opening asks for a new session.
type Opening struct {
	SessionID string
	Mode      string // the default mode when empty
	Principal string // who opens it, recorded
	Owner     string // whom it belongs to (see agentplane.Session.Owner)
	UI        bool   // its client renders pickers and dialogs (see agentplane.Session.UI)
}

// Open creates a session in the given mode (the default mode when empty).
func (g *Gate) Open(ctx context.Context, o Opening) (*agentplane.Session, error) {
	mode := o.Mode
	if mode == "" {
		mode = g.reg.DefaultMode()
	}
	if _, ok := g.reg.Mode(mode); !ok {
		return nil, agentplane.Errorf(agentplane.CodeInvalidArgs, "unknown mode %q", mode)
	}
	s := &agentplane.Session{ID: o.SessionID, Owner: o.Owner, UI: o.UI, Mode: mode, Version: 1}
	c := &store.Commit{SessionID: o.SessionID, Session: s, Record: &audit.Record{Session: o.SessionID, Time: g.now().UTC(), Kind: audit.KindOpen, Config: g.config,
		Principal: o.Principal, State: s}}
	if err := g.store.Commit(ctx, c); err != nil {
		return nil, fmt.Errorf("gate: create session %s: %w", o.SessionID, err)
	}
	return s, nil
}

// Resume loads a stored session and fits it to the configuration, which may
// have changed since it was stored: a mode the configuration no longer has
// becomes the default mode, and pending state for commands it no longer
// has is dropped. A change is committed and recorded (kind resume, with a
// note of each change), and the notes are returned for the human.
func (g *Gate) Resume(ctx context.Context, id, principal string) (*agentplane.Session, []string, error) {
	sess, err := g.store.Session(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	next := sess.Clone()
	var notes []string
	if _, ok := g.reg.Mode(next.Mode); !ok {
		notes = append(notes, fmt.Sprintf("mode %q is no longer configured; the session continues in the default mode %q", next.Mode, g.reg.DefaultMode()))
		next.Mode = g.reg.DefaultMode()
	}
	if p := next.PendingPicker; p != nil {
		if _, ok := g.reg.Command(p.CommandID); !ok {
			notes = append(notes, fmt.Sprintf("the pending picker of command %q, no longer configured, was dropped", p.CommandID))
			next.PendingPicker = nil
		}
	}
	if p := next.PendingConfirmation; p != nil {
		if _, ok := g.reg.Command(p.CommandID); !ok && p.Tool == "" {
			notes = append(notes, fmt.Sprintf("the pending confirmation of command %q, no longer configured, was dropped", p.CommandID))
			next.PendingConfirmation = nil
		}
	}
	if len(notes) == 0 {
		return sess, nil, nil
	}
	if p := next.PendingConfirmation; p != nil {
		// it was asked of the session as it was: ask again
		notes = append(notes, fmt.Sprintf("the pending confirmation (%s) was dropped: the session changed; ask again", p.Question))
		next.PendingConfirmation = nil
	}
	next.Version++
	c := &store.Commit{SessionID: id, Session: next, Record: &audit.Record{Session: id, Time: g.now().UTC(), Kind: audit.KindResume, Config: g.config,
		Principal: principal, Base: sess.Version, State: next, Notes: notes}}
	if err := g.store.Commit(ctx, c); err != nil {
		return nil, nil, fmt.Errorf("gate: resume session %s: %w", id, err)
	}
	return next, notes, nil
}

func equalPicker(a, b *agentplane.PendingPicker) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.CommandID == b.CommandID && a.Source == b.Source && a.PrefilterText == b.PrefilterText &&
		slices.Equal(a.OptionIDs, b.OptionIDs) && a.Mode == b.Mode && a.ExpiresAt.Equal(b.ExpiresAt)
}

func equalConfirm(a, b *agentplane.PendingConfirmation) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.CommandID == b.CommandID && a.ResolvedID == b.ResolvedID && a.Tool == b.Tool && canonical(a.Args) == canonical(b.Args) &&
		a.Question == b.Question && a.Mode == b.Mode && a.ExpiresAt.Equal(b.ExpiresAt)
}

// Propose makes a tool call the LLM proposed, which needs the human's
// confirmation, the session's pending confirmation: the question goes to
// the human with a token bound to exactly that call (the human's "yes" in
// a turn, or the token from a confirm button, runs it once); the model is
// never given the token. args must be the call's canonical arguments
// (tool.Registry.Validate). The record (kind proposal) holds the call as
// an intent of origin llm and the question as a decision.
func (g *Gate) Propose(ctx context.Context, base *agentplane.Session, principal, toolName string, args json.RawMessage, question string) (Decided, error) {
	now := g.now()
	d := agentplane.Decision{Action: agentplane.ActionAskQuestion, Tool: toolName, Args: args, QuestionText: question,
		Options: []string{"yes", "no"}, Trace: []string{fmt.Sprintf("the LLM proposed %s(%s), which needs the human's confirmation", toolName, args)}}
	_, confirm := g.Pending(base, &d, now)
	next := base.Clone()
	next.PendingPicker, next.PendingConfirmation = nil, confirm
	next.Version++
	token := g.newToken()
	c := &store.Commit{SessionID: base.ID, Session: next,
		Issue: &store.Confirmation{Digest: Digest(token), SessionID: base.ID, Action: toolName, Binding: string(args),
			Version: next.Version, ExpiresAt: confirm.ExpiresAt, Pending: true}}
	c.Record = &audit.Record{Session: base.ID, Time: now.UTC(), Kind: audit.KindProposal, Config: g.config, Principal: principal, Base: base.Version,
		Intent:   &agentplane.Intent{Type: agentplane.IntentActionCall, Action: toolName, Args: args, Origin: string(OriginLLM)},
		Decision: &d, State: next, Issued: c.Issue.Digest}
	if err := g.store.Commit(ctx, c); err != nil {
		if agentplane.ErrorCode(err) == agentplane.CodeVersionConflict {
			return Decided{}, agentplane.Errorf(agentplane.CodeVersionConflict, "session %s changed while the LLM's proposal was made", base.ID)
		}
		return Decided{}, fmt.Errorf("gate: record proposal on session %s: %w", base.ID, err)
	}
	return Decided{Session: next, ConfirmationToken: token, Seq: c.Record.Seq}, nil
}

// RecordExchange appends an exchange with the LLM to the session's audit
// chain, with the principal's roles (which decided the tools offered); it
// changes no state.
func (g *Gate) RecordExchange(ctx context.Context, sessionID, principal string, roles []string, ex *agentplane.LLMExchange) (int64, error) {
	c := &store.Commit{SessionID: sessionID, Record: &audit.Record{Session: sessionID, Time: g.now().UTC(), Kind: audit.KindLLM, Config: g.config,
		Principal: principal, Roles: slices.Clone(roles), LLM: ex}}
	if err := g.store.Commit(ctx, c); err != nil {
		return 0, fmt.Errorf("gate: record LLM exchange on session %s: %w", sessionID, err)
	}
	return c.Record.Seq, nil
}

// RecordNotice puts a notification on the session's conversation floor:
// a record in its chain, so it reaches the session's streams and history
// in order with the turns (before the agent's next turn). It changes no
// state.
func (g *Gate) RecordNotice(ctx context.Context, sessionID string, n *agentplane.Notice) (int64, error) {
	c := &store.Commit{SessionID: sessionID, Record: &audit.Record{Session: sessionID, Time: g.now().UTC(), Kind: audit.KindNotice, Notice: n}}
	if err := g.store.Commit(ctx, c); err != nil {
		return 0, fmt.Errorf("gate: record notice on session %s: %w", sessionID, err)
	}
	return c.Record.Seq, nil
}
