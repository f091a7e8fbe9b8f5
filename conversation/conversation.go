// Package conversation runs user turns: the router decides, the gate
// executes. It is what the terminal chat, and later the HTTP API, call for
// every message a person sends.
//
//	e := conversation.New(reg, g, store, nil)
//	sess, _ := e.Start(ctx, "")
//	t, _ := e.Turn(ctx, sess.ID, agentplane.TurnInput{Text: "switch to ddr mode"})
//	// t.Decision.Action == invoke_command, t.Result.Status == success, t.Session.Mode == "ddr"
package conversation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/router"
)

// Engine runs turns. It is safe for concurrent use across sessions; turns
// of one session should come one at a time (a concurrent turn that loses
// the race gets a version_conflict result, and changes nothing).
type Engine struct {
	reg   *router.Registry
	gate  *gate.Gate
	store gate.SessionStore
	now   func() time.Time
	newID func() string
	audit audit.Log
}

// Options configure an Engine. nil means defaults.
type Options struct {
	Now   func() time.Time // the clock; nil means time.Now
	NewID func() string    // session and request ids; nil means 16 random bytes in hex
	// Audit receives a record of every turn; nil means no audit log.
	Audit audit.Log
}

// New returns an engine.
func New(reg *router.Registry, g *gate.Gate, store gate.SessionStore, opts *Options) *Engine {
	e := &Engine{reg: reg, gate: g, store: store, now: time.Now, newID: randomID}
	if opts != nil {
		if opts.Now != nil {
			e.now = opts.Now
		}
		if opts.NewID != nil {
			e.newID = opts.NewID
		}
		e.audit = opts.Audit
	}
	return e
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Start opens a new session in the mode (the default mode when empty).
func (e *Engine) Start(ctx context.Context, mode string) (*agentplane.Session, error) {
	return e.gate.Open(ctx, e.newID(), mode)
}

// Turn is the outcome of one user turn.
type Turn struct {
	Decision agentplane.Decision
	Result   *agentplane.ExecutionResult // set when the decision invoked a command
	Session  *agentplane.Session         // the session after the turn
}

// Turn routes one user input and, for invoke_command, executes it through
// the gate with origin user. in.Now is filled from the engine's clock.
// Malformed input returns the router's error and changes nothing.
func (e *Engine) Turn(ctx context.Context, sessionID string, in agentplane.TurnInput) (Turn, error) {
	sess, err := e.store.Get(ctx, sessionID)
	if err != nil {
		return Turn{}, err
	}
	in.Now = e.now()
	d, err := router.Route(ctx, e.reg, sess, in)
	if err != nil {
		return Turn{}, err
	}
	after, err := e.gate.RecordDecision(ctx, sessionID, &d, in.Now)
	if err != nil {
		return Turn{}, err
	}
	t := Turn{Decision: d, Session: after}
	if d.Action != agentplane.ActionInvokeCommand {
		return t, e.record(ctx, sessionID, in, &t)
	}
	res, err := e.gate.Execute(ctx, gate.Invocation{
		SessionID: sessionID, CommandID: d.CommandID, ResolvedID: d.ResolvedID,
		RequestID: e.newID(), Origin: gate.OriginUser,
		Roles: in.Roles, Confirmed: d.Confirmed,
	})
	if err != nil {
		return Turn{}, err
	}
	t.Result = &res
	t.Session = res.Session
	return t, e.record(ctx, sessionID, in, &t)
}

// record appends the turn to the audit log, if there is one.
func (e *Engine) record(ctx context.Context, sessionID string, in agentplane.TurnInput, t *Turn) error {
	if e.audit == nil {
		return nil
	}
	d := t.Decision
	r := &audit.Record{Session: sessionID, Time: in.Now.UTC(), Kind: audit.KindTurn,
		Input: &in, Decision: &d, Result: t.Result, State: t.Session}
	if err := e.audit.Append(ctx, r); err != nil {
		return fmt.Errorf("conversation: audit turn of session %s: %w", sessionID, err)
	}
	return nil
}
