package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
)

// After a crash: every invocation that may act claims its request key
// before its tool runs (claim), and the claim keeps what it runs. An
// instance that stops while the tool runs leaves the claim running. Once
// it is stale — older than twice the tool's timeout and the clock margin,
// so no live execution can hold it — it is taken over, by one rule
// whoever finds it: the request is recorded as failed with code
// interrupted, in the session's audit chain, with what it was running
// (the intent, and a turn's input and decision), because it may have
// acted; it is not run again. A retry of the request finds it (held), a
// retried turn does (core), and Recover finds the ones nobody retries.

// running is what a claim keeps of the invocation it holds the key for.
type running struct {
	Intent   *agentplane.Intent    `json:"intent,omitempty"`
	Roles    []string              `json:"roles,omitempty"`
	Approval string                `json:"approval,omitempty"`
	Input    *agentplane.TurnInput `json:"input,omitempty"`
	Decision *agentplane.Decision  `json:"decision,omitempty"`
}

// running is the claim's account of what the invocation runs.
func (x *execution) running() json.RawMessage {
	r := running{Intent: x.intent, Roles: x.inv.Roles, Approval: x.inv.Approval}
	if t := x.inv.Turn; t != nil {
		r.Input, r.Decision = &t.Input, &t.Decision
	}
	raw, err := json.Marshal(&r)
	if err != nil {
		return nil // the takeover records the request without it
	}
	return raw
}

// staleBefore is when a running claim was made that no live execution
// holds any more: its tool would have timed out twice over, and the
// clock margin more allows for instances' clocks.
func (x *execution) staleBefore() time.Time { return x.g.staleBefore(x.now) }

func (g *Gate) staleBefore(now time.Time) time.Time {
	return now.Add(-2*g.toolTimeout - g.clockMargin)
}

// Stale reports whether a running request's claim is stale: its
// instance stopped while it ran.
func (g *Gate) Stale(req store.Request) bool {
	return req.State == store.RequestRunning && req.ClaimedAt.Before(g.staleBefore(g.now()))
}

// interrupted finishes a request whose claim went stale: the instance
// that ran it stopped while its tool ran, and the tool may have acted.
// It is not run again (whether it acted cannot be known here): the claim
// is taken over and the request recorded as failed with code interrupted,
// with what it was running, so its client gets an answer and the audit
// log holds the attempt.
func (x *execution) interrupted(prev store.Request) agentplane.ExecutionResult {
	holder, ok, err := x.g.store.Claim(x.ctx, store.Claim{Key: *x.key, Digest: x.digest, Now: x.now, StaleBefore: x.staleBefore()})
	switch {
	case err != nil:
		x.err = fmt.Errorf("gate: take over request %s: %w", x.key.RequestID, err)
		return agentplane.ExecutionResult{}
	case !ok: // another execution took it over or finished it first
		res, _ := x.held(holder)
		return res
	}
	x.claimed, x.claimedAt = true, x.now
	var r running
	if json.Unmarshal(prev.Running, &r) == nil && r.Intent != nil {
		x.intent, x.action = r.Intent, r.Intent.Action
		if x.inv.Turn == nil && r.Input != nil && r.Decision != nil {
			x.inv.Turn = &Turn{Input: *r.Input, Decision: *r.Decision, RequestID: x.key.RequestID}
		}
	}
	x.res = failed(agentplane.CodeInterrupted, x.inv.Tool, "request %q was running %s when its instance stopped: it may have acted, and is not run again; if it did not, ask again with a new request id",
		x.key.RequestID, x.action)
	res, err := x.commit()
	x.err = err
	return res
}

// TakeOver finishes a request whose claim is stale (see Stale) as
// interrupted, recording it in its session's audit chain with what it
// was running, and returns its result and the record's sequence number.
// A request that is not stale, or that another execution finished or
// took over meanwhile, is answered as it stands (the recorded result, or
// request_in_progress).
func (g *Gate) TakeOver(ctx context.Context, req store.Request) (agentplane.ExecutionResult, error) {
	sess, err := g.store.Session(ctx, req.Key.SessionID)
	if err != nil {
		return agentplane.ExecutionResult{}, fmt.Errorf("gate: take over request %s: %w", req.Key.RequestID, err)
	}
	var r running
	json.Unmarshal(req.Running, &r) // the record says what it can
	inv := Invocation{SessionID: sess.ID, RequestID: req.Key.RequestID, Principal: req.Key.Principal, Origin: OriginAPI,
		Roles: slices.Clone(r.Roles), Approval: r.Approval}
	if r.Intent != nil {
		if o := Origin(r.Intent.Origin); o.Valid() {
			inv.Origin = o
		}
	}
	x := execution{g: g, ctx: ctx, inv: &inv, now: g.now(), sess: sess, base: sess.Version, mode: g.reg.ModeOf(sess.Mode),
		requestID: req.Key.RequestID, key: &req.Key, digest: req.Digest, action: "a request"}
	res, _ := x.held(req)
	return res, x.err
}

// Recover takes over every request whose claim is stale (see TakeOver):
// what instances that stopped while their tools ran left behind and
// nobody retried. It returns how many it recorded as interrupted; a
// request it cannot take over is logged and left for the next call. A
// serving process calls it now and then (core.Core.Recover).
func (g *Gate) Recover(ctx context.Context) (int, error) {
	n := 0
	for {
		reqs, err := g.store.Stale(ctx, g.staleBefore(g.now()), recoverBatch)
		if err != nil {
			return n, fmt.Errorf("gate: list stale requests: %w", err)
		}
		took := 0
		for _, req := range reqs {
			res, err := g.TakeOver(ctx, req)
			if err != nil {
				if ctx.Err() != nil {
					return n, ctx.Err()
				}
				g.log.Error("a stale request could not be taken over", "session", req.Key.SessionID, "request", req.Key.RequestID, "err", err)
				continue
			}
			if res.Error != nil && res.Error.Code == agentplane.CodeInterrupted {
				took++
			}
		}
		n += took
		if len(reqs) < recoverBatch || took == 0 {
			return n, nil
		}
	}
}

// recoverBatch is how many stale requests Recover reads at a time.
const recoverBatch = 100
