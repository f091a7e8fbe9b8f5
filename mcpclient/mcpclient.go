// Package mcpclient mounts the tools of downstream MCP servers (over stdio
// or streamable HTTP, with the official Go SDK) as agentplane tools, named
// PREFIX_TOOL, so they run through the gate like any other tool.
//
// A server that is down, slow or misbehaving never blocks start-up and never
// crashes the caller: Mount waits at most the connect timeout, calls fail
// with a clear tool error while the server is away, every call to a down
// server tries to reconnect, and Health says how the server is.
//
//	srv := mcpclient.Mount(ctx, mcpclient.Spec{Name: "files", Command: []string{"files-mcp"}})
//	for _, t := range srv.Tools() { registry.Register(t) }
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/redact"
	"github.com/agentplane/agentplane/telemetry"
	"github.com/agentplane/agentplane/tool"
)

// MaxResult is the largest tool result accepted from a server.
const MaxResult = 1 << 20

// Spec says how to reach a server and how to present its tools.
type Spec struct {
	Name    string   // the server's name in configuration
	Prefix  string   // tools are mounted as PREFIX_TOOL; the name when empty
	Command []string // stdio: the command and its arguments
	URL     string   // streamable HTTP: the endpoint
	// Headers are sent with every request over streamable HTTP (a key the
	// server wants: the configuration's headers and headers_env).
	Headers map[string]string
	// Impact overrides the impact of named tools (server tool names). A tool
	// is external unless the server annotates it read-only or this says so.
	Impact         map[string]tool.Impact
	ConnectTimeout time.Duration // how long Mount and reconnects wait; 0 means 5s
	CallTimeout    time.Duration // 0 means 30s
	// Backoff is the first wait after a failed connect, doubling after
	// each failure up to 30s; 0 means 1s.
	Backoff    time.Duration
	HTTPClient *http.Client
	// Tracer, when set, traces each call as a tools/call client span and
	// sends its trace context in the request's _meta (traceparent); nil:
	// no tracing.
	Tracer trace.Tracer
	// Redact masks secrets (its Headers' values among them) in what the
	// server says — errors, failed calls' texts — before they are traced,
	// logged, shown in its health or returned; nil masks nothing.
	Redact *redact.Redactor
}

// Health is how a server is.
type Health struct {
	Up        bool      `json:"up"`
	Error     string    `json:"error,omitempty"` // the last connection or call error
	Since     time.Time `json:"since"`           // when Up last changed
	ToolCount int       `json:"tools"`
}

// Server is a mounted MCP server. Safe for concurrent use. Its lock is
// never held while connecting: a slow or dead server delays only the calls
// that need a connection, and after a failed connect, calls fail at once
// (tool_unavailable) until the next attempt is due.
type Server struct {
	spec       Spec
	client     *mcp.Client
	connecting singleflight.Group // concurrent callers share one connect attempt

	// closing is done once the server is closed: it ends a connect in
	// flight, and nothing connects again
	closing context.Context
	stop    context.CancelFunc

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []*mcp.Tool
	health  Health
	nextTry time.Time     // after a failed connect, no new attempt before this
	backoff time.Duration // the wait after the last failed connect
}

// maxBackoff bounds the wait between connect attempts after failures.
const maxBackoff = 30 * time.Second

// Mount connects to the server and lists its tools, waiting at most the
// connect timeout; a server that cannot be reached is returned all the
// same, down, with no tools, and reconnects on use.
func Mount(ctx context.Context, spec Spec) *Server {
	if spec.Prefix == "" {
		spec.Prefix = spec.Name
	}
	if spec.ConnectTimeout <= 0 {
		spec.ConnectTimeout = 5 * time.Second
	}
	if spec.CallTimeout <= 0 {
		spec.CallTimeout = 30 * time.Second
	}
	if spec.Backoff <= 0 {
		spec.Backoff = time.Second
	}
	s := &Server{spec: spec, client: mcp.NewClient(&mcp.Implementation{Name: "agentplane", Version: "1"}, nil)}
	s.closing, s.stop = context.WithCancel(context.Background())
	s.connect(ctx)
	return s
}

