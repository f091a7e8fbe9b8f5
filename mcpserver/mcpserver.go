// Package mcpserver is agentplane as an MCP server (the official go-sdk),
// over streamable HTTP (mounted at /mcp by serve, behind the API keys) and
// stdio (agentplane mcp). Each MCP session is bound to an agentplane
// session of its principal, opened when the client initializes: it lists
// exactly the tools active for that session's mode and the principal's
// roles, every tools/call runs through the gate with origin mcp, and when
// the active set changes (a mode switch, a downstream server mounted late)
// the client is sent notifications/tools/list_changed.
//
// A tool that needs the human's confirmation never hands the model a
// token: the result says a human must confirm. Where the client supports
// elicitation, the question is put to the human through it (the client's
// UI is the human's channel), and a yes runs exactly that call.
//
//	s := mcpserver.New(rt, nil)                // rt from plane.Open
//	http.Handle("/mcp", s.Handler())          // or: s.Run(ctx, auth.Local, &mcp.StdioTransport{})
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/telemetry"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/workflow"
)

// Options configure a Server. nil means defaults.
type Options struct {
	Version string // the implementation version announced; "" means "dev"
	// Extra, when set, adds to every MCP server made (the conformance
	// fixture server adds the suite's fixture tools).
	Extra func(*mcp.Server)
	// SessionTimeout closes an idle streamable-HTTP session; 0 means 30
	// minutes.
	SessionTimeout time.Duration
	// Complete, when set, answers completion requests for what Extra added
	// (a prompt that is not a mode's, a resource outside agentplane://).
	Complete func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error)
	// Subscribable, when set, says which of Extra's resources clients may
	// subscribe to.
	Subscribable func(uri string) bool
	// SessionsPerPrincipal caps the streamable-HTTP sessions one principal
	// holds open at once: another initialize is answered 429 naming the
	// cap. 0 means DefaultSessionsPerPrincipal; negative means no cap.
	SessionsPerPrincipal int
}

// DefaultSessionsPerPrincipal is how many MCP sessions a principal may
// hold open at once unless Options say otherwise: far more than a person's
// clients need (a session ends when its client deletes it, or after
// SessionTimeout idle), few enough that one key cannot fill the server.
const DefaultSessionsPerPrincipal = 100

// Server makes MCP servers bound to agentplane sessions. It is safe for
// concurrent use.
type Server struct {
	core    *core.Core
	log     *slog.Logger
	sdkLog  *slog.Logger // the SDK's: session ids left out
	impl    *mcp.Implementation
	opts    Options
	timeout time.Duration
	flows   *workflow.Engine
	hub     *events.Hub  // the sessions' events, for resource subscriptions
	tracer  trace.Tracer // nil: tracing is off

	capacity int // MCP sessions per principal; ≤ 0: no cap

	watchers sync.WaitGroup  // the bindings' follow goroutines, waited for by Close
	draining context.Context // cancelled by Drain: the sessions' GET streams end
	drain    context.CancelFunc

	mu       sync.Mutex
	closed   bool // by Close: no binding follows its session any more
	bindings map[*binding]struct{}
	owners   map[string]*binding // by MCP session id: whose session it is, for as long as it lives
	opening  map[string]int      // initialize requests in flight, by principal
}

// New returns the MCP front end over the runtime: its core, and its
// workflow engine (when it has one) for the workflow meta-tools
// (workflow_execute, workflow_continue, …). Every bound session re-lists
// its tools when the runtime's tools change.
func New(rt *plane.Runtime, opts *Options) *Server {
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{opts: *opts, core: rt.Core, log: rt.Logger, impl: &mcp.Implementation{Name: "agentplane", Title: "agentplane", Version: opts.Version},
		timeout: opts.SessionTimeout, flows: rt.Workflows, hub: rt.Hub, tracer: rt.Tracer, capacity: opts.SessionsPerPrincipal,
		bindings: map[*binding]struct{}{}, owners: map[string]*binding{}, opening: map[string]int{}}
	s.draining, s.drain = context.WithCancel(context.Background())
	rt.OnToolsChanged(s.ToolsChanged)
	s.sdkLog = slog.New(withoutSessionIDs{s.log.Handler()})
	if s.impl.Version == "" {
		s.impl.Version = "dev"
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Minute
	}
	if s.capacity == 0 {
		s.capacity = DefaultSessionsPerPrincipal
	}
	return s
}

