package core

import (
	"context"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
)

// Start asks for a new session.
type Start struct {
	Mode      string // the default mode when empty
	Principal string
}

// Start opens a new session with a new id.
func (c *Core) Start(ctx context.Context, s Start) (*agentplane.Session, error) {
	return c.gate.Open(ctx, gate.Opening{SessionID: c.newID(), Mode: s.Mode, Principal: s.Principal})
}

// Resume loads a stored session for a principal to continue, fitted to
// the configuration (see gate.Resume); the notes say what was changed.
func (c *Core) Resume(ctx context.Context, sessionID, principal string) (*agentplane.Session, []string, error) {
	return c.gate.Resume(ctx, sessionID, principal)
}

// Session returns a stored session.
func (c *Core) Session(ctx context.Context, id string) (*agentplane.Session, error) {
	return c.store.Session(ctx, id)
}

// Records returns a session's audit records after a sequence number.
func (c *Core) Records(ctx context.Context, session string, after int64) ([]audit.Record, error) {
	return c.store.Records(ctx, session, after)
}

// TurnRequest is one user turn: the session, who speaks, and what.
type TurnRequest struct {
	SessionID string
	Principal string
	Input     agentplane.TurnInput // Input.Now is set from the core's clock
}

// Turn is the outcome of one user turn.
type Turn struct {
	Decision agentplane.Decision
	Result   *agentplane.ExecutionResult // set when the decision invoked a command
	Session  *agentplane.Session         // the session after the turn
	// ConfirmationToken is the token of a confirmation the turn asked for,
	// for the human's client (a confirm button); never for the LLM.
	ConfirmationToken string
}

// Turn routes one user input and, for invoke_command, executes it through
// the gate with origin user, on the session state the router decided on
// (a session changed meanwhile is a version_conflict); a "yes" to a
// pending confirmation confirms it. Any other decision is recorded with
// the pending state it implies. Either way the turn's audit record is
// written. Malformed input returns the router's error and changes nothing.
func (c *Core) Turn(ctx context.Context, r TurnRequest) (Turn, error) {
	sess, err := c.store.Session(ctx, r.SessionID)
	if err != nil {
		return Turn{}, err
	}
	in := r.Input
	in.Now = c.now()
	d, err := c.router.Route(ctx, sess, in)
	if err != nil {
		return Turn{}, err
	}
	turn := gate.Turn{Input: in, Decision: d}
	if d.Action != agentplane.ActionInvokeCommand {
		got, err := c.gate.RecordDecision(ctx, sess, r.Principal, turn)
		if err != nil {
			return Turn{}, err
		}
		return Turn{Decision: d, Session: got.Session, ConfirmationToken: got.ConfirmationToken}, nil
	}
	res, err := c.gate.Execute(ctx, gate.Invocation{
		SessionID: r.SessionID, CommandID: d.CommandID, ResolvedID: d.ResolvedID, Mode: d.TargetMode,
		RequestID: c.newID(), Origin: gate.OriginUser, Principal: r.Principal, Roles: in.Roles,
		Confirmed: d.Confirmed, Turn: &turn, Base: sess,
	})
	if err != nil {
		return Turn{}, err
	}
	return Turn{Decision: d, Result: &res, Session: res.Session, ConfirmationToken: res.ConfirmationToken}, nil
}

// Execute runs an invocation through the gate.
func (c *Core) Execute(ctx context.Context, inv gate.Invocation) (agentplane.ExecutionResult, error) {
	return c.gate.Execute(ctx, inv)
}

// Intent carries out a chat control protocol intent through the gate.
func (c *Core) Intent(ctx context.Context, r gate.IntentRequest) (agentplane.ExecutionResult, error) {
	return c.gate.Intent(ctx, r)
}
