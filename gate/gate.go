// Package gate is the single execution boundary: every action that changes
// anything, whoever asks for it, passes through Gate.Execute, and nothing
// else writes a session.
//
// Execute takes these steps, in this order, in this one place: load the
// session; check that the command is active for the session's mode and the
// principal's roles; check that the id exists in the command's resolver
// source (no invented ids); check the command's preconditions; apply the
// confirmation policy (a confirmation token bound to the exact invocation);
// run the tool with a timeout (a panic is a failed result); apply the
// command's declared effects with an optimistic version check; and commit
// the new state, its RFC 6902 diff and the audit record together.
//
//	g, _ := gate.New(reg, memstore.New(), nil)
//	s, _ := g.Open(ctx, "s1", "")
//	res, _ := g.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "set_mode", ResolvedID: "ddr", Origin: gate.OriginUser})
//	// res.Status == agentplane.StatusSuccess, res.Session.Mode == "ddr"
package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/router"
	"github.com/agentplane/agentplane/tool"
)

// Origin says who asked for an invocation.
type Origin string

// Origins.
const (
	OriginUser          Origin = "user"
	OriginLLM           Origin = "llm"
	OriginMCP           Origin = "mcp"
	OriginWorkflow      Origin = "workflow"
	OriginAgentInternal Origin = "agent_internal"
	OriginAPI           Origin = "api"
)

// humanChannel reports whether results for this origin go to the human,
// who alone may see confirmation tokens.
func (o Origin) humanChannel() bool { return o == OriginUser || o == OriginAPI }

// Invocation asks the gate to run a command with its one resolved id, or a
// tool with JSON arguments.
type Invocation struct {
	SessionID  string
	CommandID  string
	ResolvedID string
	Tool       string          // instead of CommandID: a tool offered to the LLM and MCP clients
	Args       json.RawMessage // the tool's arguments, a JSON object
	RequestID  string          // a repeated request id returns the recorded result and runs nothing
	Origin     Origin
	Roles      []string // the principal's roles
	// ConfirmationToken confirms an invocation that needs confirmation.
	ConfirmationToken string
	// Turn, when the invocation answers a user turn, is recorded with it.
	Turn *Turn
}

// Turn is the user turn an invocation or a decision belongs to.
type Turn struct {
	Input    agentplane.TurnInput
	Decision agentplane.Decision
}

// Confirmation is an issued confirmation token and the exact invocation it
// confirms.
type Confirmation struct {
	Token     string    `json:"token"`
	SessionID string    `json:"session_id"`
	Action    string    `json:"action"`  // the command id or tool name
	Binding   string    `json:"binding"` // a command's resolved id, or a tool's arguments as compact JSON
	Version   int64     `json:"version"` // the session version the invocation must run at
	ExpiresAt time.Time `json:"expires_at"`
	Used      bool      `json:"used"`
}

// Store keeps what the gate reads and commits. Implementations are safe for
// concurrent use.
type Store interface {
	// Session returns a copy of the session, or an error with code not_found.
	Session(ctx context.Context, id string) (*agentplane.Session, error)
	// Result returns the result recorded for a request id.
	Result(ctx context.Context, requestID string) (agentplane.ExecutionResult, bool, error)
	// Confirmation returns an issued confirmation token.
	Confirmation(ctx context.Context, token string) (Confirmation, bool, error)
	// Commit applies c atomically: all of it or, with an error, none.
	// It fails with code version_conflict when c.Session's version is not
	// one more than the stored version (1 for a new session), and with
	// code confirmation_invalid when c.Use names a token that is unknown
	// or used.
	Commit(ctx context.Context, c *Commit) error
}

// Commit is one atomic change of the store.
type Commit struct {
	SessionID string
	// Session is the new state; nil when the state is unchanged.
	Session *agentplane.Session
	// Record is appended to the session's audit chain; the store seals it.
	// When Session is nil and the record has a State, the store sets State
	// to the session as stored when the commit applies — the state after an
	// event that changed nothing, even if another writer moved it since it
	// was read.
	Record *audit.Record
	// RequestID, with Result, makes the request idempotent.
	RequestID string
	Result    *agentplane.ExecutionResult
	// Issue stores a new confirmation token; Use marks one used.
	Issue *Confirmation
	Use   string
}

