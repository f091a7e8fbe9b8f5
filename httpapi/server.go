// Package httpapi is agentplane's HTTP front end: the JSON API under /v1
// (sessions, turns, intents, audit, modes, tools), the session event
// streams (Server-Sent Events and WebSocket), the OpenAPI document,
// health, readiness and metrics. It is a thin adapter: every change goes
// through the core — the router, the gate, the store — exactly as the
// terminal's does; the principal comes from the API key (package auth).
//
//	srv := httpapi.New(rt, nil) // rt from plane.Open
//	http.ListenAndServe("127.0.0.1:8080", srv.Handler())
package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/redact"
	"github.com/agentplane/agentplane/workflow"
)

// Options configure a Server. nil means defaults.
type Options struct {
	// Metrics are served at /metrics; nil means none are kept.
	Metrics *Metrics
	// MCP, when set, is served at /mcp behind the same API keys.
	MCP http.Handler
	// UI, when set, serves the web page at / and its files under /ui/
	// (package webui); they need no key: the page asks for one.
	UI http.Handler
	// Heartbeat is how often an idle event stream gets a keep-alive; 0
	// means 15s.
	Heartbeat time.Duration
	// Ready reports extra readiness problems (nil: none).
	Ready func(ctx context.Context) error
	// Origins are the origins (scheme://host[:port]) of other web pages
	// allowed to call the API: CORS is answered for them and their
	// state-changing requests pass the cross-origin check. None by
	// default; see CheckOrigin.
	Origins []string
	// BodyTimeout is how long a request body may take to arrive, from the
	// request's start; 0 means DefaultBodyTimeout.
	BodyTimeout time.Duration
	// StreamsPerPrincipal caps the event streams (SSE and WebSocket) one
	// principal holds open at once; 0 means DefaultStreamsPerPrincipal,
	// negative no cap.
	StreamsPerPrincipal int
	// Reload is what POST /v1/admin/reload does for principals with the
	// admin role: read the configuration again and put it in force,
	// returning its digest. nil means the runtime's (plane.Runtime.Reload).
	Reload func(ctx context.Context) (string, error)
}

// Server is the HTTP front end over one core.
type Server struct {
	core      *core.Core
	redact    *redact.Redactor // the core's: what answers quote of a tool or provider is masked
	keys      *auth.Keys
	auth      *auth.Authenticator // keys, then the provider's tokens (auth.OIDC nil: none)
	hub       *events.Hub
	metrics   *Metrics
	mcp       http.Handler
	ui        http.Handler
	bus       *notify.Bus
	workflows *workflow.Engine
	step      func(context.Context, plane.StepRequest) (plane.Step, error) // the runtime's: one conversation step
	log       *slog.Logger
	reload    func(ctx context.Context) (string, error)
	heartbeat time.Duration
	ready     func(context.Context) error
	draining  atomic.Bool
	drained   chan struct{} // closed by Drain
	// drainReason is Drain's reason, set before drained is closed
	drainReason string
	drainOnce   sync.Once
	hijacked    drainGroup // WebSocket connections: http.Server.Shutdown does not wait for them
	handler     http.Handler
	patterns    []string // what routes serves, for the OpenAPI test
	idPrefix    string   // of request ids: random per server
	requests    atomic.Uint64

	origins     []string
	bodyTimeout time.Duration
	limits      *limits
}

// New returns the server over the runtime: its core, its API keys (none:
// every request is the local principal; bind to loopback only, see
// CheckAddr), its event hub, and, where the runtime has them, the LLM
// agent, the notifications (/v1/notifications, the inbox) and the
// workflows (/v1/workflows).
func New(rt *plane.Runtime, opts *Options) *Server {
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{core: rt.Core, step: rt.Step, keys: rt.Keys, hub: rt.Hub, metrics: opts.Metrics, mcp: opts.MCP, ui: opts.UI, bus: rt.Bus, workflows: rt.Workflows,
		log: rt.Logger, heartbeat: opts.Heartbeat, ready: opts.Ready, drained: make(chan struct{}),
		reload: opts.Reload, origins: slices.Clone(opts.Origins), bodyTimeout: opts.BodyTimeout, limits: newLimits(opts.StreamsPerPrincipal)}
	if s.bodyTimeout <= 0 {
		s.bodyTimeout = DefaultBodyTimeout
	}
	if s.keys == nil {
		s.keys = &auth.Keys{}
	}
	if s.core != nil {
		s.redact = s.core.Redactor()
	}
	if s.reload == nil && s.core != nil {
		s.reload = rt.Reload
	}
	s.auth = &auth.Authenticator{Keys: s.keys, OIDC: rt.OIDC}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.heartbeat <= 0 {
		s.heartbeat = 15 * time.Second
	}
	s.idPrefix = agentplane.RandomID()[:8] + "-"
	s.handler = s.routes()
	return s
}

