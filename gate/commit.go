package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/store"
)

// commit records the decided result: the new state (when the command
// changed it), the audit record, an issued confirmation token, and, when
// something ran, the result under the request key — in one atomic commit.
// A session another writer changed since it was read is a
// version_conflict, recorded with nothing applied — unless a tool that
// may act ran: the run happened, so its effects are applied to the
// session as it now is (rebase) and it is recorded as what it was. The
// token, if one was issued, goes to the human's channel only, never into
// the log.
func (x *execution) commit() (agentplane.ExecutionResult, error) { return x.commitWith(nil) }

// commitWith commits the result with the caller's writes built from it
// (also, when not nil): when they fail, the result is committed alone.
func (x *execution) commitWith(also *Also) (agentplane.ExecutionResult, error) {
	for attempt := 0; ; attempt++ {
		res, c := x.unit()
		if also != nil && also.Ops != nil {
			for _, op := range also.Ops(res) {
				c.Ops = append(c.Ops, alsoOp{op})
			}
			if also.Keeps && len(c.Ops) > 0 && !x.claimed {
				c.Request = nil // the caller's writes keep the result; nothing holds the key
			}
		}
		err := x.g.store.Commit(x.ctx, c)
		if _, theirs := errors.AsType[alsoError](err); theirs {
			also = nil // theirs failed: the result is committed without them
			attempt--
			continue
		}
		if err != nil && c.Session != nil && agentplane.ErrorCode(err) == agentplane.CodeVersionConflict {
			if x.acted && attempt < maxRebases {
				if err := x.rebase(); err != nil {
					return agentplane.ExecutionResult{}, err
				}
				continue
			}
			// Someone else changed the session: apply nothing, record the attempt.
			res = unchanged(rejected(agentplane.CodeVersionConflict, "session %s changed while %s ran; nothing was applied", x.sess.ID, x.action), x.sess)
			if x.acted {
				// it kept changing: the run is recorded without its effects
				res = unchanged(x.res, x.sess)
				res.Message += " (the session kept changing meanwhile: its effects on the session were not applied)"
			}
			res.RequestID = x.inv.RequestID
			if x.called {
				res.RequestID = x.requestID
			}
			x.issue = nil
			c = &store.Commit{SessionID: x.sess.ID, Record: x.record(&res)}
			if x.key != nil && x.claimed { // the tool ran: its key must not run it again
				c.Request = x.request(c.Record.Result)
			}
			err = x.g.store.Commit(x.ctx, c)
		}
		if errors.Is(err, store.ErrRequestDone) {
			// Another execution with this key finished first: its result is the answer.
			prev, ok, rerr := x.g.store.Request(x.ctx, *x.key)
			switch {
			case rerr != nil:
				return agentplane.ExecutionResult{}, fmt.Errorf("gate: request %s finished elsewhere, but its result cannot be read: %w", x.key.RequestID, rerr)
			case !ok || prev.Result == nil:
				return agentplane.ExecutionResult{}, fmt.Errorf("gate: request %s finished elsewhere, but the store holds no result for it", x.key.RequestID)
			}
			out, _ := x.held(prev)
			return out, x.err
		}
		if err != nil {
			return agentplane.ExecutionResult{}, fmt.Errorf("gate: commit %s on session %s: %w", x.action, x.sess.ID, err)
		}
		if x.token != "" && x.inv.Origin.Human() {
			res.ConfirmationToken = x.token // never to the LLM's or an agent's channel
		}
		res.Seq = c.Record.Seq
		if also != nil && len(c.Ops) > 0 {
			also.Written = true
		}
		return res, nil
	}
}

// redacted is res with the server's secrets masked in what a tool or a
// provider said — its message, error and output — before it is recorded,
// kept under its key or answered: a service that echoes its credentials
// puts them nowhere.
func (g *Gate) redacted(res agentplane.ExecutionResult) agentplane.ExecutionResult {
	if g.redact == nil {
		return res
	}
	res.Message = g.redact.String(res.Message)
	res.Output = g.redact.JSON(res.Output)
	if e := res.Error; e != nil && g.redact.Contains(e.Detail) {
		c := *e
		c.Detail = g.redact.String(c.Detail)
		res.Error = &c
	}
	return res
}

// alsoOp is a caller's write in the gate's commit; its failure is told
// apart from the gate's own.
type alsoOp struct{ op store.Op }

func (o alsoOp) Apply(ctx context.Context, tx store.Tx) error {
	if err := o.op.Apply(ctx, tx); err != nil {
		return alsoError{err}
	}
	return nil
}

// alsoError is the failure of a caller's write.
type alsoError struct{ err error }

func (e alsoError) Error() string { return "gate: the caller's write: " + e.err.Error() }
func (e alsoError) Unwrap() error { return e.err }

// maxRebases bounds how often a run's effects are applied again to a
// session that moved on while they were being committed.
const maxRebases = 8

