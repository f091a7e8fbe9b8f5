// Package gate is the single execution boundary: every action that changes
// anything, whoever asks for it, passes through Gate.Execute, and nothing
// else writes a session.
//
// Execute loads the session, checks that the command is active for the
// session's mode and the principal's roles, checks that the id exists in the
// command's resolver source, applies the confirmation policy, runs the tool
// and applies the command's declared effects with an optimistic version
// check.
//
//	g, _ := gate.New(reg, store, nil)
//	res, _ := g.Execute(ctx, gate.Invocation{SessionID: id, CommandID: "set_mode", ResolvedID: "ddr", Origin: gate.OriginUser})
//	// res.Status == gate.StatusSuccess, res.Session.Mode == "ddr"
package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/router"
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

// Invocation asks the gate to run a command with its one resolved id.
type Invocation struct {
	SessionID  string
	CommandID  string
	ResolvedID string
	RequestID  string
	Origin     Origin
	Roles      []string // the principal's roles
	// Confirmed says the human confirmed this exact invocation (in chat, a
	// "yes" to the pending confirmation the router asked).
	Confirmed bool
}

// SessionStore keeps sessions. Implementations are safe for concurrent use.
type SessionStore interface {
	// Get returns a copy of the session, or an error with code not_found.
	Get(ctx context.Context, id string) (*agentplane.Session, error)
	// Put stores a copy of s when s.Version is one more than the stored
	// version (1 for a new session); otherwise it returns an error with
	// code version_conflict and stores nothing.
	Put(ctx context.Context, s *agentplane.Session) error
}

// ResultStore remembers the result of each request id, so that a retried
// request returns the recorded result and runs nothing twice.
// Implementations are safe for concurrent use.
type ResultStore interface {
	// Result returns the result recorded for the request id, if any.
	Result(ctx context.Context, requestID string) (agentplane.ExecutionResult, bool, error)
	// SaveResult records the result of the request id; a second save of
	// the same id keeps the first.
	SaveResult(ctx context.Context, requestID string, res agentplane.ExecutionResult) error
}

// Gate executes invocations. It is safe for concurrent use.
type Gate struct {
	reg     *router.Registry
	store   SessionStore
	results ResultStore // nil: no idempotency
	now     func() time.Time
	tools   map[string]config.Tool
}

// Options configure a Gate. nil means defaults.
type Options struct {
	Now func() time.Time // the clock; nil means time.Now
	// Results makes request ids idempotent; the session store is used when
	// it implements ResultStore.
	Results ResultStore
}

// New returns a gate over the registry and session store.
func New(reg *router.Registry, store SessionStore, opts *Options) (*Gate, error) {
	if reg == nil {
		return nil, errors.New("gate: missing registry (pass router.NewRegistry(cfg, nil))")
	}
	if store == nil {
		return nil, errors.New("gate: missing session store (pass memstore.New())")
	}
	g := &Gate{reg: reg, store: store, now: time.Now, tools: map[string]config.Tool{}}
	if opts != nil && opts.Now != nil {
		g.now = opts.Now
	}
	if opts != nil && opts.Results != nil {
		g.results = opts.Results
	} else if rs, ok := store.(ResultStore); ok {
		g.results = rs
	}
	for _, t := range reg.Config().Tools {
		g.tools[t.Name] = t
	}
	return g, nil
}

func rejected(code, format string, args ...any) agentplane.ExecutionResult {
	msg := fmt.Sprintf(format, args...)
	return agentplane.ExecutionResult{Status: agentplane.StatusRejected, Message: msg,
		Error: &agentplane.ResultError{Code: code, Detail: msg}, StateDiff: []agentplane.PatchOp{}}
}

