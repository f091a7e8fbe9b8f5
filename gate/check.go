package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/canonjson"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/tool"
)

// check takes the checks before anything runs: the command or tool is
// known and active for the session's mode and the principal's roles, its
// arguments fit, a command's id exists in its active source, and its
// preconditions hold.
func (x *execution) check() {
	if x.inv.Tool != "" {
		x.checkTool()
	} else {
		x.checkCommand()
	}
}

// checkCommand checks a command invocation: the command is active, its id
// exists in its active source, its preconditions hold.
func (x *execution) checkCommand() {
	inv := x.inv
	x.intent = intentOf(inv, nil)
	cmd, ok := x.g.reg.Command(inv.CommandID)
	if !ok {
		x.res = rejected(agentplane.CodeUnknownAction, "unknown command or tool %q", inv.CommandID)
		return
	}
	x.cmd, x.tool, x.intent, x.binding = cmd, cmd.Tool, intentOf(inv, cmd), inv.ResolvedID
	reg := x.g.reg
	if !x.toMode() {
		return
	}
	if x.switchMode {
		x.binding = binding(inv.ResolvedID, x.mode)
	}
	switch {
	case cmd.Kind == agentplane.KindLauncher:
		x.res = rejected(agentplane.CodeInvalidArgs, "%s is a launcher: it opens a picker and runs nothing; invoke %s", cmd.ID, cmd.OnSelect)
		return
	case !reg.CommandActive(x.mode, inv.Roles, cmd.ID):
		x.res = rejected(agentplane.CodeInactiveAction, "command %s is not active in mode %q for this principal", cmd.ID, x.mode)
		return
	case !reg.SourceActive(x.mode, inv.Roles, cmd.Source):
		x.res = rejected(agentplane.CodeInactiveAction, "%s is not active in mode %q", cmd.Source, x.mode)
		return
	}
	src, _ := reg.Source(cmd.Source)
	ctx := x.ctx
	if src.Provided() { // the items the session's person is served
		ctx = resolve.WithCaller(ctx, resolve.SessionCaller(x.sess, inv.Roles, x.mode))
	}
	ix, _, err := src.Index(ctx)
	if err != nil {
		x.res = failed(agentplane.CodeSourceUnavailable, cmd.Tool, "%v", err)
		return
	}
	x.read(cmd.Source, ix)
	if x.item, ok = ix.Lookup(inv.ResolvedID); !ok {
		x.res = rejected(agentplane.CodeInvalidArgs, "%s: %q is not an item of %s", cmd.Parameter, inv.ResolvedID, cmd.Source)
		return
	}
	if why := registry.Preconditions(cmd, x.mode, x.sess.AWC); why != "" {
		x.res = rejected(agentplane.CodePreconditionFailed, "%s: %s", cmd.ID, why)
		return
	}
	if cmd.ClearsActiveContext {
		// a command acts on its one resolved id: it clears that item, or
		// nothing
		switch awc := x.sess.AWC; {
		case awc.Entity == nil:
			x.res = rejected(agentplane.CodePreconditionFailed, "%s: %s is not active: nothing is active to close", cmd.ID, x.item.Header.DisplayName)
		case awc.Entity.ID != x.item.Header.ID:
			x.res = rejected(agentplane.CodePreconditionFailed, "%s: %s (%s) is not active; the active %s is %s (%s), left as it is",
				cmd.ID, x.item.Header.DisplayName, x.item.Header.ID, awc.EntityType, awc.Entity.DisplayName, awc.Entity.ID)
		}
	}
}

// toMode checks an invocation's Mode, and makes it the mode the command is
// checked and runs in. It reports false, with the result decided, when the
// mode may not be used.
func (x *execution) toMode() bool {
	inv := x.inv
	if inv.Mode == "" || inv.Mode == x.mode {
		return true
	}
	if _, ok := x.g.reg.Mode(inv.Mode); !ok {
		x.res = rejected(agentplane.CodeInvalidArgs, "%s: unknown mode %q", inv.CommandID, inv.Mode)
		return false
	}
	if _, ok := x.g.reg.Launcher(x.mode, inv.Roles, inv.CommandID, inv.Mode); !ok {
		x.res = rejected(agentplane.CodeInactiveAction, "%s cannot run in mode %q from mode %q: no launcher active here selects it for that mode", inv.CommandID, inv.Mode, x.mode)
		return false
	}
	x.mode, x.switchMode = inv.Mode, true
	return true
}