// Retry reconnects a server that is down every interval until it comes up
// or ctx ends, and then calls up once with its tools, so a server that was
// down at start still gets its tools mounted. It returns when the server
// is closed, and at once when it is up already (its tools were mounted
// with it).
func (s *Server) Retry(ctx context.Context, interval time.Duration, up func([]tool.Tool)) {
	if s.Health().Up {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closing.Done():
			return
		case <-t.C:
		}
		if s.Health().Up || s.connect(ctx) == nil { // a call may have reconnected it meanwhile
			up(s.Tools())
			return
		}
	}
}

func (s *Server) transport() (mcp.Transport, error) {
	switch {
	case len(s.spec.Command) > 0:
		return &mcp.CommandTransport{Command: exec.Command(s.spec.Command[0], s.spec.Command[1:]...)}, nil
	case s.spec.URL != "":
		client := s.spec.HTTPClient
		if len(s.spec.Headers) > 0 {
			base := http.DefaultClient
			if client != nil {
				base = client
			}
			c := *base
			c.Transport = headerTransport{base: base.Transport, headers: s.spec.Headers}
			client = &c
		}
		return &mcp.StreamableClientTransport{Endpoint: s.spec.URL, HTTPClient: client, MaxRetries: 1}, nil
	}
	return nil, errors.New("neither a command nor a URL")
}

// headerTransport sends the configured headers with every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not change the request it is given
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// errClosed: the server was closed; nothing connects again.
var errClosed = errors.New("closed")

// connect (re)connects and lists the tools, one attempt at a time; callers
// arriving during an attempt share its outcome. The lock is taken only to
// install the result. Close ends an attempt in flight, and a connection
// it made anyway is closed, not installed.
func (s *Server) connect(ctx context.Context) error {
	_, err, _ := s.connecting.Do("connect", func() (any, error) {
		if s.closing.Err() != nil {
			return nil, errClosed
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.spec.ConnectTimeout) // one caller's end is not the others'
		defer cancel()
		defer context.AfterFunc(s.closing, cancel)()
		cs, tools, err := s.dial(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closing.Err() != nil { // Close came during the attempt (it cancels before it locks)
			if cs != nil {
				cs.Close()
			}
			return nil, errClosed
		}
		if s.session != nil {
			s.session.Close()
			s.session = nil
		}
		if err != nil {
			s.backoff = min(max(2*s.backoff, s.spec.Backoff), maxBackoff)
			s.nextTry = time.Now().Add(s.backoff)
		} else {
			s.session, s.tools, s.backoff = cs, tools, 0
		}
		s.setHealth(err)
		return nil, err
	})
	return err
}

func (s *Server) dial(ctx context.Context) (*mcp.ClientSession, []*mcp.Tool, error) {
	t, err := s.transport()
	if err != nil {
		return nil, nil, err
	}
	cs, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			cs.Close()
			return nil, nil, fmt.Errorf("list tools: %w", err)
		}
		tools = append(tools, t)
	}
	return cs, tools, nil
}

// open returns the connection, connecting first when there is none and
// no backoff is running.
func (s *Server) open(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	cs, wait, last := s.session, time.Until(s.nextTry), s.health.Error
	s.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	if s.closing.Err() != nil {
		return nil, fmt.Errorf("%w: MCP server %s: %v", tool.ErrUnavailable, s.spec.Name, errClosed)
	}
	if wait > 0 {
		return nil, fmt.Errorf("%w: MCP server %s is down (%s); next attempt in %s", tool.ErrUnavailable, s.spec.Name, last, wait.Round(time.Millisecond))
	}
	if err := s.connect(ctx); err != nil {
		return nil, fmt.Errorf("%w: MCP server %s is down: %v", tool.ErrUnavailable, s.spec.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		return nil, fmt.Errorf("%w: MCP server %s went away", tool.ErrUnavailable, s.spec.Name)
	}
	return s.session, nil
}

func (s *Server) setHealth(err error) {
	up := err == nil
	if up != s.health.Up || s.health.Since.IsZero() {
		s.health.Since = time.Now()
	}
	s.health.Up = up
	s.health.Error = ""
	if err != nil {
		s.health.Error = s.spec.Redact.String(err.Error())
	}
	s.health.ToolCount = len(s.tools)
}

// Name returns the server's name in configuration.
func (s *Server) Name() string { return s.spec.Name }

// Health returns how the server is.
func (s *Server) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.health
}