// Execute runs an invocation. Outcomes that are not the caller's fault or
// the system's (a rejected, failed or confirmation_required invocation) are
// results, not errors; the error is for a store that failed. A result other
// than success changes nothing.
//
// A request id seen before returns the recorded result and runs nothing.
func (g *Gate) Execute(ctx context.Context, inv Invocation) (agentplane.ExecutionResult, error) {
	if inv.RequestID != "" && g.results != nil {
		prev, ok, err := g.results.Result(ctx, inv.RequestID)
		if err != nil {
			return agentplane.ExecutionResult{}, fmt.Errorf("gate: look up request %s: %w", inv.RequestID, err)
		}
		if ok {
			if sess, err := g.store.Get(ctx, inv.SessionID); err == nil {
				prev.Session = sess
			}
			return prev, nil
		}
	}
	res, err := g.run(ctx, inv)
	if err != nil || inv.RequestID == "" || g.results == nil {
		return res, err
	}
	if err := g.results.SaveResult(ctx, inv.RequestID, res); err != nil {
		return agentplane.ExecutionResult{}, fmt.Errorf("gate: record request %s: %w", inv.RequestID, err)
	}
	return res, nil
}

func (g *Gate) run(ctx context.Context, inv Invocation) (agentplane.ExecutionResult, error) {
	sess, err := g.store.Get(ctx, inv.SessionID)
	if err != nil {
		if agentplane.ErrorCode(err) == agentplane.CodeNotFound {
			r := rejected(agentplane.CodeNotFound, "no session %q", inv.SessionID)
			r.RequestID = inv.RequestID
			return r, nil
		}
		return agentplane.ExecutionResult{}, fmt.Errorf("gate: load session %s: %w", inv.SessionID, err)
	}
	res := g.execute(ctx, sess, inv)
	res.RequestID = inv.RequestID
	if res.Status != agentplane.StatusSuccess {
		return unchanged(res, sess), nil
	}
	diff, err := stateDiff(sess, res.Session)
	if err != nil {
		return agentplane.ExecutionResult{}, err
	}
	if err := g.store.Put(ctx, res.Session); err != nil {
		if agentplane.ErrorCode(err) == agentplane.CodeVersionConflict {
			r := rejected(agentplane.CodeVersionConflict, "session %s changed while %s ran; nothing was applied", inv.SessionID, inv.CommandID)
			r.RequestID = inv.RequestID
			return unchanged(r, sess), nil
		}
		return agentplane.ExecutionResult{}, fmt.Errorf("gate: save session %s: %w", inv.SessionID, err)
	}
	res.StateDiff = diff
	res.SnapshotID = agentplane.SnapshotID(res.Session.ID, res.Session.Version)
	return res, nil
}

// unchanged completes a result that changed nothing: an empty diff and the
// snapshot the session still is.
func unchanged(r agentplane.ExecutionResult, sess *agentplane.Session) agentplane.ExecutionResult {
	r.Session = sess
	r.StateDiff = []agentplane.PatchOp{}
	r.SnapshotID = agentplane.SnapshotID(sess.ID, sess.Version)
	return r
}