// checkTool checks a tool invocation: the tool is declared and active, and
// its arguments match its input schema. A built-in effect tool is checked
// as the active command that declares it.
func (x *execution) checkTool() {
	inv := x.inv
	if inv.Mode != "" {
		x.tool = inv.Tool
		x.intent = &agentplane.Intent{Type: agentplane.IntentActionCall, Action: inv.Tool, RequestID: inv.RequestID, Origin: string(inv.Origin), Mode: inv.Mode}
		x.res = rejected(agentplane.CodeInvalidArgs, "%s: a tool runs in the session's mode; mode %q is for a launcher's command", inv.Tool, inv.Mode)
		return
	}
	args := inv.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	x.tool = inv.Tool
	x.intent = &agentplane.Intent{Type: agentplane.IntentActionCall, Action: inv.Tool, RequestID: inv.RequestID, Origin: string(inv.Origin)}
	if canonjson.Check(args) == nil { // the record keeps only what its reader reads; the refusal says what came
		x.intent.Args = args
	}
	t, ok := x.g.tools.Get(inv.Tool)
	if !ok {
		x.res = rejected(agentplane.CodeUnknownAction, "unknown command or tool %q", inv.Tool)
		return
	}
	if trimmed := bytes.TrimSpace(args); len(trimmed) == 0 || trimmed[0] != '{' {
		shown := string(trimmed)
		if len(shown) > 200 {
			shown = shown[:200] + "…"
		}
		x.res = rejected(agentplane.CodeInvalidArgs, "%s: the arguments must be a JSON object, not %s", inv.Tool, shown)
		return
	}
	if !x.g.reg.ToolActive(x.mode, inv.Roles, inv.Tool, t.Spec().Server) {
		x.res = rejected(agentplane.CodeInactiveAction, "tool %s is not active in mode %q for this principal", inv.Tool, x.mode)
		return
	}
	canonical, err := x.g.tools.Validate(inv.Tool, args)
	if err != nil {
		x.res = rejected(agentplane.CodeInvalidArgs, "%s: %v", inv.Tool, err)
		return
	}
	x.binding, x.intent.Args = string(canonical), canonical
	if !agentplane.IsEffectTool(inv.Tool) {
		return
	}
	cmdID, id, res := x.effectCommand(canonical)
	if cmdID == "" {
		x.res = res
		return
	}
	// Check as the command; the record shows the tool call that was made.
	intent, binding := x.intent, x.binding
	as := *inv
	as.Tool, as.CommandID, as.ResolvedID = "", cmdID, id
	x.inv = &as
	x.checkCommand()
	x.inv, x.intent = inv, intent
	x.binding = binding
}

// effectCommand maps a call of a built-in effect tool to the active command
// that declares it, so that the tool can do only what a command could: the
// mode must be in the modes catalog, the entity in an active catalog.
// It returns "" and a rejection when no active command fits.
func (x *execution) effectCommand(args json.RawMessage) (cmdID, id string, res agentplane.ExecutionResult) {
	var in struct {
		Mode      string `json:"mode"`
		CatalogID string `json:"catalog_id"`
		ID        string `json:"id"`
	}
	json.Unmarshal(args, &in)
	reg, sess := x.g.reg, x.sess
	for _, cid := range reg.ActiveCommands(x.mode, x.inv.Roles) {
		c, _ := reg.Command(cid)
		if c.Tool != x.inv.Tool {
			continue
		}
		switch x.inv.Tool {
		case tool.SetModeName:
			return c.ID, in.Mode, res
		case tool.SetActiveEntityName:
			if c.Source.CatalogID == in.CatalogID {
				return c.ID, in.ID, res
			}
		case tool.ClearActiveEntityName:
			if sess.AWC.Entity != nil && x.catalogType(c.Source) == sess.AWC.EntityType {
				return c.ID, sess.AWC.Entity.ID, res
			}
		}
	}
	if x.inv.Tool == tool.ClearActiveEntityName && sess.AWC.Entity == nil {
		return "", "", rejected(agentplane.CodePreconditionFailed, "nothing is active to clear")
	}
	return "", "", rejected(agentplane.CodeInactiveAction, "no active command in mode %q lets %s do that", x.mode, x.inv.Tool)
}

// catalogType is the entity type of a catalog source, or "".
func (x *execution) catalogType(src agentplane.ResolverSource) string {
	if c, ok := x.g.reg.Catalog(src.CatalogID); ok {
		return c.EntityType
	}
	return ""
}

// intentOf is the protocol intent of a command invocation. It never holds
// a confirmation token: the record keeps only its digest.
func intentOf(inv *Invocation, cmd *agentplane.CommandDefinition) *agentplane.Intent {
	in := &agentplane.Intent{Type: agentplane.IntentActionCall, Action: inv.CommandID, RequestID: inv.RequestID, Origin: string(inv.Origin), Mode: inv.Mode}
	if cmd != nil && utf8.ValidString(inv.ResolvedID) { // {"PARAMETER":"ID"}, canonical
		b := canonjson.AppendString(append(make([]byte, 0, len(cmd.Parameter)+len(inv.ResolvedID)+8), '{'), cmd.Parameter)
		b = canonjson.AppendString(append(b, ':'), inv.ResolvedID)
		in.Args = append(b, '}')
	}
	return in
}

func rejected(code, format string, args ...any) agentplane.ExecutionResult {
	msg := fmt.Sprintf(format, args...)
	return agentplane.ExecutionResult{Status: agentplane.StatusRejected, Message: msg,
		Error: &agentplane.ResultError{Code: code, Detail: msg}, StateDiff: []agentplane.PatchOp{}}
}

func failed(code, tool, format string, args ...any) agentplane.ExecutionResult {
	r := rejected(code, format, args...)
	r.Status, r.Tool = agentplane.StatusFailed, tool
	return r
}