// Sink receives a copy of every record after it is committed, for example
// an audit.File that exports the log as JSON Lines.
type Sink interface {
	Write(r *audit.Record) error
}

// Gate executes invocations. It is safe for concurrent use.
type Gate struct {
	reg         *router.Registry
	store       Store
	now         func() time.Time
	newToken    func() string
	tools       *tool.Registry
	toolTimeout time.Duration
	sink        Sink
	argSchemas  map[string]*jsonschema.Schema // by command id
}

// Options configure a Gate. nil means defaults.
type Options struct {
	Now         func() time.Time // the clock; nil means time.Now
	NewToken    func() string    // confirmation tokens; nil means 16 random bytes in hex
	Tools       *tool.Registry   // the tools that run, besides the built-in ones; nil means none
	ToolTimeout time.Duration    // how long a tool may run; 0 means 30s
	Sink        Sink             // a copy of every committed record; nil means none
}

// New returns a gate over the registry and store.
func New(reg *router.Registry, store Store, opts *Options) (*Gate, error) {
	if reg == nil {
		return nil, errors.New("gate: missing registry (pass router.NewRegistry(cfg, nil))")
	}
	if store == nil {
		return nil, errors.New("gate: missing store (pass memstore.New())")
	}
	if opts == nil {
		opts = &Options{}
	}
	g := &Gate{reg: reg, store: store, now: opts.Now, newToken: opts.NewToken, tools: opts.Tools,
		toolTimeout: opts.ToolTimeout, sink: opts.Sink}
	if g.tools == nil {
		g.tools = tool.NewRegistry()
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.newToken == nil {
		g.newToken = randomToken
	}
	if g.toolTimeout <= 0 {
		g.toolTimeout = 30 * time.Second
	}
	var cmds []*agentplane.CommandDefinition
	for i := range reg.Config().Commands {
		cmds = append(cmds, &reg.Config().Commands[i])
	}
	var err error
	if g.argSchemas, err = argsSchemas(cmds); err != nil {
		return nil, err
	}
	return g, nil
}

func randomToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
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

// Execute runs an invocation. Outcomes are results, not errors: a
// rejected, failed or confirmation_required result changes nothing but
// the audit log (every attempt is recorded). The error is for a store that
// failed.
func (g *Gate) Execute(ctx context.Context, inv Invocation) (agentplane.ExecutionResult, error) {
	if inv.RequestID != "" {
		prev, ok, err := g.store.Result(ctx, inv.RequestID)
		if err != nil {
			return agentplane.ExecutionResult{}, fmt.Errorf("gate: look up request %s: %w", inv.RequestID, err)
		}
		if ok {
			if sess, err := g.store.Session(ctx, inv.SessionID); err == nil {
				prev.Session = sess
			}
			return prev, nil
		}
	}
	sess, err := g.store.Session(ctx, inv.SessionID)
	if err != nil {
		if agentplane.ErrorCode(err) == agentplane.CodeNotFound {
			r := rejected(agentplane.CodeNotFound, "no session %q", inv.SessionID)
			r.RequestID = inv.RequestID
			return r, nil // there is no chain to record the attempt in
		}
		return agentplane.ExecutionResult{}, fmt.Errorf("gate: load session %s: %w", inv.SessionID, err)
	}
	now := g.now()
	p := g.prepare(ctx, sess, &inv, now)
	c := &Commit{SessionID: sess.ID, RequestID: inv.RequestID, Result: &p.res, Issue: p.issue}
	if p.res.Status == "" {
		p.res = g.run(ctx, sess, &inv, p)
		if p.res.Status == agentplane.StatusSuccess {
			c.Session, c.Use = p.res.Session, inv.ConfirmationToken
		}
	}
	p.res.RequestID = inv.RequestID
	c.Record = g.record(sess.ID, now, &inv, p.intent, &p.res)
	if c.Session == nil {
		c.Record.State = sess
		p.res = unchanged(p.res, sess)
	}
	err = g.store.Commit(ctx, c)
	if err != nil && c.Session != nil && agentplane.ErrorCode(err) == agentplane.CodeVersionConflict {
		// Someone else changed the session: apply nothing, record the attempt.
		p.res = unchanged(rejected(agentplane.CodeVersionConflict, "session %s changed while %s ran; nothing was applied", sess.ID, p.action), sess)
		p.res.RequestID = inv.RequestID
		c = &Commit{SessionID: sess.ID, RequestID: inv.RequestID, Result: &p.res, Record: g.record(sess.ID, now, &inv, p.intent, &p.res)}
		c.Record.State = sess
		err = g.store.Commit(ctx, c)
	}
	if err != nil {
		return agentplane.ExecutionResult{}, fmt.Errorf("gate: commit %s on session %s: %w", p.action, sess.ID, err)
	}
	g.mirror(c.Record)
	return p.res, nil
}

// prepared is an invocation that passed, or failed, the checks before the
// tool runs.
type prepared struct {
	res     agentplane.ExecutionResult // set when the invocation stops before running
	intent  *agentplane.Intent
	issue   *Confirmation
	action  string                        // command id or tool name
	tool    string                        // the tool that runs
	binding string                        // what a confirmation binds
	cmd     *agentplane.CommandDefinition // nil for a tool invocation
	item    *agentplane.ResolverItem      // the command's resolved item
}

// prepare takes the steps before running: activity, arguments,
// preconditions and confirmation.
func (g *Gate) prepare(ctx context.Context, sess *agentplane.Session, inv *Invocation, now time.Time) prepared {
	mode := sess.Mode
	if _, ok := g.reg.Mode(mode); !ok {
		mode = g.reg.DefaultMode()
	}
	var p prepared
	var question string
	if inv.Tool != "" {
		p, question = g.prepareTool(ctx, sess, inv, mode)
	} else {
		p, question = g.prepareCommand(ctx, sess, inv, mode)
	}
	if p.res.Status != "" || !g.needsConfirmation(p.cmd, p.tool, inv.Origin) {
		return p
	}
	if inv.ConfirmationToken == "" {
		p.issue = &Confirmation{Token: g.newToken(), SessionID: sess.ID, Action: p.action, Binding: p.binding,
			Version: sess.Version, ExpiresAt: now.Add(g.reg.Settings().ConfirmationTTL)}
		p.res = agentplane.ExecutionResult{Status: agentplane.StatusConfirmationRequired, Message: question, Tool: p.tool,
			Error: &agentplane.ResultError{Code: agentplane.CodeConfirmationRequired, Detail: question}, StateDiff: []agentplane.PatchOp{}}
		if inv.Origin.humanChannel() {
			p.res.ConfirmationToken = p.issue.Token // never to the LLM's or an agent's channel
		}
		return p
	}
	conf, ok, err := g.store.Confirmation(ctx, inv.ConfirmationToken)
	switch {
	case err != nil:
		p.res = failed(agentplane.CodeInternal, p.tool, "confirmation lookup failed")
	case !ok:
		p.res = rejected(agentplane.CodeConfirmationInvalid, "unknown confirmation token")
	case conf.Used:
		p.res = rejected(agentplane.CodeConfirmationInvalid, "the confirmation token was used already")
	case !now.Before(conf.ExpiresAt):
		p.res = rejected(agentplane.CodeConfirmationInvalid, "the confirmation token expired at %s", conf.ExpiresAt.UTC().Format(time.RFC3339))
	case conf.SessionID != sess.ID:
		p.res = rejected(agentplane.CodeConfirmationInvalid, "the confirmation token belongs to another session")
	case conf.Action != p.action || conf.Binding != p.binding:
		p.res = rejected(agentplane.CodeConfirmationInvalid, "the confirmation token confirms %s(%s), not %s(%s)", conf.Action, conf.Binding, p.action, p.binding)
	case conf.Version != sess.Version:
		p.res = rejected(agentplane.CodeConfirmationInvalid, "the session changed since the confirmation was asked (version %d, now %d)", conf.Version, sess.Version)
	}
	return p
}

// prepareCommand checks a command invocation: the command is active, its
// id exists in its active source, its preconditions hold. It returns the
// confirmation question to ask if one is needed.
func (g *Gate) prepareCommand(ctx context.Context, sess *agentplane.Session, inv *Invocation, mode string) (prepared, string) {
	p := prepared{intent: intentOf(inv, nil), action: inv.CommandID}
	cmd, ok := g.reg.Command(inv.CommandID)
	if !ok {
		p.res = rejected(agentplane.CodeUnknownAction, "unknown command %q", inv.CommandID)
		return p, ""
	}
	p.cmd, p.tool, p.intent, p.binding = cmd, cmd.Tool, intentOf(inv, cmd), inv.ResolvedID
	switch {
	case cmd.Kind == agentplane.KindLauncher:
		p.res = rejected(agentplane.CodeInvalidArgs, "%s is a launcher: it opens a picker and runs nothing; invoke %s", cmd.ID, cmd.OnSelect)
		return p, ""
	case !g.reg.CommandActive(mode, inv.Roles, cmd.ID):
		p.res = rejected(agentplane.CodeInactiveAction, "command %s is not active in mode %q for this principal", cmd.ID, mode)
		return p, ""
	case !g.reg.SourceActive(mode, inv.Roles, cmd.Source):
		p.res = rejected(agentplane.CodeInactiveAction, "%s is not active in mode %q", cmd.Source, mode)
		return p, ""
	}
	src, _ := g.reg.Source(cmd.Source)
	ix, _, err := src.Index(ctx)
	if err != nil {
		p.res = failed(agentplane.CodeSourceUnavailable, cmd.Tool, "%v", err)
		return p, ""
	}
	if p.item, ok = ix.Lookup(inv.ResolvedID); !ok {
		p.res = rejected(agentplane.CodeInvalidArgs, "%s: %q is not an item of %s", cmd.Parameter, inv.ResolvedID, cmd.Source)
		return p, ""
	}
	if msg := preconditionsFail(cmd, sess, mode); msg != "" {
		p.res = rejected(agentplane.CodePreconditionFailed, "%s: %s", cmd.ID, msg)
		return p, ""
	}
	return p, router.ConfirmationQuestion(cmd, p.item.Header.DisplayName)
}

// prepareTool checks a tool invocation: the tool is declared and active,
// and its arguments match its input schema.
func (g *Gate) prepareTool(ctx context.Context, sess *agentplane.Session, inv *Invocation, mode string) (prepared, string) {
	args := inv.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	p := prepared{action: inv.Tool, tool: inv.Tool, intent: &agentplane.Intent{Type: agentplane.IntentActionCall, Action: inv.Tool,
		RequestID: inv.RequestID, Origin: string(inv.Origin), ConfirmationToken: inv.ConfirmationToken}}
	if json.Valid(args) {
		p.intent.Args = args
	}
	if _, ok := g.tools.Get(inv.Tool); !ok {
		p.res = rejected(agentplane.CodeUnknownAction, "unknown tool %q", inv.Tool)
		return p, ""
	}
	if !g.reg.ToolActive(mode, inv.Roles, inv.Tool) {
		p.res = rejected(agentplane.CodeInactiveAction, "tool %s is not active in mode %q for this principal", inv.Tool, mode)
		return p, ""
	}
	canonical, err := g.tools.Validate(inv.Tool, args)
	if err != nil {
		p.res = rejected(agentplane.CodeInvalidArgs, "%s: %v", inv.Tool, err)
		return p, ""
	}
	p.binding = string(canonical)
	if slices.Contains(config.BuiltinTools, inv.Tool) {
		cmdID, id, res := g.effectCommand(sess, inv, mode, canonical)
		if cmdID == "" {
			p.res = res
			return p, ""
		}
		as := *inv
		as.Tool, as.CommandID, as.ResolvedID = "", cmdID, id
		cp, q := g.prepareCommand(ctx, sess, &as, mode)
		cp.intent = p.intent // the record shows the tool call that was made
		return cp, q
	}
	return p, fmt.Sprintf("Confirm %s with %s?", inv.Tool, canonical)
}

// effectCommand maps a call of a built-in effect tool to the active command
// that declares it, so that the tool can do only what a command could: the
// mode must be in the modes catalog, the entity in an active catalog.
// It returns "" and a rejection when no active command fits.
func (g *Gate) effectCommand(sess *agentplane.Session, inv *Invocation, mode string, args json.RawMessage) (cmdID, id string, res agentplane.ExecutionResult) {
	var in struct {
		Mode      string `json:"mode"`
		CatalogID string `json:"catalog_id"`
		ID        string `json:"id"`
	}
	json.Unmarshal(args, &in)
	for _, cid := range g.reg.ActiveCommands(mode, inv.Roles) {
		c, _ := g.reg.Command(cid)
		if c.Tool != inv.Tool {
			continue
		}
		switch inv.Tool {
		case tool.SetModeName:
			return c.ID, in.Mode, res
		case tool.SetActiveEntityName:
			if c.Source.CatalogID == in.CatalogID {
				return c.ID, in.ID, res
			}
		case tool.ClearActiveEntityName:
			if sess.AWC.Entity != nil && g.catalogType(c.Source) == sess.AWC.EntityType {
				return c.ID, sess.AWC.Entity.ID, res
			}
		}
	}
	if inv.Tool == tool.ClearActiveEntityName && sess.AWC.Entity == nil {
		return "", "", rejected(agentplane.CodePreconditionFailed, "nothing is active to clear")
	}
	return "", "", rejected(agentplane.CodeInactiveAction, "no active command in mode %q lets %s do that", mode, inv.Tool)
}

// catalogType is the entity type of a catalog source, or "".
func (g *Gate) catalogType(src agentplane.ResolverSource) string {
	if c, ok := g.reg.Catalog(src.CatalogID); ok {
		return c.EntityType
	}
	return ""
}

// preconditionsFail returns why the command's preconditions do not hold
// for the session, or "".
func preconditionsFail(cmd *agentplane.CommandDefinition, sess *agentplane.Session, mode string) string {
	pre := cmd.Preconditions
	if len(pre.Modes) > 0 && !slices.Contains(pre.Modes, mode) {
		return fmt.Sprintf("runs only in mode %v, the session is in %q", pre.Modes, mode)
	}
	if len(pre.RequiresActive) > 0 && (sess.AWC.Entity == nil || !slices.Contains(pre.RequiresActive, sess.AWC.EntityType)) {
		return fmt.Sprintf("needs an active %v; open one first", pre.RequiresActive)
	}
	return ""
}

// needsConfirmation applies the confirmation policy of DESIGN.md: the
// command or its tool asks for it, the tool's risk is high, or the tool
// changes the world and the human did not ask for it directly.
func (g *Gate) needsConfirmation(cmd *agentplane.CommandDefinition, toolName string, origin Origin) bool {
	if cmd != nil && cmd.NeedsConfirmation() {
		return true
	}
	t, ok := g.tools.Get(toolName)
	if !ok {
		return false
	}
	spec := t.Spec()
	if spec.RequiresConfirmation || spec.Risk == tool.RiskHigh {
		return true
	}
	return spec.Impact == tool.ImpactExternal && !origin.humanChannel()
}

// run runs the tool and, for a command, applies its effects; a success
// that changed the session carries it in Session.
func (g *Gate) run(ctx context.Context, sess *agentplane.Session, inv *Invocation, p prepared) agentplane.ExecutionResult {
	out, res := g.callTool(ctx, sess, inv, p)
	if res != nil {
		return *res
	}
	if p.cmd == nil { // a tool changes the world, not the session
		return agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: fmt.Sprintf("%s done.", p.tool), Tool: p.tool, Output: out}
	}
	next := sess.Clone()
	msg := applyEffects(next, p.cmd, p.item)
	next.PendingPicker, next.PendingConfirmation = nil, nil
	next.Version++
	if err := next.AWC.Validate(); err != nil {
		return failed(agentplane.CodeInvalidState, p.tool, "%v", err)
	}
	diff, err := stateDiff(sess, next)
	if err != nil {
		return failed(agentplane.CodeInternal, p.tool, "%v", err)
	}
	return agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: msg, Tool: p.tool, Output: out,
		StateDiff: diff, SnapshotID: agentplane.SnapshotID(next.ID, next.Version), Session: next}
}