func (g *Gate) execute(ctx context.Context, sess *agentplane.Session, inv Invocation) agentplane.ExecutionResult {
	cmd, ok := g.reg.Command(inv.CommandID)
	if !ok {
		return rejected(agentplane.CodeUnknownAction, "unknown command %q", inv.CommandID)
	}
	mode := sess.Mode
	if _, ok := g.reg.Mode(mode); !ok {
		mode = g.reg.DefaultMode()
	}
	if cmd.Kind == agentplane.KindLauncher {
		return rejected(agentplane.CodeInvalidArgs, "%s is a launcher: it opens a picker and runs nothing; invoke %s", cmd.ID, cmd.OnSelect)
	}
	if !g.reg.CommandActive(mode, inv.Roles, cmd.ID) {
		return rejected(agentplane.CodeInactiveAction, "command %s is not active in mode %q for this principal", cmd.ID, mode)
	}
	if !g.reg.SourceActive(mode, inv.Roles, cmd.Source) {
		return rejected(agentplane.CodeInactiveAction, "%s is not active in mode %q", cmd.Source, mode)
	}
	src, _ := g.reg.Source(cmd.Source)
	ix, _, err := src.Index(ctx)
	if err != nil {
		return agentplane.ExecutionResult{Status: agentplane.StatusFailed, Message: err.Error(), Error: &agentplane.ResultError{Code: agentplane.CodeSourceUnavailable, Detail: err.Error()}}
	}
	item, ok := ix.Lookup(inv.ResolvedID)
	if !ok {
		return rejected(agentplane.CodeInvalidArgs, "%s: %q is not an item of %s", cmd.Parameter, inv.ResolvedID, cmd.Source)
	}
	if g.needsConfirmation(cmd, inv.Origin) && !inv.Confirmed {
		q := router.ConfirmationQuestion(cmd, item.Header.DisplayName)
		return agentplane.ExecutionResult{Status: agentplane.StatusConfirmationRequired, Message: q, Tool: cmd.Tool}
	}
	if !slices.Contains(config.BuiltinTools, cmd.Tool) {
		msg := fmt.Sprintf("%s would run tool %s with %s=%q, but the tool is not connected yet", cmd.ID, cmd.Tool, cmd.Parameter, item.Header.ID)
		return agentplane.ExecutionResult{Status: agentplane.StatusFailed, Message: msg, Tool: cmd.Tool, Error: &agentplane.ResultError{Code: agentplane.CodeToolUnavailable, Detail: msg}}
	}
	next := sess.Clone()
	msg := applyEffects(next, cmd, item, g.reg)
	next.PendingPicker, next.PendingConfirmation = nil, nil
	next.Version++
	if err := next.AWC.Validate(); err != nil {
		return rejected(agentplane.CodeInvalidState, "%v", err)
	}
	return agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: msg, Tool: cmd.Tool, Session: next}
}

// needsConfirmation applies the confirmation policy of DESIGN.md: the
// command or its tool asks for it, the tool's risk is high, or the tool
// changes the world and the human did not ask for it directly.
func (g *Gate) needsConfirmation(cmd *agentplane.CommandDefinition, origin Origin) bool {
	if cmd.NeedsConfirmation() {
		return true
	}
	t, ok := g.tools[cmd.Tool]
	if !ok {
		return false
	}
	if t.RequiresConfirmation || t.Risk == "high" {
		return true
	}
	return t.Impact == "external" && origin != OriginUser && origin != OriginAPI
}

// applyEffects applies the command's declared effects to s and says what
// changed.
func applyEffects(s *agentplane.Session, cmd *agentplane.CommandDefinition, item *agentplane.ResolverItem, reg *router.Registry) string {
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
		msg = fmt.Sprintf("%s(%s) done.", cmd.ID, item.Header.ID)
	}
	return msg
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

// RecordDecision applies the pending state a router decision implies (see
// router.Registry.Pending) to the session, taken at now. It writes only when
// the pending state changes, with the same optimistic version check as
// Execute, and returns the session as it is afterwards.
func (g *Gate) RecordDecision(ctx context.Context, sessionID string, d *agentplane.Decision, now time.Time) (*agentplane.Session, error) {
	sess, err := g.store.Get(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("gate: load session %s: %w", sessionID, err)
	}
	picker, confirm := g.reg.Pending(sess, d, now)
	if equalPicker(picker, sess.PendingPicker) && equalConfirm(confirm, sess.PendingConfirmation) {
		return sess, nil
	}
	next := sess.Clone()
	next.PendingPicker, next.PendingConfirmation = picker, confirm
	next.Version++
	if err := g.store.Put(ctx, next); err != nil {
		return nil, fmt.Errorf("gate: record decision on session %s: %w", sessionID, err)
	}
	return next, nil
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
	if err := g.store.Put(ctx, s); err != nil {
		return nil, fmt.Errorf("gate: create session %s: %w", id, err)
	}
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
	return *a == *b
}
