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
	// Impact overrides the impact of named tools (server tool names). A tool
	// is external unless the server annotates it read-only or this says so.
	Impact         map[string]tool.Impact
	ConnectTimeout time.Duration // how long Mount and reconnects wait; 0 means 5s
	CallTimeout    time.Duration // 0 means 30s
	HTTPClient     *http.Client
}

// Health is how a server is.
type Health struct {
	Up        bool      `json:"up"`
	Error     string    `json:"error,omitempty"` // the last connection or call error
	Since     time.Time `json:"since"`           // when Up last changed
	ToolCount int       `json:"tools"`
}

// Server is a mounted MCP server. Safe for concurrent use.
type Server struct {
	spec   Spec
	client *mcp.Client

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []*mcp.Tool
	health  Health
}

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
	s := &Server{spec: spec, client: mcp.NewClient(&mcp.Implementation{Name: "agentplane", Version: "1"}, nil)}
	s.mu.Lock()
	s.connectLocked(ctx)
	s.mu.Unlock()
	return s
}

// Retry reconnects a server that is down every interval until it comes up
// or ctx ends, and then calls up once with its tools, so a server that was
// down at start still gets its tools mounted. It returns at once when the
// server is up already (its tools were mounted with it).
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
		case <-t.C:
		}
		s.mu.Lock()
		ok := s.health.Up // a call may have reconnected it meanwhile
		if !ok {
			ok = s.connectLocked(ctx) == nil
		}
		s.mu.Unlock()
		if ok {
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
		return &mcp.StreamableClientTransport{Endpoint: s.spec.URL, HTTPClient: s.spec.HTTPClient, MaxRetries: 1}, nil
	}
	return nil, errors.New("neither a command nor a URL")
}

// connectLocked (re)connects and lists the tools; s.mu is held.
func (s *Server) connectLocked(ctx context.Context) error {
	if s.session != nil {
		s.session.Close()
		s.session = nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.spec.ConnectTimeout)
	defer cancel()
	err := func() error {
		t, err := s.transport()
		if err != nil {
			return err
		}
		cs, err := s.client.Connect(ctx, t, nil)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		var tools []*mcp.Tool
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				cs.Close()
				return fmt.Errorf("list tools: %w", err)
			}
			tools = append(tools, t)
		}
		s.session, s.tools = cs, tools
		return nil
	}()
	s.setHealth(err)
	return err
}

func (s *Server) setHealth(err error) {
	up := err == nil
	if up != s.health.Up || s.health.Since.IsZero() {
		s.health.Since = time.Now()
	}
	s.health.Up = up
	s.health.Error = ""
	if err != nil {
		s.health.Error = err.Error()
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

// Close closes the connection.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
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
		out = append(out, &mounted{server: s, remote: t.Name, spec: tool.Spec{
			Name: s.spec.Prefix + "_" + t.Name, Usage: usage, InputSchema: schema, Impact: impact, Risk: risk,
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

// Call calls the remote tool, reconnecting first if the server is down.
func (m *mounted) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	s := m.server
	s.mu.Lock()
	if s.session == nil {
		if err := s.connectLocked(ctx); err != nil {
			s.mu.Unlock()
			return nil, tool.Errorf("unavailable", "MCP server %s is down: %v", s.spec.Name, err)
		}
	}
	cs := s.session
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, s.spec.CallTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: m.remote, Arguments: args})
	if err != nil {
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
		return nil, tool.Errorf("tool_error", "MCP server %s: %s: %s", s.spec.Name, m.remote, text(res))
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