// callTool runs the tool with the gate's timeout. Built-in tools only
// apply the command's declared effects; their output echoes the arguments.
// A tool that errs, hangs, panics or answers with something other than
// JSON yields a failed result.
func (g *Gate) callTool(ctx context.Context, sess *agentplane.Session, inv *Invocation, p prepared) (json.RawMessage, *agentplane.ExecutionResult) {
	args := p.intent.Args
	if slices.Contains(config.BuiltinTools, p.tool) {
		return args, nil
	}
	t, ok := g.tools.Get(p.tool)
	unavailable := func() (json.RawMessage, *agentplane.ExecutionResult) {
		what := string(args)
		if p.cmd != nil {
			what = fmt.Sprintf("%s=%q", p.cmd.Parameter, p.item.Header.ID)
		}
		r := failed(agentplane.CodeToolUnavailable, p.tool, "%s would run tool %s with %s, but the tool is not connected", p.action, p.tool, what)
		return nil, &r
	}
	if !ok {
		return unavailable()
	}
	timeout := g.toolTimeout
	ctx, cancel := context.WithTimeout(tool.WithCallInfo(ctx, tool.CallInfo{SessionID: sess.ID, RequestID: inv.RequestID, Session: sess.Clone(), Roles: inv.Roles}), timeout)
	defer cancel()
	type answer struct {
		out json.RawMessage
		err error
	}
	done := make(chan answer, 1)
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
		if errors.Is(a.err, tool.ErrUnavailable) {
			return unavailable()
		}
		if a.err != nil {
			r := failed(agentplane.CodeToolFailed, p.tool, "tool %s: %v", p.tool, a.err)
			return nil, &r
		}
		if len(a.out) > 0 && !json.Valid(a.out) {
			r := failed(agentplane.CodeToolFailed, p.tool, "tool %s returned output that is not JSON", p.tool)
			return nil, &r
		}
		return a.out, nil
	case <-ctx.Done():
		r := failed(agentplane.CodeTimeout, p.tool, "tool %s did not answer within %s", p.tool, timeout)
		return nil, &r
	}
}

