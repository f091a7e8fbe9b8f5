package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/telemetry"
)

// Start asks for a new session.
type Start struct {
	Mode      string // the default mode when empty
	Principal string // who opens it; the session is theirs
	UI        bool   // its client renders pickers and dialogs
	// ID is the session's id; empty means a new one. A client's retried
	// creation names the id its first attempt used (see StartOnce).
	ID string
}

// Start opens a new session, owned by s.Principal.
func (c *Core) Start(ctx context.Context, s Start) (*agentplane.Session, error) {
	id := s.ID
	if id == "" {
		id = c.newID()
	}
	snap := c.acquire()
	defer snap.release()
	return snap.gate.Open(ctx, gate.Opening{SessionID: id, Mode: s.Mode, Principal: s.Principal, Owner: s.Principal, UI: s.UI})
}

// StartOnce opens a session once per (principal, request id): the session
// id is derived from both, so a retried creation finds the session its
// first attempt opened and returns it as it was opened (created false).
// The same request id with another mode is a request_conflict.
func (c *Core) StartOnce(ctx context.Context, s Start, requestID string) (sess *agentplane.Session, created bool, err error) {
	h := sha256.Sum256([]byte("session\x00" + s.Principal + "\x00" + requestID))
	s.ID = hex.EncodeToString(h[:16])
	sess, err = c.Start(ctx, s)
	if err == nil {
		return sess, true, nil
	}
	if agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
		return nil, false, err
	}
	recs, rerr := c.store.Records(ctx, s.ID, 0)
	if rerr != nil || len(recs) == 0 || recs[0].State == nil || recs[0].State.Owner != s.Principal {
		return nil, false, err
	}
	first := recs[0].State
	if s.Mode != "" && s.Mode != first.Mode || s.UI != first.UI {
		return nil, false, agentplane.Errorf(agentplane.CodeRequestConflict, "request id %q opened another session (mode %q, ui %v); use a new id", requestID, first.Mode, first.UI)
	}
	return first, false, nil
}

// Owned returns a stored session when it is the principal's (the local
// principal, agentplane.LocalPrincipal, also reaches the sessions nobody
// owns); another's session is
// not_found, as if it did not exist.
func (c *Core) Owned(ctx context.Context, id, principal string) (*agentplane.Session, error) {
	sess, err := c.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	if !Owns(principal, sess) {
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", id)
	}
	return sess, nil
}

// Owns reports whether the principal may see and change the session.
func Owns(principal string, s *agentplane.Session) bool {
	return s.Owner == principal || s.Owner == "" && principal == agentplane.LocalPrincipal
}

// Sessions lists a principal's sessions, newest first.
func (c *Core) Sessions(ctx context.Context, q store.SessionQuery) (store.SessionPage, error) {
	return c.store.Sessions(ctx, q)
}

// Resume loads a stored session for a principal to continue, fitted to
// the configuration (see gate.Resume); the notes say what was changed.
func (c *Core) Resume(ctx context.Context, sessionID, principal string) (*agentplane.Session, []string, error) {
	snap := c.acquire()
	defer snap.release()
	return snap.gate.Resume(ctx, sessionID, principal)
}

// Session returns a stored session.
func (c *Core) Session(ctx context.Context, id string) (*agentplane.Session, error) {
	return c.store.Session(ctx, id)
}

// Records returns a session's audit records after a sequence number.
func (c *Core) Records(ctx context.Context, session string, after int64) ([]audit.Record, error) {
	return c.store.Records(ctx, session, after)
}

// Verify checks a session's audit chain whole, a page at a time: every
// record continues the one before, and the chain ends at the session's
// head (see store.Verify).
func (c *Core) Verify(ctx context.Context, session string) (store.Verification, error) {
	return store.Verify(ctx, c.store, session)
}

// Page returns up to limit of a session's audit records: the first ones
// above after when after > 0, else the last ones below before (before ≤
// 0: the chain's end). Its cost does not grow with the session.
func (c *Core) Page(ctx context.Context, session string, before, after int64, limit int) ([]audit.Record, error) {
	if after > 0 {
		return c.store.RecordsAfter(ctx, session, after, limit)
	}
	return c.store.RecordsBefore(ctx, session, before, limit)
}

// Tail returns a session's audit records from its turns-th last user turn
// to the end (all of them when it has fewer turns, or turns ≤ 0): what a
// history of the last turns is built from, read page by page from the
// end, so its cost does not grow with the session.
func (c *Core) Tail(ctx context.Context, session string, turns int) ([]audit.Record, error) {
	if turns <= 0 {
		return c.store.Records(ctx, session, 0)
	}
	var recs []audit.Record // ascending, the pages read so far
	seen := 0
	before, page := int64(0), 8*turns
	for {
		p, err := c.store.RecordsBefore(ctx, session, before, page)
		if err != nil {
			return nil, err
		}
		for i := len(p) - 1; i >= 0; i-- {
			if p[i].Kind != audit.KindTurn {
				continue
			}
			if seen++; seen == turns {
				return append(p[i:], recs...), nil
			}
		}
		recs = append(p, recs...)
		if len(p) < page || p[0].Seq <= 1 {
			return recs, nil // the chain's start
		}
		before, page = p[0].Seq, min(2*page, 4096)
	}
}

