package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/tool"
)

// Recorded is a tool outcome replayed from an audit log: the gate reports
// it exactly as it was recorded (code and detail), adding nothing, so a
// replayed failure reads as the original did.
type Recorded struct {
	Code   string
	Detail string
}

func (r *Recorded) Error() string { return r.Detail }

// run runs the tool with the gate's timeout. Built-in effect tools run
// nothing: the command's declared effects are applied by effects. A tool
// that errs, hangs, panics or answers with something other than JSON
// yields a failed result.
func (x *execution) run() {
	if x.decided() {
		return
	}
	if agentplane.IsEffectTool(x.tool) {
		x.out = x.intent.Args
		return
	}
	t, ok := x.g.tools.Get(x.tool)
	if !ok {
		x.unavailable()
		return
	}
	x.acted = t.Spec().Impact != tool.ImpactRead
	x.called = true
	timeout := x.g.toolTimeout
	ci := tool.CallInfo{Context: x.invocationContext(), Session: x.sess.Clone()}
	ctx, cancel := context.WithTimeout(tool.WithCallInfo(x.ctx, ci), timeout)
	defer cancel() // the tool must stop acting once its context is done (see tool.Tool)
	type answer struct {
		out json.RawMessage
		err error
	}
	done := make(chan answer, 1)
	args := x.intent.Args // the goroutine must not hold x: it would move x to the heap
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- answer{err: fmt.Errorf("panicked: %v", r)}
			}
		}()
		out, err := t.Call(ctx, args)
		done <- answer{out, err}
	}()
	select {
	case a := <-done:
		var rec *Recorded
		switch {
		case errors.As(a.err, &rec):
			x.res = failed(rec.Code, x.tool, "%s", rec.Detail)
		case errors.Is(a.err, tool.ErrUnavailable):
			x.unavailable()
			x.res.Message += ": " + a.err.Error()
			x.res.Error.Detail = x.res.Message
		case a.err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			x.res = failed(agentplane.CodeTimeout, x.tool, "tool %s did not answer within %s", x.tool, timeout)
		case a.err != nil:
			x.res = failed(agentplane.CodeToolFailed, x.tool, "tool %s: %v", x.tool, a.err)
		default:
			x.out, x.res = a.out, checkOutput(x.tool, a.out) // the output is parsed once, here
			if x.decided() {
				x.out = nil
			}
		}
	case <-ctx.Done():
		x.res = failed(agentplane.CodeTimeout, x.tool, "tool %s did not answer within %s", x.tool, timeout)
		x.g.log.Warn("tool timed out; its call was recorded as failed and must not act any more", "tool", x.tool, "session", x.sess.ID, "timeout", timeout)
	}
}

// unavailable fails the invocation with tool_unavailable: the tool is not
// connected now.
func (x *execution) unavailable() {
	what := x.binding
	if x.cmd != nil {
		what = fmt.Sprintf("%s=%q", x.cmd.Parameter, x.item.Header.ID)
	}
	x.res = failed(agentplane.CodeToolUnavailable, x.tool, "%s would run tool %s with %s, but the tool is not connected", x.action, x.tool, what)
}

// checkOutput decides a tool's output that the audit log cannot keep as
// it is — not JSON, or JSON its reader refuses — a failure; the zero
// result when it can.
func checkOutput(name string, out json.RawMessage) agentplane.ExecutionResult {
	if len(out) == 0 {
		return agentplane.ExecutionResult{}
	}
	err := canonjson.Check(out)
	switch {
	case err == nil:
		return agentplane.ExecutionResult{}
	case !json.Valid(out):
		return failed(agentplane.CodeToolFailed, name, "tool %s returned output that is not JSON", name)
	}
	return failed(agentplane.CodeToolFailed, name, "tool %s returned JSON the audit log cannot keep: %v", name, err) // it ran, but cannot be recorded as it is
}

// invocationContext is what the tool is told about the call: built once,
// here, from what the gate decided on. Its keys are the gate's: the
// request id the call runs under (the caller's, or one the gate made),
// and an idempotency key derived from the principal, the session and
// that request (or the caller's downstream key), so no two people's or
// sessions' calls share a key whatever their clients or models sent.
func (x *execution) invocationContext() agentplane.InvocationContext {
	inv := x.inv
	key := inv.IdempotencyKey
	if key == "" {
		key = x.requestID
	}
	roles := inv.Roles
	if roles == nil {
		roles = []string{}
	}
	return agentplane.InvocationContext{
		Principal:         agentplane.ContextPrincipal{UserID: inv.Principal, Roles: roles},
		Origin:            string(inv.Origin),
		SessionID:         x.sess.ID,
		Mode:              x.mode,
		ActiveWorkContext: x.sess.AWC,
		SnapshotVersion:   x.sess.Version,
		RequestID:         x.requestID,
		IdempotencyKey:    DownstreamKey(inv.Principal, x.sess.ID, key),
		Authorization:     x.authorized,
	}
}

// DownstreamKey is the idempotency key a call is sent downstream with:
// 32 hex digits of a SHA-256 over the principal, the session and the
// key the call runs under there (its request id, or a workflow task's
// one key for all its attempts). The same request gets the same key on
// every retry; calls of different principals or sessions never share
// one, whatever request ids their clients or models chose.
func DownstreamKey(principal, session, key string) string {
	const domain = "agentplane/idempotency\x00"
	var buf [256]byte // the hashed bytes, on the stack when they fit
	b := append(buf[:0], domain...)
	b = append(append(append(append(append(b, principal...), 0), session...), 0), key...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
