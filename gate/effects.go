package gate

import (
	"cmp"
	"fmt"

	"github.com/agentplane/agentplane"
)

// effects decides a successful run: a tool invocation changes the world,
// not the session (but uses up the pending confirmation it answered); a
// command's declared effects give the next state, with its pending state
// cleared, its version moved on and its diff.
func (x *execution) effects() {
	if x.decided() {
		return
	}
	if x.cmd == nil {
		x.res = agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: fmt.Sprintf("%s done.", x.tool), Tool: x.tool, Output: x.out}
		// a proposed call the human confirmed, or made themselves: its
		// pending confirmation is used up
		if pc := x.sess.PendingConfirmation; pc != nil && pc.Tool == x.tool && canonical(pc.Args) == x.binding && (x.inv.Origin.Human() || x.use != "") {
			next := x.sess.Clone()
			next.PendingConfirmation = nil
			next.Version++
			diff, err := stateDiff(x.sess, next)
			if err != nil {
				x.res = failed(agentplane.CodeInternal, x.tool, "%v", err)
				return
			}
			x.next, x.res.StateDiff, x.res.SnapshotID, x.res.Session = next, diff, agentplane.SnapshotID(next.ID, next.Version), next
		}
		return
	}
	next := x.sess.Clone()
	var msg string
	if x.switchMode {
		next.Mode = x.mode
		m, _ := x.g.reg.Mode(x.mode)
		msg = fmt.Sprintf("Mode: %s.", m.DisplayName)
	}
	msg = joinMsg(msg, applyEffects(next, x.cmd, x.item))
	next.PendingPicker, next.PendingConfirmation = nil, nil
	next.Version++
	if err := next.AWC.Validate(); err != nil {
		x.res = failed(agentplane.CodeInvalidState, x.tool, "%v", err)
		return
	}
	diff, err := stateDiff(x.sess, next)
	if err != nil {
		x.res = failed(agentplane.CodeInternal, x.tool, "%v", err)
		return
	}
	x.next = next
	x.res = agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: msg, Tool: x.tool, Output: x.out,
		StateDiff: diff, SnapshotID: agentplane.SnapshotID(next.ID, next.Version), Session: next}
}

// applyEffects applies the command's declared effects to s and says what
// changed.
func applyEffects(s *agentplane.Session, cmd *agentplane.CommandDefinition, item *agentplane.ResolverItem) string {
	var msg string
	if cmd.SetsSessionMode {
		s.Mode = item.Header.ID
		msg = fmt.Sprintf("Mode: %s.", item.Header.DisplayName)
	}
	if cmd.SetsActiveContext {
		h := item.Header
		s.AWC = agentplane.ActiveWorkContext{
			Domain:          cmd.Domain,
			EntityType:      cmd.ActiveEntityType,
			Entity:          &h,
			RelatedEntities: append([]agentplane.RelatedEntityRef(nil), item.Related...),
		}
		msg = joinMsg(msg, fmt.Sprintf("Now working on %s %s (%s).", cmp.Or(cmd.ActiveEntityName, cmd.ActiveEntityType), h.DisplayName, h.ID))
	}
	if cmd.ClearsActiveContext {
		s.AWC = agentplane.ActiveWorkContext{}
		msg = joinMsg(msg, fmt.Sprintf("Closed %s.", item.Header.DisplayName))
	}
	if msg == "" {
		msg = fmt.Sprintf("%s: %s — done.", cmd.DisplayName, item.Header.DisplayName)
	}
	return msg
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

// unchanged completes a result that changed nothing: an empty diff and the
// snapshot the session still is.
func unchanged(r agentplane.ExecutionResult, sess *agentplane.Session) agentplane.ExecutionResult {
	r.Session = sess
	r.StateDiff = []agentplane.PatchOp{}
	r.SnapshotID = agentplane.SnapshotID(sess.ID, sess.Version)
	return r
}