// Handler serves MCP over streamable HTTP. The principal is the request
// context's (auth.With, set by the API's authentication), else the local
// one. An MCP session belongs to the principal who opened it, for as long
// as the session lives: its id is recorded as theirs when it is made,
// before it reaches anyone, and forgotten only when the session has ended.
// Another principal presenting it — or anyone presenting an id this
// server did not make — is answered as for a session that does not
// exist, on every method and the GET stream. A principal holding
// Options.SessionsPerPrincipal sessions is refused another with 429.
func (s *Server) Handler() http.Handler {
	// The SDK asks for a server on every request (for its protocol
	// versions), and twice on an initialize: a binding is made once per
	// initialize, and a request in a session is given its own.
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		slot, ok := r.Context().Value(openingKey{}).(*openingSlot)
		if !ok {
			s.mu.Lock()
			b := s.owners[r.Header.Get("Mcp-Session-Id")]
			s.mu.Unlock()
			if b == nil {
				return nil // the SDK's defaults; it refuses the request
			}
			return b.srv
		}
		if slot.b == nil {
			slot.b = s.server(principal(r), slot.want)
		}
		return slot.b.srv
	}, &mcp.StreamableHTTPOptions{Logger: s.sdkLog, SessionTimeout: s.timeout})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principal(r)
		id := r.Header.Get("Mcp-Session-Id")
		if id == "" && r.Method == http.MethodPost { // initialize: a new session, p's from the moment its id is made
			want := r.Header.Get(SessionHeader)
			if want != "" { // bound to one of p's sessions
				if _, err := s.core.Owned(r.Context(), want, p.ID); err != nil {
					http.Error(w, "no agentplane session "+strconv.Quote(want)+" of yours", http.StatusNotFound)
					return
				}
			}
			if err := s.admit(p.ID); err != nil {
				w.Header().Set("Retry-After", "60")
				http.Error(w, err.Error(), http.StatusTooManyRequests)
				return
			}
			slot := &openingSlot{want: want}
			defer s.opened(p.ID, slot)
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), openingKey{}, slot)))
			return
		}
		if id == "" { // a GET or DELETE without a session: the SDK refuses it
			h.ServeHTTP(w, r)
			return
		}
		s.mu.Lock()
		b := s.owners[id]
		s.mu.Unlock()
		if b == nil || b.p.ID != p.ID {
			http.Error(w, "session not found", http.StatusNotFound) // as the SDK answers an unknown one
			return
		}
		if r.Method == http.MethodGet { // the session's stream of the server's own messages: it ends when the server drains
			ctx, cancel := context.WithCancel(r.Context())
			defer context.AfterFunc(s.draining, cancel)()
			defer cancel()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	})
}

// Drain starts a shutdown: the sessions' GET streams (the server's own
// messages to a client) end, so that an http.Server's Shutdown, which
// waits for every request, is not held until its deadline by streams
// that never end; the calls in flight are answered. The client opens its
// stream again on another instance. Close the server once the HTTP server
// has shut down. Safe to call more than once.
func (s *Server) Drain() { s.drain() }

// openingKey marks an initialize request's context with the slot that
// learns which binding the SDK made for it.
type openingKey struct{}

type openingSlot struct {
	b    *binding
	want string // the agentplane session to bind it to (SessionHeader); "" for a new one
}