// Hub returns the event hub the streams read.
func (s *Server) Hub() *events.Hub { return s.hub }

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Drain starts a shutdown: readiness fails, and every event stream gets a
// final event saying why and ends. In-flight requests finish (the
// http.Server's Shutdown waits for them).
func (s *Server) Drain(reason string) {
	s.draining.Store(true)
	s.drainOnce.Do(func() {
		s.drainReason = cmp.Or(reason, "the server is shutting down")
		close(s.drained)
	})
	s.hub.Close(reason)
}

// Wait drains the server (see Drain) and returns once its WebSocket
// connections have ended, or with ctx's error when ctx ends first: an
// http.Server's Shutdown does not wait for them (they are hijacked).
// Each answers the turn it is running, sends its last events and a
// closing message, and closes; a connection asked for from now on is
// refused (503 unavailable). Call it beside the http.Server's Shutdown,
// and close the runtime after both: safe to call more than once.
func (s *Server) Wait(ctx context.Context, reason string) error {
	s.Drain(reason)
	select {
	case <-s.hijacked.drained():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handler is an API handler: it answers, or returns the error to answer
// with.
type handler func(w http.ResponseWriter, r *http.Request, p auth.Principal) error

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h http.Handler) {
		mux.Handle(pattern, h)
		s.patterns = append(s.patterns, pattern)
	}
	api := func(pattern string, h handler) { handle(pattern, s.authenticated(h)) }
	api("POST /v1/sessions", s.createSession)
	api("GET /v1/sessions", s.listSessions)
	api("GET /v1/sessions/{id}", s.getSession)
	api("POST /v1/sessions/{id}/resume", s.postResume)
	api("POST /v1/sessions/{id}/turns", s.postTurn)
	api("POST /v1/sessions/{id}/intents", s.postIntent)
	api("GET /v1/sessions/{id}/audit", s.getAudit)
	api("GET /v1/sessions/{id}/audit/verification", s.getVerification)
	api("GET /v1/sessions/{id}/audit/replay", s.getReplay)
	api("GET /v1/sessions/{id}/history", s.getHistory)
	api("GET /v1/sessions/{id}/events", s.getEvents)
	api("GET /v1/sessions/{id}/ws", s.getWebSocket)
	api("GET /v1/sessions/{id}/commands", s.getCommands)
	api("GET /v1/sessions/{id}/catalogs/{catalog}/items", s.getCatalogItems)
	api("GET /v1/sessions/{id}/providers/{provider}/items", s.getCatalogItems)
	api("GET /v1/modes", s.getModes)
	api("GET /v1/tools", s.getTools)
	api("POST /v1/admin/reload", s.postReload)
	if s.bus != nil {
		api("POST /v1/notifications", s.postNotification)
		api("GET /v1/notifications/{id}", s.getNotification)
		api("POST /v1/notifications/{id}/ack", s.ackNotification)
		api("GET /v1/inbox", s.getInbox)
		api("GET /v1/inbox/events", s.getInboxEvents)
	}
	if s.workflows != nil {
		api("POST /v1/workflows", s.createWorkflow)
		api("GET /v1/workflows", s.listWorkflows)
		api("GET /v1/workflows/{id}", s.getWorkflow)
		api("POST /v1/workflows/{id}/commands", s.postCommand)
		api("GET /v1/workflows/{id}/events", s.getWorkflowEvents)
	}
	handle("GET /v1/openapi.json", http.HandlerFunc(serveOpenAPI))
	handle("GET "+metadataPath, http.HandlerFunc(s.getResourceMetadata))
	handle("GET "+metadataPath+"/mcp", http.HandlerFunc(s.getResourceMetadata)) // for the resource https://host/mcp (RFC 9728 §3.1)
	handle("GET /v1/auth", http.HandlerFunc(s.getSignIn))
	handle("POST /v1/auth/token", http.HandlerFunc(s.postToken))
	handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	handle("GET /readyz", http.HandlerFunc(s.getReady))
	if s.metrics != nil {
		handle("GET /metrics", s.metrics.Handler())
	}
	if s.ui != nil {
		handle("GET /{$}", s.ui)
		handle("GET /ui/", s.ui)
	}
	if s.mcp != nil {
		mcp := s.mcp
		handle("/mcp", s.authenticated(func(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
			mcp.ServeHTTP(w, r)
			return nil
		}))
	}
	return s.observe(s.guard(muxErrors(mux)))
}