// unit is the commit of the decided result, and the result to answer.
func (x *execution) unit() (agentplane.ExecutionResult, *store.Commit) {
	res := x.g.redacted(x.res)
	res.RequestID = x.inv.RequestID
	if x.called {
		res.RequestID = x.requestID // the one the tool was called with, the gate's when the caller sent none
	}
	c := &store.Commit{SessionID: x.sess.ID, Issue: x.issue}
	if res.Status == agentplane.StatusSuccess {
		c.Session = x.next
	}
	if c.Session == nil {
		res = unchanged(res, x.sess)
	}
	c.Record = x.record(&res)
	// The key keeps a result once something ran or changed: a rejected or
	// unconfirmed invocation ran nothing, and its key stays free.
	// A user turn sent with the client's request id keeps its answer
	// whatever it was: a retry gets the same answer.
	if x.key != nil && (x.claimed || res.Status == agentplane.StatusSuccess || x.inv.Turn != nil && x.inv.Turn.RequestID != "") {
		c.Request = x.request(c.Record.Result)
	}
	return res, c
}

// rebase takes the session as it is now and decides the run's effects on
// it again: the tool's output stands; what it does to the session is
// applied to the state it meets. Effects that no longer fit that state
// (an invalid work context) leave it as it is.
func (x *execution) rebase() error {
	cur, err := x.g.store.Session(x.ctx, x.sess.ID)
	if err != nil {
		return fmt.Errorf("gate: reload session %s after a conflict: %w", x.sess.ID, err)
	}
	ran := x.res
	x.sess, x.rebased, x.next, x.res = cur, cur.Version, nil, agentplane.ExecutionResult{}
	x.effects()
	if x.res.Status != agentplane.StatusSuccess {
		why := x.res.Message
		x.res, x.next = ran, nil
		x.res.Message += " (its effects on the session were not applied: " + why + ")"
	}
	return nil
}

// request is the finished request to store under the key.
func (x *execution) request(res *agentplane.ExecutionResult) *store.Request {
	at := x.claimedAt
	if at.IsZero() {
		at = x.now
	}
	return &store.Request{Key: *x.key, Digest: x.digest, State: store.RequestDone, Result: res, ClaimedAt: at}
}

// record builds the audit record of the invocation with its result. The
// record holds digests of confirmation tokens, never tokens.
func (x *execution) record(res *agentplane.ExecutionResult) *audit.Record {
	inv := x.inv
	logged := *res
	logged.ConfirmationToken = ""
	intent := x.intent
	if intent == nil {
		intent = &agentplane.Intent{Type: agentplane.IntentActionCall, Action: x.action, RequestID: inv.RequestID, Origin: string(inv.Origin)}
		if inv.Tool != "" && canonjson.Check(inv.Args) == nil {
			intent.Args = inv.Args
		}
	}
	r := &audit.Record{Session: x.sess.ID, Time: x.now.UTC(), Kind: audit.KindExecution, Config: x.g.config, Principal: inv.Principal, Base: x.sess.Version,
		Intent: intent, Result: &logged, State: res.Session, Presented: x.presented}
	if x.rebased != 0 {
		r.Base, r.Rebased = x.base, x.rebased
	}
	if inv.Origin == OriginWorkflow {
		r.Approval = inv.Approval
	}
	if x.issue != nil {
		r.Issued = x.issue.Digest
	}
	if inv.Turn != nil {
		in, d := inv.Turn.Input, inv.Turn.Decision
		r.Kind, r.Input, r.Decision = audit.KindTurn, &in, &d
	} else {
		r.Roles = slices.Clone(inv.Roles)
	}
	x.name(r)
	return r
}

// invocationDigest identifies an invocation for its request key: what it
// asks to run and with what, not who or how it is confirmed.
func invocationDigest(inv *Invocation) string {
	if inv.Turn != nil {
		return TurnDigest(inv.Turn.Input)
	}
	h := sha256.New()
	if inv.Tool != "" {
		h.Write([]byte("tool\x00" + inv.Tool + "\x00"))
		args := inv.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if canon, err := canonjson.Append(nil, args, nil); err == nil {
			args = canon
		}
		h.Write(args)
	} else {
		h.Write([]byte("command\x00" + inv.CommandID + "\x00" + inv.ResolvedID))
		if inv.Mode != "" {
			h.Write([]byte("\x00mode\x00" + inv.Mode))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TurnDigest identifies a user turn's input (text, selection, whether the
// client has a UI, roles) for its idempotency key: a turn sent again with
// the same request id and the same input is the same request. The turn's
// time is not part of it.
func TurnDigest(in agentplane.TurnInput) string {
	h := sha256.New()
	h.Write([]byte("turn\x00"))
	raw, _ := json.Marshal(in) // Now is not marshalled
	if canon, err := canonjson.Append(nil, raw, nil); err == nil {
		raw = canon
	}
	h.Write(raw)
	return hex.EncodeToString(h.Sum(nil))
}
