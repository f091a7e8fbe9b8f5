package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/tool"
)

// Execute runs an invocation. Outcomes are results, not errors: a
// rejected, failed or confirmation_required result changes nothing but
// the audit log (every attempt is recorded, except one refused because
// the same request is still running). The error is for a store that
// failed.
//
// The steps, in order; each does nothing once an earlier one has decided
// the result.
func (g *Gate) Execute(ctx context.Context, inv Invocation) (agentplane.ExecutionResult, error) {
	if g.tracer != nil {
		return g.traced(ctx, inv)
	}
	return g.execute(ctx, inv)
}

func (g *Gate) execute(ctx context.Context, inv Invocation) (agentplane.ExecutionResult, error) {
	var x execution                                     // on the stack: nothing keeps it
	if res, done, err := g.begin(ctx, &inv, &x); done { // load the session, look up the request key
		return res, err
	}
	x.check()                           // active, arguments, id in its source, preconditions
	x.confirm()                         // ask with a token, or accept the human's confirmation
	if done := x.claim(); done != nil { // hold the request key before a tool runs
		return *done, x.err
	}
	x.run()                         // the tool, with a timeout
	x.effects()                     // the command's declared effects and the state diff
	return x.commitWith(x.inv.Also) // state, audit record, request result (and the caller's writes): together
}

// execution is one invocation on its way through the steps.
type execution struct {
	g    *Gate
	ctx  context.Context
	inv  *Invocation
	sess *agentplane.Session // the state the invocation is decided on
	base int64               // its version
	mode string              // the mode it runs in
	// switchMode: mode is a launcher's target mode, not the session's; the
	// session switches to it when the command succeeds
	switchMode bool
	now        time.Time
	err        error // a store failure

	res agentplane.ExecutionResult // decided once res.Status is set

	// what the checks found
	intent  *agentplane.Intent
	action  string                        // command id or tool name
	tool    string                        // the tool that runs
	binding string                        // what a confirmation binds: a resolved id, or canonical args
	cmd     *agentplane.CommandDefinition // nil for a tool invocation
	item    *agentplane.ResolverItem      // the command's resolved item
	sources map[string]string             // the provider answers the checks read (see read)

	// confirmation
	token     string              // issued to the human, never recorded
	issue     *store.Confirmation // the issued token's record
	use       string              // digest of the token presented, used up by the claim
	presented string              // digest of the token presented, for the record

	// idempotency
	requestID string // the invocation's, or one the gate made for it
	key       *store.RequestKey
	digest    string
	claimed   bool // the key is held: something runs outside the commit
	claimedAt time.Time
	yes       bool // the human's yes in a turn answers the session's pending confirmation
	// authorized is why the call may run, for its invocation context
	authorized agentplane.Authorization

	// acted: a tool that may change something was called, so the run is
	// recorded whatever else happens to the session meanwhile
	acted bool
	// called: the tool was called, under requestID: the result names it
	called bool
	// rebased: the session version the effects were applied to when it
	// had moved on while the tool ran (0: the version decided on)
	rebased int64

	// outcome
	out  json.RawMessage     // the tool's output
	next *agentplane.Session // the state after, when the command changed it
}

func (x *execution) decided() bool { return x.res.Status != "" }

// begin validates the invocation's envelope, takes the session (the
// caller's snapshot, or the stored one) and looks up the request key,
// filling x. It reports done, with the result, when the invocation ends
// here: a result recorded already, a request still running, no such
// session, a malformed request.
func (g *Gate) begin(ctx context.Context, inv *Invocation, x *execution) (agentplane.ExecutionResult, bool, error) {
	if !inv.Origin.Valid() {
		r := rejected(agentplane.CodeInvalidInput, "origin %q: want one of user, api, llm, mcp, workflow, agent_internal", inv.Origin)
		r.RequestID = inv.RequestID
		return r, true, nil
	}
	*x = execution{g: g, ctx: ctx, inv: inv, now: g.now()}
	// keyed: the caller's request id names a key (one of the gate's own
	// prefix is refused below)
	keyed := inv.RequestID != "" && !strings.HasPrefix(inv.RequestID, gateKeyPrefix)
	var prev store.Request
	var held, loaded bool // what the key holds; loaded: read with the session
	if inv.Base != nil {
		x.sess = inv.Base.Clone()
	} else {
		var sess *agentplane.Session
		var err error
		if keyed { // the session and what its key holds, in one read
			sess, prev, held, err = store.SessionRequest(ctx, g.store, store.RequestKey{SessionID: inv.SessionID, Principal: inv.Principal, RequestID: inv.RequestID})
			loaded = true
		} else {
			sess, err = g.store.Session(ctx, inv.SessionID)
		}
		if err != nil {
			if agentplane.ErrorCode(err) == agentplane.CodeNotFound {
				r := rejected(agentplane.CodeNotFound, "no session %q", inv.SessionID)
				r.RequestID = inv.RequestID
				return r, true, nil // there is no chain to record the attempt in
			}
			what := "session " + inv.SessionID
			if keyed {
				what += " with request " + inv.RequestID
			}
			return agentplane.ExecutionResult{}, true, fmt.Errorf("gate: load %s: %w", what, err)
		}
		x.sess = sess
	}
	x.base = x.sess.Version
	x.mode = g.reg.ModeOf(x.sess.Mode)
	x.action = inv.CommandID
	if inv.Tool != "" {
		x.action = inv.Tool
	}
	if inv.RequestID == "" {
		// the call still carries a request id, downstream and in a claim
		x.requestID = gateKeyPrefix + x.g.newID()
		return agentplane.ExecutionResult{}, false, nil
	}
	x.requestID = inv.RequestID
	if !keyed { // an id of the gate's own prefix
		r := rejected(agentplane.CodeInvalidInput, "request id %q: ids starting with %q are the gate's own; use another", inv.RequestID, gateKeyPrefix)
		r.RequestID = inv.RequestID
		return unchanged(r, x.sess), true, nil
	}
	x.key = &store.RequestKey{SessionID: x.sess.ID, Principal: inv.Principal, RequestID: inv.RequestID}
	x.digest = invocationDigest(inv)
	if !loaded {
		var err error
		if prev, held, err = g.store.Request(ctx, *x.key); err != nil {
			return agentplane.ExecutionResult{}, true, fmt.Errorf("gate: look up request %s: %w", inv.RequestID, err)
		}
	}
	if !held {
		return agentplane.ExecutionResult{}, false, nil
	}
	var cur *agentplane.Session // the session as read with prev, if it was
	if loaded {
		cur = x.sess
	}
	res, done := x.heldAt(prev, cur)
	return res, done, x.err
}