// authenticated runs h for the request's principal, or answers 401.
func (s *Server) authenticated(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.auth.Authenticate(r.Context(), r.Header.Get("Authorization"))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(auth.With(r.Context(), p))
		// what answers a principal is theirs: no cache keeps it (a handler
		// may say otherwise)
		w.Header().Set("Cache-Control", "no-store")
		if err := h(w, r, p); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// muxErrors answers the mux's own plain-text 404 and 405 with the
// envelope.
func muxErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := &muxError{ResponseWriter: w, r: r}
		next.ServeHTTP(e, r)
		if e.own != 0 { // a route's handler answered in plain text: its words, in the envelope
			writeJSON(w, e.own, ErrorBody{Error: ErrorDetail{Code: e.code, Message: strings.TrimSpace(e.text.String())}})
		}
	})
}

// muxError rewrites a plain-text 404 or 405 as the envelope: the mux's
// own (no route matched: r.Pattern is empty) says there is no such
// endpoint; a route's handler's (the MCP server's refusals, the page's
// file server) keeps what it said. Handlers of the API answer JSON.
type muxError struct {
	http.ResponseWriter
	r       *http.Request
	swallow bool
	// own is the status a route's handler answered in plain text, its
	// text kept (at most maxText bytes) for the envelope; 0: none
	own  int
	code string
	text bytes.Buffer
}

// maxText bounds a handler's plain-text answer kept for the envelope.
const maxText = 1024