// TurnRequest is one user turn: the session, who speaks, and what.
type TurnRequest struct {
	SessionID string
	Principal string
	Input     agentplane.TurnInput // Input.Now is set from the core's clock
	// RequestID is the client's idempotency key for the turn: sent again
	// with the same input, the turn is answered as it was the first time
	// and nothing runs twice; with another input it is a request_conflict.
	// Empty: the turn is not retried.
	RequestID string
}

// Turn is the outcome of one user turn.
type Turn struct {
	Decision agentplane.Decision
	Result   *agentplane.ExecutionResult // set when the decision invoked a command
	Session  *agentplane.Session         // the session after the turn
	// ConfirmationToken is the token of a confirmation the turn asked for,
	// for the human's client (a confirm button); never for the LLM. A
	// retried turn's answer does not carry it again (only its digest is
	// stored): the human confirms with "yes".
	ConfirmationToken string
	// Seq is the sequence number of the turn's audit record.
	Seq int64
	// Repeated says the turn was answered from its record: its request id
	// had been answered before.
	Repeated bool
}

// Turn routes one user input and, for invoke_command, executes it through
// the gate with origin user, on the session state the router decided on
// (a session changed meanwhile is a version_conflict); a "yes" to a
// pending confirmation confirms it. Any other decision is recorded with
// the pending state it implies. Either way the turn's audit record is
// written. Malformed input returns the router's error and changes nothing.
func (c *Core) Turn(ctx context.Context, r TurnRequest) (Turn, error) {
	snap := c.acquire() // the turn runs to its end on the configuration it started on
	defer snap.release()
	in := r.Input
	if r.RequestID != "" {
		if t, ok, err := c.repeated(ctx, snap, r); ok || err != nil {
			return t, err
		}
	}
	sess, err := c.store.Session(ctx, r.SessionID)
	if err != nil {
		return Turn{}, err
	}
	if sess, err = c.fit(ctx, snap, sess, r.Principal); err != nil {
		return Turn{}, err
	}
	in.Now = c.now()
	start := time.Now()
	d, err := snap.router.Route(ctx, sess, in)
	if err != nil {
		return Turn{}, err
	}
	if c.obs.Routed != nil {
		c.obs.Routed(d, time.Since(start))
	}
	turn := gate.Turn{Input: in, Decision: d, RequestID: r.RequestID}
	if d.Action != agentplane.ActionInvokeCommand {
		got, err := snap.gate.RecordDecision(ctx, sess, r.Principal, turn)
		if errors.Is(err, store.ErrRequestDone) {
			t, _, err := c.repeated(ctx, snap, r) // the same turn, answered meanwhile
			return t, err
		}
		if err != nil {
			return Turn{}, err
		}
		return Turn{Decision: d, Session: got.Session, ConfirmationToken: got.ConfirmationToken, Seq: got.Seq}, nil
	}
	requestID := r.RequestID
	if requestID == "" {
		requestID = c.newID()
	}
	res, err := c.execute(ctx, snap, gate.Invocation{
		SessionID: r.SessionID, CommandID: d.CommandID, ResolvedID: d.ResolvedID, Tool: d.Tool, Args: d.Args, Mode: d.TargetMode,
		RequestID: requestID, Origin: gate.OriginUser, Principal: r.Principal, Roles: in.Roles,
		Confirmed: d.Confirmed, Turn: &turn, Base: sess,
	})
	if err != nil {
		return Turn{}, err
	}
	return Turn{Decision: d, Result: &res, Session: res.Session, ConfirmationToken: res.ConfirmationToken, Seq: res.Seq}, nil
}

// repeated answers a turn whose request id was used before in the
// session, from the turn's audit record: ok is false when the id is new.
func (c *Core) repeated(ctx context.Context, snap *snapshot, r TurnRequest) (Turn, bool, error) {
	prev, ok, err := c.store.Request(ctx, store.RequestKey{SessionID: r.SessionID, Principal: r.Principal, RequestID: r.RequestID})
	switch {
	case err != nil || !ok:
		return Turn{}, false, err
	case prev.Digest != gate.TurnDigest(r.Input):
		return Turn{}, true, agentplane.Errorf(agentplane.CodeRequestConflict, "request id %q was used for another turn in this session; use a new id", r.RequestID)
	case snap.gate.Stale(prev):
		// its instance stopped while the turn's tool ran: taken over by
		// the gate's one rule, and answered from the record it writes
		if _, err := snap.gate.TakeOver(ctx, prev); err != nil {
			return Turn{}, true, err
		}
		if prev, ok, err = c.store.Request(ctx, store.RequestKey{SessionID: r.SessionID, Principal: r.Principal, RequestID: r.RequestID}); err != nil || !ok {
			return Turn{}, true, fmt.Errorf("core: turn %q was taken over, but its request cannot be read: %v", r.RequestID, err)
		}
		if prev.State != store.RequestDone || prev.Seq == 0 {
			return Turn{}, true, agentplane.Errorf(agentplane.CodeRequestInProgress, "turn %q is still running; retry later for its answer", r.RequestID)
		}
	case prev.State != store.RequestDone || prev.Seq == 0:
		return Turn{}, true, agentplane.Errorf(agentplane.CodeRequestInProgress, "turn %q is still running; retry later for its answer", r.RequestID)
	}
	recs, err := c.store.Records(ctx, r.SessionID, prev.Seq-1)
	if err != nil {
		return Turn{}, true, err
	}
	if len(recs) == 0 || recs[0].Seq != prev.Seq || recs[0].Decision == nil {
		return Turn{}, true, fmt.Errorf("core: the record of turn %q (seq %d) is missing from session %s", r.RequestID, prev.Seq, r.SessionID)
	}
	rec := recs[0]
	t := Turn{Decision: *rec.Decision, Session: rec.State, Seq: rec.Seq, Repeated: true}
	if res := rec.Result; res != nil {
		res.Session = rec.State
		t.Result = res
	}
	return t, true, nil
}

