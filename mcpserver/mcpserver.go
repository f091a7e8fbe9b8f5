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
//	s := mcpserver.New(c, nil)
//	http.Handle("/mcp", s.Handler())          // or: s.Run(ctx, auth.Local, &mcp.StdioTransport{})
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/workflow"
)

// Options configure a Server. nil means defaults.
type Options struct {
	Logger  *slog.Logger // nil discards
	Version string       // the implementation version announced; "" means "dev"
	// Extra, when set, adds to every MCP server made (the conformance
	// fixture server adds the suite's fixture tools).
	Extra func(*mcp.Server)
	// SessionTimeout closes an idle streamable-HTTP session; 0 means 30
	// minutes.
	SessionTimeout time.Duration
	// Workflows, when set, adds the workflow meta-tools (workflow_execute,
	// workflow_continue, …) to every session's tools.
	Workflows *workflow.Engine
}

// Server makes MCP servers bound to agentplane sessions. It is safe for
// concurrent use.
type Server struct {
	core    *core.Core
	log     *slog.Logger
	impl    *mcp.Implementation
	extra   func(*mcp.Server)
	timeout time.Duration
	flows   *workflow.Engine

	mu       sync.Mutex
	bindings map[*binding]struct{}
}

// New returns the MCP front end over the core.
func New(c *core.Core, opts *Options) *Server {
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{core: c, log: opts.Logger, impl: &mcp.Implementation{Name: "agentplane", Title: "agentplane", Version: opts.Version},
		extra: opts.Extra, timeout: opts.SessionTimeout, flows: opts.Workflows, bindings: map[*binding]struct{}{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
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
// one.
func (s *Server) Handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		p, ok := auth.From(r.Context())
		if !ok {
			p = auth.Local
		}
		return s.server(p)
	}, &mcp.StreamableHTTPOptions{Logger: s.log, SessionTimeout: s.timeout})
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

	mu      sync.Mutex
	session string   // "" until the client initializes
	mode    string   // the session's mode, as last seen
	listed  []string // the tools registered on srv
}

// server makes an MCP server for a new MCP session of the principal.
func (s *Server) server(p auth.Principal) *mcp.Server {
	b := &binding{s: s, p: p, mode: s.core.Registry().DefaultMode()}
	b.srv = mcp.NewServer(s.impl, &mcp.ServerOptions{
		Logger:       s.log,
		Instructions: "agentplane: the tools listed are those active in this session's mode. Every call goes through agentplane's execution gate; an action that changes the world may need the human's confirmation, which only the human can give.",
		// logging is deprecated by the 2026-07-28 protocol but still in use
		// (and in the conformance suite); tools are listed as they change
		//lint:ignore SA1019 see above
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}},
		InitializedHandler: func(ctx context.Context, _ *mcp.InitializedRequest) {
			if _, err := b.open(ctx); err != nil {
				s.log.Error("MCP: open the agentplane session", "principal", p.ID, "err", err)
			}
		},
	})
	b.sync()
	if s.flows != nil {
		b.addWorkflowTools(s.flows)
	}
	if s.extra != nil {
		s.extra(b.srv)
	}
	b.born = time.Now()
	s.mu.Lock()
	s.prune()
	s.bindings[b] = struct{}{}
	s.mu.Unlock()
	return b.srv
}

// prune forgets the servers whose MCP session has ended (made over a
// minute ago and with no session now); s.mu is held.
func (s *Server) prune() {
	for b := range s.bindings {
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
	var gone []string
	for _, n := range b.listed {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
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
		mt := &mcp.Tool{Name: t.Spec.Name, Description: t.Spec.Usage, InputSchema: schema,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: t.Spec.Impact == "read", DestructiveHint: ptr(t.Spec.Impact == "external"),
				OpenWorldHint: ptr(t.Spec.Impact == "external")}}
		b.srv.AddTool(mt, b.call(t.Spec.Name))
	}
	b.listed = names
}

func ptr[T any](v T) *T { return &v }

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
		session, err := b.open(ctx)
		if err != nil {
			return nil, err
		}
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		inv := gate.Invocation{SessionID: session, Tool: name, Args: args, Origin: gate.OriginMCP, Principal: b.p.ID, Roles: b.p.Roles}
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

// confirm asks the human, through the client's elicitation, whether the
// call may run. Yes: the call runs as the human's (origin user), with the
// token the gate issues to the human, never shown to the model. No, or no
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
	human.Origin = gate.OriginUser
	res, err := b.s.core.Execute(ctx, human)
	if err != nil || res.Status != agentplane.StatusConfirmationRequired || res.ConfirmationToken == "" {
		return res, err
	}
	human.ConfirmationToken = res.ConfirmationToken
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
