package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/tool"
)

// Policy says when a tool needs the human's confirmation before it runs.
type Policy string

// Policies.
const (
	ConfirmNever       Policy = "never"
	ConfirmAlways      Policy = "always"       // it asks for it, or its risk is high
	ConfirmUnlessHuman Policy = "unless_human" // it changes the world: unless the human asked directly
)

// ToolPolicy is a tool's confirmation policy: a tool that requires
// confirmation or whose risk is high is always confirmed; one that changes
// the world (impact external) is confirmed unless the human asked for it
// directly (origin user or api); others never.
func ToolPolicy(s tool.Spec) Policy {
	switch {
	case s.RequiresConfirmation || s.Risk == tool.RiskHigh:
		return ConfirmAlways
	case s.Impact == tool.ImpactExternal:
		return ConfirmUnlessHuman
	}
	return ConfirmNever
}

// NeedsConfirmation applies the confirmation policy to an invocation: the
// command requires confirmation or produces side effects, or its tool's
// policy asks for it for this origin. spec is nil for a tool that is not
// registered.
func NeedsConfirmation(cmd *agentplane.CommandDefinition, spec *tool.Spec, origin Origin) bool {
	if cmd != nil && cmd.NeedsConfirmation() {
		return true
	}
	if spec == nil {
		return false
	}
	switch ToolPolicy(*spec) {
	case ConfirmAlways:
		return true
	case ConfirmUnlessHuman:
		return !origin.Human()
	}
	return false
}

// Digest is the SHA-256 of a confirmation token, in hex: what the store
// and the audit log keep instead of the token.
func Digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// confirm applies the confirmation policy. An invocation that needs
// confirmation and brings none gets confirmation_required with a new token
// bound to it (delivered only to the human's channel).
//
// A confirmation presented — a token, or the human's yes in a turn — is
// checked against what it confirms and used up by the claim, whether or
// not the policy asks for one for this origin: the human confirming what
// the LLM proposed (a call that needs confirmation from the LLM, not from
// the human) confirms that proposal, once. Were it waved through because
// the human may run the call directly, every repeat of the confirmation
// would run it again.
func (x *execution) confirm() {
	if x.decided() {
		return
	}
	var spec *tool.Spec
	if t, ok := x.g.tools.Get(x.tool); ok {
		s := t.Spec()
		spec = &s
	}
	x.authorized = agentplane.Authorization{Kind: agentplane.AuthorizedByPolicy}
	inv := x.inv
	switch needs := NeedsConfirmation(x.cmd, spec, inv.Origin); {
	case inv.ConfirmationToken != "":
		x.checkToken()
	case inv.Confirmed:
		x.checkPending()
	case !needs && !(inv.AskConfirmation && inv.Origin.Human()):
	case inv.Origin == OriginWorkflow && inv.Approval != "":
		// the human approved the workflow's layer holding this call
		x.authorized = agentplane.Authorization{Kind: agentplane.AuthorizedByApproval, Approval: inv.Approval}
	default:
		x.ask()
	}
}

// ask issues a token for the invocation and asks for confirmation.
func (x *execution) ask() {
	q := fmt.Sprintf("Confirm %s with %s?", x.tool, x.binding)
	if x.cmd != nil && x.item != nil {
		q = registry.ConfirmationQuestion(x.cmd, x.item.Header.DisplayName)
	}
	x.token = x.g.newToken()
	x.issue = &store.Confirmation{Digest: Digest(x.token), SessionID: x.sess.ID, Action: x.action, Binding: x.binding,
		Version: x.sess.Version, ExpiresAt: x.now.Add(x.g.reg.Settings().ConfirmationTTL)}
	x.res = agentplane.ExecutionResult{Status: agentplane.StatusConfirmationRequired, Message: q, Tool: x.tool,
		Error: &agentplane.ResultError{Code: agentplane.CodeConfirmationRequired, Detail: q}, StateDiff: []agentplane.PatchOp{}}
}