// unchanged completes a result that changed nothing: an empty diff and the
// snapshot the session still is.
func unchanged(r agentplane.ExecutionResult, sess *agentplane.Session) agentplane.ExecutionResult {
	r.Session = sess
	r.StateDiff = []agentplane.PatchOp{}
	r.SnapshotID = agentplane.SnapshotID(sess.ID, sess.Version)
	return r
}

// intentOf is the protocol intent of an invocation.
func intentOf(inv *Invocation, cmd *agentplane.CommandDefinition) *agentplane.Intent {
	in := &agentplane.Intent{Type: agentplane.IntentActionCall, Action: inv.CommandID, RequestID: inv.RequestID,
		Origin: string(inv.Origin), ConfirmationToken: inv.ConfirmationToken}
	if cmd != nil {
		in.Args, _ = json.Marshal(map[string]string{cmd.Parameter: inv.ResolvedID})
	}
	return in
}

// record builds the audit record of an invocation.
func (g *Gate) record(sessionID string, now time.Time, inv *Invocation, intent *agentplane.Intent, res *agentplane.ExecutionResult) *audit.Record {
	kind := audit.KindExecution
	r := &audit.Record{Session: sessionID, Time: now.UTC(), Intent: intent, Result: res, State: res.Session}
	if inv.Turn != nil {
		kind = audit.KindTurn
		in, d := inv.Turn.Input, inv.Turn.Decision
		r.Input, r.Decision = &in, &d
	} else {
		r.Roles = slices.Clone(inv.Roles)
	}
	r.Kind = kind
	return r
}