// SessionHeader, on the request that initializes an MCP session over
// HTTP, names an agentplane session of the principal's to bind it to,
// instead of a new one: a client that lost its MCP session (its instance
// stopped) carries on in the same agentplane session, where a call it
// sends again under its request id (_meta RequestIDKey) is answered from
// its record and does not run twice.
const SessionHeader = "Agentplane-Session"

// admit reserves a new session for the principal, or says why not: it
// holds the cap already (sessions open, and initializes in flight).
func (s *Server) admit(principal string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capacity <= 0 {
		s.opening[principal]++
		return nil
	}
	s.prune()
	n := s.opening[principal]
	for b := range s.bindings {
		if b.settled && b.p.ID == principal {
			n++
		}
	}
	if n >= s.capacity {
		return fmt.Errorf("too many MCP sessions: this principal holds %d, the cap (serve --max-mcp-sessions); end one (DELETE with its Mcp-Session-Id) or wait for an idle one to time out", n)
	}
	s.opening[principal]++
	return nil
}

// opened ends an initialize request: the reservation is released, and
// the binding made for it counts from now on — or is forgotten at once
// when no session came of it (a failed initialize).
func (s *Server) opened(principal string, slot *openingSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opening[principal]--; s.opening[principal] <= 0 {
		delete(s.opening, principal)
	}
	if b := slot.b; b != nil {
		b.settled = true
		if !live(b) {
			s.forget(b)
		}
	}
}

// newSessionID makes the id of b's MCP session and records it as b's
// principal's, before the SDK answers with it.
func (s *Server) newSessionID(b *binding) string {
	id := rand.Text()
	b.mu.Lock()
	b.mcpID = id
	b.mu.Unlock()
	s.mu.Lock()
	s.owners[id] = b
	s.mu.Unlock()
	return id
}

// principal is who sends an MCP request over HTTP.
func principal(r *http.Request) auth.Principal {
	if p, ok := auth.From(r.Context()); ok {
		return p
	}
	return auth.Local
}

// withoutSessionIDs is a log handler that leaves out the SDK's session_id
// attributes: an MCP session id is what a client presents to act in its
// session, and logs are read by more people than sessions belong to.
type withoutSessionIDs struct{ slog.Handler }

func (h withoutSessionIDs) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "session_id" {
			out.AddAttrs(a)
		}
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h withoutSessionIDs) WithAttrs(attrs []slog.Attr) slog.Handler {
	kept := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		if a.Key != "session_id" {
			kept = append(kept, a)
		}
	}
	return withoutSessionIDs{h.Handler.WithAttrs(kept)}
}

func (h withoutSessionIDs) WithGroup(name string) slog.Handler {
	return withoutSessionIDs{h.Handler.WithGroup(name)}
}

// Run serves one MCP session over a transport (stdio) for the principal,
// until the client leaves or ctx ends.
func (s *Server) Run(ctx context.Context, p auth.Principal, t mcp.Transport) error {
	b := s.server(p, "")
	defer func() {
		s.mu.Lock()
		s.forget(b)
		s.mu.Unlock()
	}()
	return b.srv.Run(ctx, t)
}

// Close ends every MCP session (the SDK's goroutines serving each end
// with it) and the following of sessions for resource subscribers, and
// returns once every follower has ended. Call it once the HTTP server
// that serves Handler has shut down (the requests in flight answered). It
// is safe to call more than once.
func (s *Server) Close() {
	s.drain()
	s.mu.Lock()
	s.closed = true
	all := make([]*binding, 0, len(s.bindings))
	for b := range s.bindings {
		all = append(all, b)
		b.mu.Lock()
		if b.stopWatch != nil {
			b.stopWatch()
			b.stopWatch = nil
		}
		b.mu.Unlock()
	}
	s.mu.Unlock()
	for _, b := range all {
		for ss := range b.srv.Sessions() {
			ss.Close()
		}
	}
	s.watchers.Wait()
}