// checkToken accepts a presented token only from the human, for exactly
// the invocation, session and version it was issued for, once, in time.
func (x *execution) checkToken() {
	inv := x.inv
	if !inv.Origin.Human() {
		x.res = rejected(agentplane.CodeConfirmationInvalid, "a confirmation token is accepted only from the human (origin user or api), not from %s", inv.Origin)
		return
	}
	digest := Digest(inv.ConfirmationToken)
	x.presented = digest
	conf, ok, err := x.g.store.Confirmation(x.ctx, digest)
	switch {
	case err != nil:
		x.res = failed(agentplane.CodeInternal, x.tool, "confirmation lookup failed")
		x.g.log.Error("confirmation lookup failed", "session", x.sess.ID, "err", err)
	case !ok:
		x.res = rejected(agentplane.CodeConfirmationInvalid, "unknown confirmation token")
	case conf.Used:
		x.res = rejected(agentplane.CodeConfirmationInvalid, "the confirmation token was used already")
	case !x.now.Before(conf.ExpiresAt):
		x.res = rejected(agentplane.CodeConfirmationInvalid, "the confirmation token expired at %s", conf.ExpiresAt.UTC().Format(time.RFC3339))
	case conf.SessionID != x.sess.ID:
		x.res = rejected(agentplane.CodeConfirmationInvalid, "the confirmation token belongs to another session")
	case conf.Action != x.action || conf.Binding != x.binding:
		x.res = rejected(agentplane.CodeConfirmationInvalid, "the confirmation token confirms %s(%s), not %s(%s)", conf.Action, conf.Binding, x.action, x.binding)
	case conf.Version != x.sess.Version:
		x.res = rejected(agentplane.CodeConfirmationInvalid, "the session changed since the confirmation was asked (version %d, now %d)", conf.Version, x.sess.Version)
	default:
		x.use = digest // used up by the claim, before anything runs
		x.authorized = agentplane.Authorization{Kind: agentplane.AuthorizedByHuman}
	}
}

// checkPending accepts the human's yes in a turn for the session's pending
// confirmation of exactly this command and item, in time. The state
// change it leads to (the pending confirmation cleared, the version moved
// on) makes it once only.
func (x *execution) checkPending() {
	pc := x.sess.PendingConfirmation
	switch {
	case x.inv.Origin != OriginUser || x.inv.Turn == nil:
		x.res = rejected(agentplane.CodeConfirmationInvalid, "only the human's own turn confirms a pending confirmation, not %s", x.inv.Origin)
	case pc == nil:
		x.res = rejected(agentplane.CodeConfirmationInvalid, "nothing is waiting for confirmation")
	case pc.Tool != "" && (pc.Tool != x.action || canonical(pc.Args) != x.binding):
		x.res = rejected(agentplane.CodeConfirmationInvalid, "the pending confirmation is for %s(%s), not %s(%s)", pc.Tool, pc.Args, x.action, x.binding)
	case pc.Tool == "" && (pc.CommandID != x.action || binding(pc.ResolvedID, pc.Mode) != x.binding):
		x.res = rejected(agentplane.CodeConfirmationInvalid, "the pending confirmation is for %s(%s), not %s(%s)", pc.CommandID, binding(pc.ResolvedID, pc.Mode), x.action, x.binding)
	case !x.now.Before(pc.ExpiresAt):
		x.res = rejected(agentplane.CodeConfirmationInvalid, "the pending confirmation expired at %s", pc.ExpiresAt.UTC().Format(time.RFC3339))
	default:
		x.yes = true // used up by the claim, before anything runs
		x.authorized = agentplane.Authorization{Kind: agentplane.AuthorizedByHuman}
	}
}

// canonical is a JSON value's canonical form (RFC 8785), or the bytes as
// they are when they are not JSON: a stored session may hold arguments
// reformatted (PostgreSQL's jsonb spaces them), and a binding is
// compared by its value.
func canonical(raw json.RawMessage) string {
	if c, err := canonjson.Append(nil, raw, nil); err == nil {
		return string(c)
	}
	return string(raw)
}

// binding is what a confirmation of a command binds: its resolved id, and
// the mode it switches to, if any.
func binding(resolvedID, mode string) string {
	if mode == "" {
		return resolvedID
	}
	return resolvedID + " in mode " + mode
}