// Close closes the connection and ends a connect in flight; calls after
// it fail (tool_unavailable) without connecting again. Idempotent.
func (s *Server) Close() error {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setHealth(errClosed) // down from now on, whatever it was
	if s.session != nil {
		err := s.session.Close()
		s.session = nil
		return err
	}
	return nil
}

// Tools returns the server's tools as agentplane tools, as listed at the
// last successful connection. A tool whose name or schema agentplane
// cannot use is left out (Register would refuse it).
func (s *Server) Tools() []tool.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []tool.Tool
	for _, t := range s.tools {
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		impact := tool.ImpactExternal
		if t.Annotations != nil && t.Annotations.ReadOnlyHint {
			impact = tool.ImpactRead
		}
		if i, ok := s.spec.Impact[t.Name]; ok {
			impact = i
		}
		usage := strings.TrimSpace(t.Description)
		if usage == "" {
			usage = fmt.Sprintf("Tool %s of the MCP server %s.", t.Name, s.spec.Name)
		}
		risk := tool.RiskMedium
		if impact == tool.ImpactRead {
			risk = tool.RiskLow
		}
		idempotent := t.Annotations != nil && t.Annotations.IdempotentHint // as the server says
		out = append(out, &mounted{server: s, remote: t.Name, spec: tool.Spec{
			Name: s.spec.Prefix + "_" + t.Name, Usage: usage, InputSchema: schema, Impact: impact, Risk: risk, Server: s.spec.Name, Idempotent: idempotent,
		}})
	}
	return out
}

// mounted is one remote tool.
type mounted struct {
	server *Server
	remote string
	spec   tool.Spec
}

func (m *mounted) Spec() tool.Spec { return m.spec }

// Call calls the remote tool, reconnecting first if the server is down; a
// server that cannot be reached fails with tool.ErrUnavailable.
func (m *mounted) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	s := m.server
	cs, err := s.open(ctx)
	if err != nil {
		return nil, err
	}

	ctx, span := telemetry.Start(s.spec.Tracer, ctx, "tools/call "+m.remote, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.McpMethodNameToolsCall, semconv.GenAIToolName(m.remote), semconv.GenAIOperationNameExecuteTool))
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, s.spec.CallTimeout)
	defer cancel()
	params := &mcp.CallToolParams{Name: m.remote, Arguments: args}
	meta := telemetry.InjectMeta(ctx, nil) // traceparent, when traced
	if ci, _ := tool.CallInfoFrom(ctx); ci.Invocation() != nil {
		if meta == nil {
			meta = map[string]any{}
		}
		meta[agentplane.MetaContextKey] = ci.Context // who asks, on what, how authorised
	}
	if meta != nil {
		params.Meta = meta
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		err = errors.New(s.spec.Redact.String(err.Error()))
		telemetry.Fail(span, "mcp_error", err.Error())
		if ctx.Err() != nil {
			return nil, tool.Errorf("timeout", "MCP server %s: %s did not answer within %s", s.spec.Name, m.remote, s.spec.CallTimeout)
		}
		s.mu.Lock()
		if s.session == cs { // the connection is suspect: drop it, reconnect on the next call
			s.session.Close()
			s.session = nil
			s.setHealth(err)
		}
		s.mu.Unlock()
		return nil, tool.Errorf("mcp_error", "MCP server %s: %s: %v", s.spec.Name, m.remote, err)
	}
	if res.IsError {
		said := s.spec.Redact.String(text(res))
		telemetry.Fail(span, "tool_error", said)
		return nil, tool.Errorf("tool_error", "MCP server %s: %s: %s", s.spec.Name, m.remote, said)
	}
	var out []byte
	if res.StructuredContent != nil {
		out, err = json.Marshal(res.StructuredContent)
	} else {
		out, err = json.Marshal(map[string]string{"text": text(res)})
	}
	if err != nil {
		return nil, tool.Errorf("bad_result", "MCP server %s: %s: %v", s.spec.Name, m.remote, err)
	}
	if len(out) > MaxResult {
		return nil, tool.Errorf("too_large", "MCP server %s: %s returned %d bytes (limit %d)", s.spec.Name, m.remote, len(out), MaxResult)
	}
	return out, nil
}

// text joins the text content of a result.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