// ToolsChanged re-lists the active tools of every bound session (tools
// were mounted late); clients whose set changed are notified.
func (s *Server) ToolsChanged() {
	s.mu.Lock()
	all := make([]*binding, 0, len(s.bindings))
	for b := range s.bindings {
		all = append(all, b)
	}
	s.mu.Unlock()
	for _, b := range all {
		b.sync()
	}
}

// binding is one MCP server and the agentplane session it is bound to.
type binding struct {
	s   *Server
	p   auth.Principal
	srv *mcp.Server
	// settled is set (under s.mu) when the initialize request that made
	// the binding has been answered: from then on it lives exactly as long
	// as its MCP session. Over stdio it stays unset until Run returns.
	settled bool

	mu        sync.Mutex
	mcpID     string             // the MCP session's id ("" over stdio)
	session   string             // "" until the client initializes
	mode      string             // the session's mode, as last seen
	listed    []string           // the tools registered on srv
	sources   []string           // the catalog and provider resources registered on srv
	stopWatch context.CancelFunc // ends following the session for subscribers; nil until one subscribes
}

// server makes an MCP server for a new MCP session of the principal.
func (s *Server) server(p auth.Principal, want string) *binding {
	b := &binding{s: s, p: p, mode: s.core.View().Registry().DefaultMode(), session: want}
	if want != "" { // checked as p's by the caller
		if sess, err := s.core.Session(context.Background(), want); err == nil {
			b.mode = sess.Mode
		}
	}
	b.srv = mcp.NewServer(s.impl, &mcp.ServerOptions{
		Logger:       s.sdkLog,
		Instructions: "agentplane: the tools listed are those active in this session's mode. Every call goes through agentplane's execution gate; an action that changes the world may need the human's confirmation, which only the human can give.",
		// logging is deprecated by the 2026-07-28 protocol but still in use
		// (and in the conformance suite); tools are listed as they change
		//lint:ignore SA1019 see above
		// (resources, prompts and completions are announced as they are added)
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}},
		CompletionHandler: func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return b.complete(ctx, req)
		},
		SubscribeHandler:   func(ctx context.Context, req *mcp.SubscribeRequest) error { return b.subscribe(ctx, req) },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil }, // the SDK forgets the subscriber
		InitializedHandler: func(ctx context.Context, req *mcp.InitializedRequest) {
			if _, err := b.open(ctx); err != nil {
				s.log.Error("MCP: open the agentplane session", "principal", p.ID, "err", err)
			}
		},
		GetSessionID: func() string { return s.newSessionID(b) },
		SetCacheable: private,
	})
	b.sync()
	b.addResources()
	if s.flows != nil {
		b.addWorkflowTools(s.flows)
	}
	if s.opts.Extra != nil {
		s.opts.Extra(b.srv)
	}
	s.mu.Lock()
	s.prune()
	s.bindings[b] = struct{}{}
	s.mu.Unlock()
	return b
}

// private marks every cacheable result private with no time to live:
// what an MCP session lists and reads — its state, its audit chain, the
// tools, catalogs and providers active for its mode and its principal's
// roles, a provider's items for that principal — is one person's, and
// changes with the session (the protocol's default would be public).
func private(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
	c.CacheScope, c.TTLMs = "private", 0
}

// prune forgets the bindings whose MCP session has ended; s.mu is held.
// A binding whose initialize is still being answered is kept.
func (s *Server) prune() {
	for b := range s.bindings {
		if b.settled && !live(b) {
			s.forget(b)
		}
	}
}

// live reports whether b's MCP server has a session open.
func live(b *binding) bool {
	for range b.srv.Sessions() {
		return true
	}
	return false
}

// forget drops a binding and its session id's owner; s.mu is held.
func (s *Server) forget(b *binding) {
	delete(s.bindings, b)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mcpID != "" && s.owners[b.mcpID] == b {
		delete(s.owners, b.mcpID)
	}
	if b.stopWatch != nil {
		b.stopWatch()
		b.stopWatch = nil
	}
}

