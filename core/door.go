package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
)

// The core is the one door to a session: every write of a session's audit
// chain and state goes through the methods below, Turn, Execute and
// Intent, each on one snapshot of the configuration (acquired at its start
// and used to its end). The gate and the store are not handed out.

// Open opens a session as o says: a session with another owner than its
// principal, or a given id (replay opens a recorded session again). Front
// ends open sessions with Start.
func (c *Core) Open(ctx context.Context, o gate.Opening) (*agentplane.Session, error) {
	snap := c.acquire()
	defer snap.release()
	return snap.gate.Open(ctx, o)
}

// RecordNotice puts a notification on a session's conversation floor: a
// record of kind notice in its chain, which reaches its streams and
// history in order with the turns. It changes no state and returns the
// record's sequence number. Safe for concurrent use; the errors are the
// store's (not_found for no such session).
func (c *Core) RecordNotice(ctx context.Context, sessionID string, n *agentplane.Notice) (int64, error) {
	snap := c.acquire()
	defer snap.release()
	return snap.gate.RecordNotice(ctx, sessionID, n)
}

// RecordExchange appends an exchange with the LLM to a session's audit
// chain with the principal's roles (which decided the tools offered); it
// changes no state and returns the record's sequence number. Safe for
// concurrent use; the errors are the store's.
func (c *Core) RecordExchange(ctx context.Context, sessionID, principal string, roles []string, ex *agentplane.LLMExchange) (int64, error) {
	snap := c.acquire()
	defer snap.release()
	return snap.gate.RecordExchange(ctx, sessionID, principal, roles, ex)
}

// Proposal is a tool call the LLM proposed that needs the human's
// confirmation.
type Proposal struct {
	Base      *agentplane.Session // the session as the proposal is made on
	Principal string              // on whose behalf the LLM speaks
	Tool      string
	Args      json.RawMessage // the call's arguments, as the model gave them
	Question  string          // what the human is asked
}

// Propose makes a proposal the session's pending confirmation (see
// gate.Gate.Propose): the arguments are checked against the tool's schema
// and kept in canonical form, and the question goes to the human with a
// token bound to exactly that call. The error is invalid_args for
// arguments the schema refuses, version_conflict when the session changed
// after p.Base, or the store's.
func (c *Core) Propose(ctx context.Context, p Proposal) (gate.Decided, error) {
	snap := c.acquire()
	defer snap.release()
	args, err := snap.tools.Validate(p.Tool, p.Args)
	if err != nil {
		return gate.Decided{}, agentplane.Errorf(agentplane.CodeInvalidArgs, "proposed call of %s: %v", p.Tool, err)
	}
	return snap.gate.Propose(ctx, p.Base, p.Principal, p.Tool, args, p.Question)
}

// Pending returns the pending picker and confirmation a decision leaves
// on a session under the configuration in force (see gate.Gate.Pending).
// It is a pure function.
func (c *Core) Pending(prev *agentplane.Session, d *agentplane.Decision, now time.Time) (*agentplane.PendingPicker, *agentplane.PendingConfirmation) {
	return c.cur().gate.Pending(prev, d, now)
}

// RecordsAfter returns up to limit of a session's audit records above
// after, in order: what event streams page through.
func (c *Core) RecordsAfter(ctx context.Context, session string, after int64, limit int) ([]audit.Record, error) {
	return c.store.RecordsAfter(ctx, session, after, limit)
}

// Ready reports whether the store answers: nil when it does (a health
// check's readiness). It reads one session that does not exist.
func (c *Core) Ready(ctx context.Context) error {
	if _, err := c.store.Session(ctx, "readyz-probe"); err != nil && agentplane.ErrorCode(err) != agentplane.CodeNotFound {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}
