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
}

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

	mu       sync.Mutex
	bindings map[*binding]struct{}
	owners   map[string]owner // by MCP session id
	swept    time.Time        // when owners were last pruned
}

// owner is who opened an MCP session, and when.
type owner struct {
	principal string
	since     time.Time
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
		timeout: opts.SessionTimeout, flows: rt.Workflows, hub: rt.Hub, tracer: rt.Tracer, bindings: map[*binding]struct{}{}, owners: map[string]owner{}}
	rt.OnToolsChanged(s.ToolsChanged)
	s.sdkLog = slog.New(withoutSessionIDs{s.log.Handler()})
	if s.impl.Version == "" {
		s.impl.Version = "dev"
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Minute
	}
	return s
}

// Handler serves MCP over streamable HTTP. The principal is the request
// context's (auth.With, set by the API's authentication), else the local
// one. An MCP session belongs to the principal who opened it: another
// principal presenting its Mcp-Session-Id is answered as for a session
// that does not exist, on every method and the GET stream.
func (s *Server) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		want, _ := r.Context().Value(wantSession{}).(string)
		return s.bound(principal(r), want)
	}, &mcp.StreamableHTTPOptions{Logger: s.sdkLog, SessionTimeout: s.timeout})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principal(r)
		id := r.Header.Get("Mcp-Session-Id")
		if id == "" { // initialize: the new session is p's before its id reaches anyone
			if want := r.Header.Get(SessionHeader); want != "" {
				// bound to one of p's sessions: checked now, bound at initialized
				if _, err := s.core.Owned(r.Context(), want, p.ID); err != nil {
					http.Error(w, "no agentplane session "+strconv.Quote(want)+" of yours", http.StatusNotFound)
					return
				}
				r = r.WithContext(context.WithValue(r.Context(), wantSession{}, want))
			}
			h.ServeHTTP(&opening{ResponseWriter: w, open: func(id string) { s.own(id, p.ID) }}, r)
			return
		}
		s.mu.Lock()
		o, known := s.owners[id]
		s.mu.Unlock()
		if known && o.principal != p.ID {
			http.Error(w, "session not found", http.StatusNotFound) // as the SDK answers an unknown one
			return
		}
		h.ServeHTTP(w, r)
	})
}

// SessionHeader, on the request that initializes an MCP session over
// HTTP, names an agentplane session of the principal's to bind it to,
// instead of a new one: a client that lost its MCP session (its instance
// stopped) carries on in the same agentplane session, where a call it
// sends again under its request id (_meta RequestIDKey) is answered from
// its record and does not run twice.
const SessionHeader = "Agentplane-Session"

// wantSession is the context key of the agentplane session an
// initializing request asks to be bound to.
type wantSession struct{}

// own records that the MCP session id was opened by the principal.
func (s *Server) own(id, principal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owners[id] = owner{principal: principal, since: time.Now()}
}

// opening is the response to a request that may open an MCP session: it
// tells open the session id the SDK answers with, before the answer goes.
type opening struct {
	http.ResponseWriter
	open   func(id string)
	headed bool
}

func (o *opening) WriteHeader(code int) {
	if !o.headed {
		o.headed = true
		if id := o.Header().Get("Mcp-Session-Id"); id != "" {
			o.open(id)
		}
	}
	o.ResponseWriter.WriteHeader(code)
}

func (o *opening) Write(b []byte) (int, error) {
	if !o.headed {
		o.WriteHeader(http.StatusOK)
	}
	return o.ResponseWriter.Write(b)
}

func (o *opening) Unwrap() http.ResponseWriter { return o.ResponseWriter }

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
	return s.server(p).Run(ctx, t)
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
	s    *Server
	p    auth.Principal
	srv  *mcp.Server
	born time.Time

	mu        sync.Mutex
	mcpID     string             // the MCP session's id, once initialized
	session   string             // "" until the client initializes
	mode      string             // the session's mode, as last seen
	listed    []string           // the tools registered on srv
	sources   []string           // the catalog and provider resources registered on srv
	stopWatch context.CancelFunc // ends following the session for subscribers; nil until one subscribes
}

// server makes an MCP server for a new MCP session of the principal.
func (s *Server) server(p auth.Principal) *mcp.Server {
	return s.bound(p, "")
}

// bound makes an MCP server for a new MCP session of the principal, bound
// to the agentplane session want (the principal's, checked by the caller)
// or, when want is "", to a new one when the client initializes.
func (s *Server) bound(p auth.Principal, want string) *mcp.Server {
	b := &binding{s: s, p: p, mode: s.core.Registry().DefaultMode(), session: want}
	if want != "" {
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
			b.mu.Lock()
			b.mcpID = req.Session.ID() // "" over stdio
			b.mu.Unlock()
			if _, err := b.open(ctx); err != nil {
				s.log.Error("MCP: open the agentplane session", "principal", p.ID, "err", err)
			}
		},
	})
	b.sync()
	b.addResources()
	if s.flows != nil {
		b.addWorkflowTools(s.flows)
	}
	if s.opts.Extra != nil {
		s.opts.Extra(b.srv)
	}
	b.born = time.Now()
	s.mu.Lock()
	s.prune()
	s.bindings[b] = struct{}{}
	s.mu.Unlock()
	return b.srv
}

// prune forgets the servers whose MCP session has ended (made over a
// minute ago and with no session now), and the owners of sessions that
// ended or never initialized; s.mu is held.
func (s *Server) prune() {
	live := map[string]bool{}
	defer func() {
		if time.Since(s.swept) < time.Minute {
			return
		}
		s.swept = time.Now()
		for id, o := range s.owners {
			if !live[id] && time.Since(o.since) > s.timeout+time.Minute {
				delete(s.owners, id)
			}
		}
	}()
	for b := range s.bindings {
		b.mu.Lock()
		live[b.mcpID] = true
		b.mu.Unlock()
		if time.Since(b.born) < time.Minute {
			continue
		}
		open := false
		for range b.srv.Sessions() {
			open = true
			break
		}
		if !open {
			delete(s.bindings, b)
			b.mu.Lock()
			delete(s.owners, b.mcpID)
			if b.stopWatch != nil {
				b.stopWatch()
			}
			b.mu.Unlock()
		}
	}
}

// Sessions returns how many MCP sessions are bound (ended ones are
// forgotten within a minute or so).
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
