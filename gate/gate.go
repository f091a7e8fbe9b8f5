// Package gate is the single execution boundary: every action that changes
// anything, whoever asks for it, passes through Gate.Execute, and nothing
// else writes a session.
//
// Execute takes its steps in one place (execute.go), one small file each:
// begin (load the session, look up the idempotency key), check (the
// command or tool is active for the session's mode and the principal's
// roles, its arguments fit, its id exists in its source, its
// preconditions hold), confirm (the confirmation policy: a token bound to
// the exact invocation, accepted only from the human), claim (the
// idempotency key, before a tool runs outside the commit), run (the tool,
// with a timeout; a panic is a failed result), effects (the command's
// declared effects, the RFC 6902 diff) and commit (the new state, the
// audit record and the request's result, together, with an optimistic
// version check).
//
//	g, _ := gate.New(reg, memstore.New(), nil)
//	s, _ := g.Open(ctx, gate.Opening{SessionID: "s1"})
//	res, _ := g.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "set_mode", ResolvedID: "ddr", Origin: gate.OriginUser})
//	// res.Status == agentplane.StatusSuccess, res.Session.Mode == "ddr"
package gate

import (
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/redact"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/store"
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

// Origins lists every origin.
var Origins = []Origin{OriginUser, OriginAPI, OriginLLM, OriginMCP, OriginWorkflow, OriginAgentInternal}

// Valid reports whether o is one of Origins.
func (o Origin) Valid() bool {
	for _, v := range Origins {
		if o == v {
			return true
		}
	}
	return false
}

// Human reports whether results for this origin go to the human, who alone
// may see and present confirmation tokens.
func (o Origin) Human() bool { return o == OriginUser || o == OriginAPI }

// Invocation asks the gate to run a command with its one resolved id, or a
// tool with JSON arguments.
type Invocation struct {
	SessionID  string
	CommandID  string
	ResolvedID string
	Tool       string          // instead of CommandID: a tool offered to the LLM and MCP clients
	Args       json.RawMessage // the tool's arguments, a JSON object
	// RequestID is the idempotency key, within the session and for the
	// principal: a repeated request returns the recorded result and runs
	// nothing; the same key with other arguments is refused.
	RequestID string
	Origin    Origin
	Principal string   // who asks: a user id, "local" for the terminal
	Roles     []string // the principal's roles
	// ConfirmationToken confirms an invocation. It is accepted only from
	// the human's channel (origin user or api), for exactly the invocation
	// it was issued for, once: a token presented is checked and used up
	// even when the policy would not ask this origin for one (the human
	// confirming a call the LLM proposed).
	ConfirmationToken string
	// AskConfirmation asks for a confirmation token (origin user or api)
	// even when the policy needs none for this origin: a front end that
	// has the human confirm another origin's call (an MCP client's, by
	// elicitation) runs it with the token, so it runs once and is
	// recorded as the human's confirmation.
	AskConfirmation bool
	// Confirmed says the human answered yes, in a turn, to the session's
	// pending confirmation of exactly this invocation (origin user only).
	Confirmed bool
	// Mode, for a command, is the mode it runs in when that is not the
	// session's: the target mode of a launcher active in the session's mode
	// whose selections go to this command. The command is checked in that
	// mode, and its success switches the session to it. Empty: the
	// session's mode.
	Mode string
	// Turn, when the invocation answers a user turn, is recorded with it.
	Turn *Turn
	// Base is the session as the caller decided on it (the router's
	// snapshot). The gate executes against it, and a session that changed
	// since is a version_conflict. nil: the gate loads the session.
	Base *agentplane.Session
	// Approval, on a workflow's tool call (origin workflow), is the id of
	// the human's approval of the layer the call belongs to (package
	// workflow asks for it before the layer runs): it stands for the
	// confirmation the call would need, and the audit record keeps it.
	Approval string
	// IdempotencyKey is the key the tool passes downstream (an HTTP tool's
	// Idempotency-Key header); "" means RequestID. A workflow retries a
	// task under a new request id with the task's one key.
	IdempotencyKey string
	// Also, when set, adds the caller's own writes to the commit of the
	// invocation's result (a workflow writes its layer's end with its
	// last task's result, in one commit instead of two).
	Also *Also
}

// Also is a caller's writes, built from an invocation's result and
// committed with it.
type Also struct {
	// Ops builds the writes from the result about to be committed. It is
	// called before each attempt to commit the invocation's own result
	// (not one recorded before under its request key); nil adds nothing.
	// When the writes fail, the result is committed without them.
	Ops func(agentplane.ExecutionResult) []store.Op
	// Keeps reports that the writes, when Ops builds any, record the
	// result where the caller finds it again (a workflow's task state):
	// committed with them, the result of an invocation that claimed its
	// request key for nothing (a read tool's) is not stored under the key
	// as well — the caller does not send that request id again once its
	// writes are in. Committed without them, it is.
	Keeps bool
	// Written reports, once Execute returns, whether the writes were
	// committed with the result.
	Written bool
}

// Turn is the user turn an invocation or a decision belongs to.
type Turn struct {
	Input    agentplane.TurnInput
	Decision agentplane.Decision
	// RequestID is the turn's idempotency key (the client's, within the
	// session and for the principal), keyed to the input's TurnDigest; ""
	// when the client sent none.
	RequestID string
}

// Gate executes invocations. It is safe for concurrent use.
type Gate struct {
	reg         *registry.Registry
	store       store.Store
	now         func() time.Time
	newToken    func() string
	newID       func() string
	tools       *tool.Registry
	toolTimeout time.Duration
	clockMargin time.Duration
	log         *slog.Logger
	argSchemas  map[string]*jsonschema.Schema // by command id
	tracer      trace.Tracer                  // nil: tracing is off
	redact      *redact.Redactor              // nil: nothing to mask
	config      string                        // the configuration's digest, in every record
}

// Options configure a Gate. nil means defaults.
type Options struct {
	Now         func() time.Time // the clock; nil means time.Now
	NewToken    func() string    // confirmation tokens; nil means 16 random bytes in hex
	NewID       func() string    // the request ids the gate makes for invocations without one; nil means 16 random bytes in hex
	Tools       *tool.Registry   // the tools that run, built-in ones included; nil means none
	ToolTimeout time.Duration    // how long a tool may run; 0 means 30s
	// ClockMargin is how far instances' clocks may differ: a request still
	// running after twice the tool timeout and this is taken over as
	// interrupted (its instance stopped). 0 means one minute; < 0 none.
	ClockMargin time.Duration
	Logger      *slog.Logger // nil discards
	// Tracer, when set, traces every execution as an execute_tool span
	// (package telemetry); nil means no tracing, at no cost.
	Tracer trace.Tracer
	// Redact masks the server's secrets in results (messages, errors,
	// outputs) before they are recorded or answered; nil masks nothing.
	Redact *redact.Redactor
	// Config is the digest of the configuration the registry was compiled
	// from (config.Digest): every record of a decision or an execution
	// carries it. "" leaves it out.
	Config string
}

// New returns a gate over the registry and store.
func New(reg *registry.Registry, st store.Store, opts *Options) (*Gate, error) {
	if reg == nil {
		return nil, errors.New("gate: missing registry (pass registry.New(cfg, nil))")
	}
	if st == nil {
		return nil, errors.New("gate: missing store (pass memstore.New(), sqlite.Open(context.Background(), path, nil) or postgres.Open(ctx, url, nil))")
	}
	if opts == nil {
		opts = &Options{}
	}
	g := &Gate{reg: reg, store: st, now: opts.Now, newToken: opts.NewToken, newID: opts.NewID, tools: opts.Tools,
		toolTimeout: opts.ToolTimeout, clockMargin: opts.ClockMargin, log: opts.Logger, tracer: opts.Tracer, redact: opts.Redact, config: opts.Config}
	if g.tools == nil {
		g.tools = tool.NewRegistry()
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.newToken == nil {
		g.newToken = agentplane.RandomID
	}
	if g.newID == nil {
		g.newID = agentplane.RandomID
	}
	if g.toolTimeout <= 0 {
		g.toolTimeout = 30 * time.Second
	}
	switch {
	case g.clockMargin == 0:
		g.clockMargin = time.Minute
	case g.clockMargin < 0:
		g.clockMargin = 0
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if g.argSchemas, err = argsSchemas(reg.Commands()); err != nil {
		return nil, err
	}
	return g, nil
}

// Registry returns the compiled configuration the gate enforces.
func (g *Gate) Registry() *registry.Registry { return g.reg }