// fit fits a session to the configuration of snap before a turn, as a
// resume does (gate.Resume), when the configuration was reloaded under it:
// a mode that is gone becomes the default mode, pending state for a
// command that is gone is dropped, and the resume record's notes tell the
// person (the conversation shows them). A session that fits is returned
// as it is.
func (c *Core) fit(ctx context.Context, snap *snapshot, sess *agentplane.Session, principal string) (*agentplane.Session, error) {
	if snap.fits(sess) {
		return sess, nil
	}
	next, _, err := snap.gate.Resume(ctx, sess.ID, principal)
	return next, err
}

// fits reports whether the session's mode and pending state are all in
// the configuration (what gate.Resume would leave as it is).
func (s *snapshot) fits(sess *agentplane.Session) bool {
	if _, ok := s.reg.Mode(sess.Mode); !ok && sess.Mode != "" {
		return false
	}
	if p := sess.PendingPicker; p != nil {
		if _, ok := s.reg.Command(p.CommandID); !ok {
			return false
		}
	}
	if p := sess.PendingConfirmation; p != nil && p.Tool == "" {
		if _, ok := s.reg.Command(p.CommandID); !ok {
			return false
		}
	}
	return true
}

// Recover takes over, every interval until ctx is done, the requests
// that instances which stopped while their tools ran left running (see
// gate.Gate.Recover): each is recorded as interrupted in its session's
// audit chain with what it was running, so nothing that may have acted
// stays unrecorded, and its client's retry is answered. A serving
// process runs it (plane.Runtime.Start).
func (c *Core) Recover(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := c.cur().gate.Recover(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			c.log.Error("stale requests could not be listed", "err", err)
		case n > 0:
			c.log.Warn("requests whose instance stopped while their tools ran were recorded as interrupted", "requests", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Execute runs an invocation through the gate.
func (c *Core) Execute(ctx context.Context, inv gate.Invocation) (agentplane.ExecutionResult, error) {
	snap := c.acquire()
	defer snap.release()
	return c.execute(ctx, snap, inv)
}

// execute runs an invocation through the gate of snap.
func (c *Core) execute(ctx context.Context, snap *snapshot, inv gate.Invocation) (agentplane.ExecutionResult, error) {
	start := time.Now()
	res, err := snap.gate.Execute(ctx, inv)
	if err == nil && c.obs.Executed != nil {
		c.obs.Executed(res, time.Since(start))
	}
	return res, err
}

// Intent carries out a chat control protocol intent through the gate.
func (c *Core) Intent(ctx context.Context, r gate.IntentRequest) (agentplane.ExecutionResult, error) {
	snap := c.acquire()
	defer snap.release()
	start := time.Now()
	res, err := snap.gate.Intent(ctx, r)
	if err == nil && c.obs.Executed != nil {
		c.obs.Executed(res, time.Since(start))
	}
	return res, err
}

// TraceTurn starts the span of a user turn (invoke_agent in the GenAI
// conventions) for a front end to take the turn in — the router's
// decision, the gate's executions and the LLM's calls are its children —
// and returns the function that ends it with the turn's decision (nil:
// none was made) and error. Without a tracer it returns ctx and a no-op.
func (c *Core) TraceTurn(ctx context.Context, session string) (context.Context, func(*agentplane.Decision, error)) {
	if c.tracer == nil {
		return ctx, func(*agentplane.Decision, error) {}
	}
	ctx, span := c.tracer.Start(ctx, "invoke_agent agentplane", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentName("agentplane"), semconv.GenAIConversationID(session)))
	return ctx, func(d *agentplane.Decision, err error) {
		if d != nil {
			span.SetAttributes(telemetry.Action.String(string(d.Action)))
			if d.CommandID != "" {
				span.SetAttributes(telemetry.Command.String(d.CommandID))
			}
		}
		if err != nil {
			telemetry.Fail(span, agentplane.ErrorCode(err), agentplane.ErrorMessage(err))
		}
		span.End()
	}
}
