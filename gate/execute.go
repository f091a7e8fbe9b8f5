package gate

import (
	"context"
	"encoding/json"
	"fmt"
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
	var x execution                                     // on the stack: nothing keeps it
	if res, done, err := g.begin(ctx, &inv, &x); done { // load the session, look up the request key
		return res, err
	}
	x.check()                           // active, arguments, id in its source, preconditions
	x.confirm()                         // ask with a token, or accept the human's confirmation
	if done := x.claim(); done != nil { // hold the request key before a tool runs
		return *done, x.err
	}
	x.run()           // the tool, with a timeout
	x.effects()       // the command's declared effects and the state diff
	return x.commit() // state, audit record, request result: together
}

// execution is one invocation on its way through the steps.
type execution struct {
	g    *Gate
	ctx  context.Context
	inv  *Invocation
	sess *agentplane.Session // the state the invocation is decided on
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

	// confirmation
	token     string              // issued to the human, never recorded
	issue     *store.Confirmation // the issued token's record
	use       string              // digest of the token presented, marked used on success
	presented string              // digest of the token presented, for the record

	// idempotency
	key       *store.RequestKey
	digest    string
	claimed   bool // the key is held: something runs outside the commit
	claimedAt time.Time

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
	if inv.Base != nil {
		x.sess = inv.Base.Clone()
	} else {
		sess, err := g.store.Session(ctx, inv.SessionID)
		if err != nil {
			if agentplane.ErrorCode(err) == agentplane.CodeNotFound {
				r := rejected(agentplane.CodeNotFound, "no session %q", inv.SessionID)
				r.RequestID = inv.RequestID
				return r, true, nil // there is no chain to record the attempt in
			}
			return agentplane.ExecutionResult{}, true, fmt.Errorf("gate: load session %s: %w", inv.SessionID, err)
		}
		x.sess = sess
	}
	x.mode = g.reg.ModeOf(x.sess.Mode)
	x.action = inv.CommandID
	if inv.Tool != "" {
		x.action = inv.Tool
	}
	if inv.RequestID == "" {
		return agentplane.ExecutionResult{}, false, nil
	}
	x.key = &store.RequestKey{SessionID: x.sess.ID, Principal: inv.Principal, RequestID: inv.RequestID}
	x.digest = invocationDigest(inv)
	prev, ok, err := g.store.Request(ctx, *x.key)
	if err != nil {
		return agentplane.ExecutionResult{}, true, fmt.Errorf("gate: look up request %s: %w", inv.RequestID, err)
	}
	if !ok {
		return agentplane.ExecutionResult{}, false, nil
	}
	res, done := x.held(prev)
	return res, done, x.err
}

// held answers an invocation whose request key is taken: the recorded
// result when the same invocation finished, a refusal when the key was
// used for another invocation (recorded) or is still running (not: the
// running one records itself).
func (x *execution) held(prev store.Request) (agentplane.ExecutionResult, bool) {
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
		if cur, err := x.g.store.Session(x.ctx, x.sess.ID); err == nil {
			res.Session = cur
		} else {
			res.Session = x.sess
		}
		return res, true
	default:
		r := rejected(agentplane.CodeRequestInProgress, "request %q is still running; retry later for its result", x.inv.RequestID)
		r.RequestID = x.inv.RequestID
		return unchanged(r, x.sess), true
	}
}

// claim holds the request key before a tool runs outside the commit, so
// two executions with one key never both run it. Nothing else needs it:
// a commit that writes a finished request fails when the key is taken
// (the later one answers with the first one's result). A read-only tool
// is not claimed: running it twice changes nothing, and it saves a write.
// It returns the result to give when the key is held elsewhere.
func (x *execution) claim() *agentplane.ExecutionResult {
	if x.decided() || x.key == nil || agentplane.IsEffectTool(x.tool) {
		return nil
	}
	t, ok := x.g.tools.Get(x.tool)
	if !ok {
		return nil // nothing will run: tool_unavailable is decided in run
	}
	if t.Spec().Impact == tool.ImpactRead {
		return nil
	}
	x.claimedAt = x.now
	stale := x.now.Add(-2*x.g.toolTimeout - time.Minute)
	holder, ok, err := x.g.store.Claim(x.ctx, store.Claim{Key: *x.key, Digest: x.digest, Now: x.now, StaleBefore: stale})
	if err != nil {
		x.err = fmt.Errorf("gate: claim request %s: %w", x.inv.RequestID, err)
		return &agentplane.ExecutionResult{}
	}
	if ok {
		x.claimed = true
		return nil
	}
	res, _ := x.held(holder)
	return &res
}