// held answers an invocation whose request key is taken: the recorded
// result when the same invocation finished, a refusal when the key was
// used for another invocation (recorded) or is still running (not: the
// running one records itself).
func (x *execution) held(prev store.Request) (agentplane.ExecutionResult, bool) {
	return x.heldAt(prev, nil)
}

// heldAt is held with cur, the session as the store held it when prev was
// read (in the same read); nil: it is read again, after prev — a key
// finished elsewhere since x.sess was read answers with the session its
// run left.
func (x *execution) heldAt(prev store.Request, cur *agentplane.Session) (agentplane.ExecutionResult, bool) {
	switch {
	case prev.Digest != x.digest:
		x.res = rejected(agentplane.CodeRequestConflict, "request id %q was used for another invocation in this session; use a new id", x.inv.RequestID)
		x.key = nil // the key stays the first invocation's
		res, err := x.commit()
		x.err = err
		return res, true
	case prev.State == store.RequestDone && prev.Result != nil:
		res := *prev.Result
		res.Seq = prev.Seq
		res.Session = cur
		if cur == nil {
			res.Session = x.sess
			if now, err := x.g.store.Session(x.ctx, x.sess.ID); err == nil {
				res.Session = now
			}
		}
		return res, true
	case prev.State == store.RequestRunning && prev.ClaimedAt.Before(x.staleBefore()):
		return x.interrupted(prev), true
	default:
		r := rejected(agentplane.CodeRequestInProgress, "request %q is still running; retry later for its result", x.inv.RequestID)
		r.RequestID = x.inv.RequestID
		return unchanged(r, x.sess), true
	}
}

// claim holds the request key in the store before anything that may act
// runs: a tool whose impact is internal or external, or any invocation
// that uses a confirmation. Consuming the confirmation (the token
// presented, or the pending confirmation a "yes" answers) is part of the
// same claim, so of concurrent confirmations of one question exactly one
// runs, whatever keys their clients sent; the others are refused with
// confirmation_invalid. An invocation without a request id claims a key
// of the gate's own: the store knows what is running either way. A read
// tool without a confirmation is not claimed: running it twice changes
// nothing, and it saves a write. It returns the result to give when the
// key is held elsewhere or the confirmation was used.
func (x *execution) claim() *agentplane.ExecutionResult {
	if x.decided() {
		return nil
	}
	use := x.confirmationUse()
	if use == nil && !x.mayAct() {
		return nil
	}
	if x.key == nil {
		x.key = &store.RequestKey{SessionID: x.sess.ID, Principal: x.inv.Principal, RequestID: x.requestID}
		x.digest = invocationDigest(x.inv)
	}
	x.claimedAt = x.now
	holder, ok, err := x.g.store.Claim(x.ctx, store.Claim{Key: *x.key, Digest: x.digest, Now: x.now, StaleBefore: x.staleBefore(), Use: use, Running: x.running()})
	switch {
	case errors.Is(err, store.ErrConfirmationUsed):
		x.res = rejected(agentplane.CodeConfirmationInvalid, "the confirmation was used already: what it confirmed runs once")
		return nil // recorded by commit, nothing run
	case err != nil:
		x.err = fmt.Errorf("gate: claim request %s: %w", x.key.RequestID, err)
		return &agentplane.ExecutionResult{}
	case ok:
		x.claimed = true
		return nil
	}
	res, _ := x.held(holder)
	return &res
}

// gateKeyPrefix starts the request keys the gate claims for invocations
// that came without one; client request ids cannot start with it.
const gateKeyPrefix = "~gate-"

// confirmationUse is the confirmation the invocation consumes, if any.
func (x *execution) confirmationUse() *store.Use {
	switch {
	case x.use != "":
		return &store.Use{Digest: x.use}
	case x.yes:
		return &store.Use{SessionID: x.sess.ID, Version: x.sess.Version}
	}
	return nil
}

// mayAct reports whether the invocation's tool may change anything when it
// runs: impact internal or external, and not a built-in effect tool (whose
// effects are applied in the commit).
func (x *execution) mayAct() bool {
	if agentplane.IsEffectTool(x.tool) {
		return false
	}
	t, ok := x.g.tools.Get(x.tool)
	return ok && t.Spec().Impact != tool.ImpactRead
}