func (e *muxError) WriteHeader(code int) {
	if (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) && e.Header().Get("Content-Type") == "text/plain; charset=utf-8" {
		e.swallow = true
		e.Header().Del("X-Content-Type-Options")
		errCode := agentplane.CodeNotFound
		if code == http.StatusMethodNotAllowed {
			errCode = agentplane.CodeInvalidInput
		}
		if e.r.Pattern != "" {
			e.own, e.code = code, errCode
			return
		}
		msg := fmt.Sprintf("no endpoint %s %s", e.r.Method, truncate(e.r.URL.Path, 200))
		if code == http.StatusMethodNotAllowed {
			msg = fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", e.r.Method, truncate(e.r.URL.Path, 200), e.Header().Get("Allow"))
		}
		writeJSON(e.ResponseWriter, code, ErrorBody{Error: ErrorDetail{Code: errCode, Message: msg}})
		return
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *muxError) Write(b []byte) (int, error) {
	if e.swallow {
		if e.own != 0 {
			e.text.Write(b[:min(len(b), max(0, maxText-e.text.Len()))])
		}
		return len(b), nil
	}
	return e.ResponseWriter.Write(b)
}

func (e *muxError) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// nextID is a request id: the server's random prefix and a counter.
func (s *Server) nextID() string {
	return s.idPrefix + strconv.FormatUint(s.requests.Add(1), 36)
}

type requestIDKey struct{}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// observe gives each request an id (the client's X-Request-ID when it is
// sane), recovers a panic into a 500 envelope, logs the request and
// records its latency.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-ID")
		if !saneID(id) {
			id = s.nextID()
		}
		w.Header().Set("X-Request-ID", id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving a request", "request_id", id, "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				if !rec.wrote {
					s.writeError(rec, r, fmt.Errorf("panic: %v", v))
				}
			}
			took := time.Since(start)
			route := r.Pattern
			if route == "" {
				route = "other"
			}
			if s.metrics != nil {
				s.metrics.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Observe(took.Seconds())
			}
			// a balancer's health checks (every second or two, per
			// instance) are logged at debug: at info they drown the log
			level := slog.LevelInfo
			if route == "GET /healthz" || route == "GET /readyz" {
				level = slog.LevelDebug
			}
			if s.log.Enabled(r.Context(), level) {
				s.log.LogAttrs(r.Context(), level, "http", slog.String("request_id", id), slog.String("method", r.Method),
					slog.String("path", truncate(r.URL.Path, 200)), slog.String("route", route), slog.Int("status", rec.status),
					slog.Int("bytes", rec.bytes), slog.Float64("duration_ms", float64(took.Microseconds())/1000))
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

// saneID reports whether a client's request id is fit to log: 1 to 64
// letters, digits, '-', '_' or '.'.
func saneID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// recorder remembers the status and size of a response.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// getReady answers 200 when the store answers, the configuration is
// loaded and the server is not draining. A caller with a key (or anyone on
// a keyless loopback server) also learns what the server runs: the
// configuration, the store and the MCP servers' state (a server that is
// down does not make agentplane unready: its tools are unavailable until
// it is back). Without a key it answers the status alone, which is all a
// load balancer needs.
func (s *Server) getReady(w http.ResponseWriter, r *http.Request) {
	type mcpState struct {
		Name  string `json:"name"`
		Up    bool   `json:"up"`
		Error string `json:"error,omitempty"`
	}
	type detail struct {
		Config string     `json:"config"`
		Store  string     `json:"store"`
		MCP    []mcpState `json:"mcp_servers"`
		Error  string     `json:"error,omitempty"`
	}
	status, code := "ready", http.StatusOK
	d := detail{Config: s.core.Name(), Store: "ok", MCP: []mcpState{}}
	for _, h := range s.core.MCPHealth() {
		d.MCP = append(d.MCP, mcpState{Name: h.Name, Up: h.Up, Error: h.Error})
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.core.Ready(ctx); err != nil {
		status, d.Store, code = "unready", "unreachable", http.StatusServiceUnavailable
		s.log.Warn("readiness: store unreachable", "err", err)
	}
	if s.ready != nil {
		if err := s.ready(ctx); err != nil {
			status, d.Error, code = "unready", err.Error(), http.StatusServiceUnavailable
		}
	}
	if s.draining.Load() {
		status, code = "draining", http.StatusServiceUnavailable
	}
	if _, err := s.auth.Authenticate(r.Context(), r.Header.Get("Authorization")); err != nil {
		writeJSON(w, code, struct {
			Status string `json:"status"`
		}{status})
		return
	}
	writeJSON(w, code, struct {
		Status string `json:"status"`
		detail
	}{status, d})
}

// CheckAddr refuses to serve a non-loopback address without API keys or
// an identity provider (credentials: how many ways in there are): anyone
// who could reach it would be the local user. Loopback is a loopback IP
// address or the name localhost, nothing that merely starts like one.
func CheckAddr(addr string, keys int) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %v: want HOST:PORT, e.g. 127.0.0.1:8080", addr, err)
	}
	if keys > 0 || loopbackHost(host) {
		return nil
	}
	return fmt.Errorf("--addr %s is not a loopback address and the configuration has no API keys: anyone reaching it would act as the local user; add auth.keys to the configuration, or serve on 127.0.0.1", addr)
}

// CheckListener refuses to serve on a listener bound to an address that
// is not loopback without API keys or an identity provider: loopback is
// decided by the address the listener has bound — what the name given
// to --addr resolved to (localhost or evil.localhost mapped to another
// address by /etc/hosts), not the name.
func CheckListener(addr net.Addr, credentials int) error {
	if credentials > 0 {
		return nil
	}
	var ip net.IP
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip = a.IP
	default:
		if host, _, err := net.SplitHostPort(addr.String()); err == nil {
			ip = net.ParseIP(host)
		}
	}
	if ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("the listener is bound to %s, not a loopback address, and the configuration has no API keys: anyone reaching it would act as the local user; add auth.keys to the configuration, or serve on 127.0.0.1", addr)
}

// CheckOrigin checks an origin given for Options.Origins: scheme, host and
// an optional port, nothing else (https://app.example.com:8443).
func CheckOrigin(origin string) error {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("origin %q: want scheme://host[:port] with nothing after it, e.g. https://app.example.com", origin)
	}
	return nil
}