// Sessions returns how many MCP sessions are bound (ended ones are
// forgotten when the next one is opened).
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bindings)
}

// open returns the bound agentplane session, opening it the first time.
func (b *binding) open(ctx context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.session != "" {
		return b.session, nil
	}
	sess, err := b.s.core.Start(ctx, core.Start{Principal: b.p.ID, Mode: b.mode})
	if err != nil {
		return "", err
	}
	b.session = sess.ID
	b.s.log.Info("MCP session bound", "session", sess.ID, "principal", b.p.ID)
	return b.session, nil
}

// sync registers exactly the tools active in the session's mode for the
// principal; the SDK tells connected clients when the list changed.
func (b *binding) sync() {
	b.mu.Lock()
	defer b.mu.Unlock()
	active := b.s.core.ActiveTools(b.mode, b.p.Roles)
	names := make([]string, 0, len(active))
	for _, t := range active {
		names = append(names, t.Spec.Name)
	}
	if gone := missing(b.listed, names); len(gone) > 0 {
		b.srv.RemoveTools(gone...)
	}
	for _, t := range active {
		if slices.Contains(b.listed, t.Spec.Name) {
			continue
		}
		schema := t.Spec.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		mt := &mcp.Tool{Name: t.Spec.Name, Description: t.Spec.Usage, InputSchema: schema, Annotations: annotations(t.Spec.Impact, t.Spec.Idempotent)}
		b.srv.AddTool(mt, b.call(t.Spec.Name))
	}
	b.listed = names
	b.syncResources(b.mode)
}

// annotations are the hints a tool's impact gives, every one stated: a
// read changes nothing and may be repeated; an internal tool changes only
// agentplane's session state; an external one acts on the world, may
// destroy, and is not assumed safe to repeat unless declared idempotent.
func annotations(impact tool.Impact, idempotent bool) *mcp.ToolAnnotations {
	read, external := impact == tool.ImpactRead, impact == tool.ImpactExternal
	return &mcp.ToolAnnotations{ReadOnlyHint: read, DestructiveHint: ptr(external), IdempotentHint: read || idempotent, OpenWorldHint: ptr(external)}
}

func ptr[T any](v T) *T { return &v }

// missing returns the names in was that are not in now: what to remove.
func missing(was, now []string) []string {
	var out []string
	for _, n := range was {
		if !slices.Contains(now, n) {
			out = append(out, n)
		}
	}
	return out
}

// setMode notes the session's mode after a call and re-lists the tools
// when it changed.
func (b *binding) setMode(mode string) {
	b.mu.Lock()
	changed := mode != "" && mode != b.mode
	if changed {
		b.mode = mode
	}
	b.mu.Unlock()
	if changed {
		b.sync()
	}
}

// call is a tool's handler: the call goes through the gate with origin
// mcp; a confirmation is asked of the human by elicitation where the
// client supports it.
func (b *binding) call(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if b.s.tracer != nil { // the client's trace goes on through the gate
			var span trace.Span
			ctx, span = b.s.tracer.Start(telemetry.ExtractMeta(ctx, req.Params.Meta), "tools/call "+name, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(semconv.McpMethodNameToolsCall, semconv.GenAIToolName(name), semconv.GenAIOperationNameExecuteTool))
			defer span.End()
		}
		session, err := b.open(ctx)
		if err != nil {
			return nil, err
		}
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		inv := gate.Invocation{SessionID: session, Tool: name, Args: args, Origin: gate.OriginMCP, Principal: b.p.ID, Roles: b.p.Roles}
		if id, ok := req.Params.Meta[RequestIDKey].(string); ok {
			if err := checkRequestID(id); err != nil {
				return nil, err
			}
			inv.RequestID = id // a retried call is answered from its record, and runs once
		}
		res, err := b.s.core.Execute(ctx, inv)
		if err != nil {
			return nil, err
		}
		if res.Status == agentplane.StatusConfirmationRequired {
			if res, err = b.confirm(ctx, req, inv, res); err != nil {
				return nil, err
			}
		}
		if res.Session != nil {
			b.setMode(res.Session.Mode)
		}
		return toolResult(res), nil
	}
}