func (g *Gate) mirror(r *audit.Record) {
	if g.sink != nil && r != nil {
		// The store holds the record; a failing mirror must not undo it.
		_ = g.sink.Write(r)
	}
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
		msg = joinMsg(msg, fmt.Sprintf("Now working on %s %s (%s).", cmd.ActiveEntityType, h.DisplayName, h.ID))
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

// RecordDecision records a router decision that invoked nothing: its audit
// record, and the pending state it implies (see router.Registry.Pending).
// A confirmation question gets a confirmation token, bound to the version
// the session has once the question is pending; the human's "yes" carries
// it to Execute. It returns the session as it is afterwards.
func (g *Gate) RecordDecision(ctx context.Context, sessionID string, t Turn) (*agentplane.Session, error) {
	sess, err := g.store.Session(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("gate: load session %s: %w", sessionID, err)
	}
	now := t.Input.Now
	if now.IsZero() {
		now = g.now()
	}
	picker, confirm := g.reg.Pending(sess, &t.Decision, now)
	c := &Commit{SessionID: sessionID}
	state := sess
	if !equalPicker(picker, sess.PendingPicker) || !equalConfirm(confirm, sess.PendingConfirmation) {
		next := sess.Clone()
		next.PendingPicker, next.PendingConfirmation = picker, confirm
		next.Version++
		if confirm != nil {
			c.Issue = &Confirmation{Token: g.newToken(), SessionID: sessionID, Action: confirm.CommandID,
				Binding: confirm.ResolvedID, Version: next.Version, ExpiresAt: confirm.ExpiresAt}
			confirm.Token = c.Issue.Token
		}
		c.Session, state = next, next
	}
	in, d := t.Input, t.Decision
	c.Record = &audit.Record{Session: sessionID, Time: now.UTC(), Kind: audit.KindTurn, Input: &in, Decision: &d, State: state}
	if err := g.store.Commit(ctx, c); err != nil {
		return nil, fmt.Errorf("gate: record decision on session %s: %w", sessionID, err)
	}
	g.mirror(c.Record)
	return state, nil
}

// Open creates a session in the given mode (the default mode when empty).
func (g *Gate) Open(ctx context.Context, id, mode string) (*agentplane.Session, error) {
	if mode == "" {
		mode = g.reg.DefaultMode()
	}
	if _, ok := g.reg.Mode(mode); !ok {
		return nil, agentplane.Errorf(agentplane.CodeInvalidArgs, "unknown mode %q", mode)
	}
	s := &agentplane.Session{ID: id, Mode: mode, Version: 1}
	c := &Commit{SessionID: id, Session: s, Record: &audit.Record{Session: id, Time: g.now().UTC(), Kind: audit.KindOpen, State: s}}
	if err := g.store.Commit(ctx, c); err != nil {
		return nil, fmt.Errorf("gate: create session %s: %w", id, err)
	}
	g.mirror(c.Record)
	return s, nil
}

func equalPicker(a, b *agentplane.PendingPicker) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.CommandID == b.CommandID && a.Source == b.Source && a.PrefilterText == b.PrefilterText &&
		slices.Equal(a.OptionIDs, b.OptionIDs) && a.ExpiresAt.Equal(b.ExpiresAt)
}

func equalConfirm(a, b *agentplane.PendingConfirmation) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.CommandID == b.CommandID && a.ResolvedID == b.ResolvedID && a.Question == b.Question && a.ExpiresAt.Equal(b.ExpiresAt)
}
