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
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/router"
)

// Engine runs turns. It is safe for concurrent use across sessions; turns
// of one session should come one at a time (a concurrent turn that loses
// the race gets a version_conflict result, and changes nothing).
type Engine struct {
	reg   *router.Registry
	gate  *gate.Gate
	store gate.Store
	now   func() time.Time
	newID func() string
}

// Options configure an Engine. nil means defaults.
type Options struct {
	Now   func() time.Time // the clock; nil means time.Now
	NewID func() string    // session and request ids; nil means 16 random bytes in hex
}

// New returns an engine.
func New(reg *router.Registry, g *gate.Gate, store gate.Store, opts *Options) *Engine {
	e := &Engine{reg: reg, gate: g, store: store, now: time.Now, newID: randomID}
	if opts != nil {
		if opts.Now != nil {
			e.now = opts.Now
		}
		if opts.NewID != nil {
			e.newID = opts.NewID
		}
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
// the gate with origin user (a "yes" to a pending confirmation presents the
// confirmation token the session holds); any other decision is recorded
// with the pending state it implies. The gate writes the turn's audit
// record either way. in.Now is filled from the engine's clock. Malformed
// input returns the router's error and changes nothing.
func (e *Engine) Turn(ctx context.Context, sessionID string, in agentplane.TurnInput) (Turn, error) {
	sess, err := e.store.Session(ctx, sessionID)
	if err != nil {
		return Turn{}, err
	}
	in.Now = e.now()
	d, err := router.Route(ctx, e.reg, sess, in)
	if err != nil {
		return Turn{}, err
	}
	turn := gate.Turn{Input: in, Decision: d}
	if d.Action != agentplane.ActionInvokeCommand {
		after, err := e.gate.RecordDecision(ctx, sessionID, turn)
		if err != nil {
			return Turn{}, err
		}
		return Turn{Decision: d, Session: after}, nil
	}
	inv := gate.Invocation{
		SessionID: sessionID, CommandID: d.CommandID, ResolvedID: d.ResolvedID,
		RequestID: e.newID(), Origin: gate.OriginUser, Roles: in.Roles, Turn: &turn,
	}
	if d.Confirmed && sess.PendingConfirmation != nil {
		inv.ConfirmationToken = sess.PendingConfirmation.Token
	}
	res, err := e.gate.Execute(ctx, inv)
	if err != nil {
		return Turn{}, err
	}
	return Turn{Decision: d, Result: &res, Session: res.Session}, nil
}