// RequestIDKey is the _meta key under which an MCP client may name a
// tools/call's request id: the call is then idempotent — sent again (a
// retry after a lost answer, the same call from several connections) it
// is answered from its record and runs once. The id is the client's
// within its agentplane session, as an Idempotency-Key is over HTTP.
const RequestIDKey = "agentplane/request_id"

// checkRequestID checks a request id from _meta: 1 to 255 visible ASCII
// characters.
func checkRequestID(id string) error {
	if id == "" || len(id) > 255 {
		return fmt.Errorf("_meta %q: want 1 to 255 characters, got %d", RequestIDKey, len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("_meta %q: visible ASCII characters only", RequestIDKey)
		}
	}
	return nil
}

// confirm asks the human, through the client's elicitation, whether the
// call may run. Yes: the call runs as the human's (origin user), with the
// token the gate issues to the human for it (asked for even where the
// human could run the call without one, so it runs once and is recorded
// as the human's confirmation), never shown to the model. No, or no
// elicitation: the result says a human must confirm.
func (b *binding) confirm(ctx context.Context, req *mcp.CallToolRequest, inv gate.Invocation, asked agentplane.ExecutionResult) (agentplane.ExecutionResult, error) {
	must := asked
	must.Message = "Not run: a human must confirm this action first (" + asked.Message + "). Ask the user to confirm it in agentplane; you cannot confirm it yourself."
	params := req.Session.InitializeParams()
	if params == nil || params.Capabilities == nil || params.Capabilities.Elicitation == nil {
		return must, nil
	}
	answer, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
		Message:         fmt.Sprintf("Confirm: %s\nTool %s with %s", asked.Message, inv.Tool, inv.Args),
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"confirm":{"type":"boolean","title":"Run it?","description":"Yes runs this exact call once."}},"required":["confirm"]}`),
	})
	if err != nil {
		b.s.log.Warn("MCP: elicitation failed", "session", inv.SessionID, "err", err)
		return must, nil
	}
	if answer.Action != "accept" || answer.Content["confirm"] != true {
		declined := asked
		declined.Status = agentplane.StatusRejected
		declined.Error = &agentplane.ResultError{Code: agentplane.CodeConfirmationRequired, Detail: "the human declined"}
		declined.Message = "Not run: the human declined to confirm it."
		return declined, nil
	}
	human := inv
	human.Origin, human.AskConfirmation = gate.OriginUser, true
	res, err := b.s.core.Execute(ctx, human)
	if err != nil || res.Status != agentplane.StatusConfirmationRequired || res.ConfirmationToken == "" {
		return res, err
	}
	human.ConfirmationToken, human.AskConfirmation = res.ConfirmationToken, false
	res, err = b.s.core.Execute(ctx, human)
	res.ConfirmationToken = ""
	return res, err
}

// toolResult is the MCP form of a gate result: the tool's output (text,
// and structured when it is a JSON object) on success; otherwise the
// message with the error code, as an error result the model can read.
func toolResult(res agentplane.ExecutionResult) *mcp.CallToolResult {
	res.ConfirmationToken = "" // never to the model
	if res.Status == agentplane.StatusSuccess {
		out := &mcp.CallToolResult{}
		if len(res.Output) > 0 {
			out.Content = []mcp.Content{&mcp.TextContent{Text: string(res.Output)}}
			var obj map[string]any
			if json.Unmarshal(res.Output, &obj) == nil {
				out.StructuredContent = obj
			}
		} else {
			out.Content = []mcp.Content{&mcp.TextContent{Text: res.Message}}
		}
		return out
	}
	text := res.Message
	if res.Error != nil {
		text = fmt.Sprintf("%s: %s", res.Error.Code, res.Message)
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
