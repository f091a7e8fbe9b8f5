// Package core holds what turns and actions need: one value, built once
// from a configuration and options, with the compiled configuration, the
// router, the gate, the tools (built-in, the program's own, HTTP and those
// mounted from MCP servers), the store, the clock, the id source and the
// logger. The runtime every command opens (package plane) builds it first
// and the notifications, the LLM agent and the workflows on it; front ends
// assemble none of those parts themselves.
//
//	c, err := core.New(ctx, core.Source{Path: "agentplane.yaml"}, &core.Options{Store: st})
//	defer c.Close()
//	s, _ := c.Start(ctx, core.Start{Principal: "local"})
//	t, _ := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "local", Input: agentplane.TurnInput{Text: "switch to ddr mode"}})
//	// t.Decision.Action == invoke_command, t.Result.Status == success, t.Session.Mode == "ddr"
package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/mcpclient"
	"github.com/agentplane/agentplane/redact"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/router"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

// Source is where a configuration comes from: a file, or YAML in memory
// (the embedded demo) with the name problems are reported under.
type Source struct {
	Path string
	YAML []byte
	Name string
}

// Options configure New. nil means defaults.
type Options struct {
	// Store keeps sessions, audit chains, requests and tokens; the Core
	// closes it (when New or FromConfig fails, it is the caller's to
	// close). nil means a new in-memory store.
	Store store.Store
	// Tools are the program's own tools besides the built-in ones;
	// configurations may name them without declaring them.
	Tools []tool.Tool
	// Programs are the tool implementations in code that tools the
	// configuration declares may name (tools[].program), by name: the
	// agentplane binary ships the demo's outbox.
	Programs map[string]tool.Program
	// Providers are the code-backed resolver providers, by name.
	Providers map[string]resolve.Provider
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewID makes session and request ids; nil means 16 random bytes in hex.
	NewID func() string
	// NewToken makes confirmation tokens; nil means 16 random bytes in hex.
	NewToken func() string
	// Logger receives what the runtime logs; nil discards it.
	Logger *slog.Logger
	// HTTPClient is used by HTTP providers and tools; nil means
	// http.DefaultClient (redirects to other origins are refused either
	// way).
	HTTPClient *http.Client
	// ToolTimeout bounds a tool call; 0 means 30s.
	ToolTimeout time.Duration
	// ClockMargin is how far instances' clocks may differ: a request still
	// running after twice ToolTimeout and this is taken over as
	// interrupted (see gate.Options). 0 means one minute; < 0 none.
	ClockMargin time.Duration
	// MCPRetry is how often a configured MCP server that was down at start
	// is tried again; 0 means 5s.
	MCPRetry time.Duration
	// SkipMCP leaves the configuration's MCP servers unconnected and their
	// tools unmounted: for commands that run no tools (route, validate).
	SkipMCP bool
	// Observer, when set, is told what the runtime does: event streams
	// and metrics hang on it.
	Observer *Observer
	// Notifier, when set, is what the built-in agent_notify_user emits
	// through (serve's notification bus); nil: the tool answers that
	// notifications are not served here.
	Notifier tool.Notifier
	// Getenv reads the environment: the secret headers the configuration
	// names (headers_env) of HTTP tools, providers and MCP servers. nil
	// means os.Getenv.
	Getenv func(string) string
	// Secrets are values besides those headers that must never be stored,
	// answered or logged (the LLM's API key, the database's password):
	// they are masked wherever the headers' values are (package redact).
	Secrets []string
	// Tracer, when set, traces turns, executions and calls of mounted MCP
	// servers (package telemetry); nil: no tracing, at no cost. A derived
	// core (replay, conversation tests) traces nothing.
	Tracer trace.Tracer
}

// Observer receives what the runtime does. Every field may be nil; none
// may block.
type Observer struct {
	// Committed is called after every commit the gate makes that appends
	// to a session's audit chain, with the record's sequence number and
	// how long the store took: event streams wake up on it.
	Committed func(session string, seq int64, took time.Duration)
	// Routed is called with every turn's decision and how long routing
	// took.
	Routed func(d agentplane.Decision, took time.Duration)
	// Executed is called with every result of the gate (turns, intents,
	// executions from any front end) and how long the gate took.
	Executed func(res agentplane.ExecutionResult, took time.Duration)
	// ToolsChanged is called when tools are mounted after the start (an
	// MCP server that was down came up): the active tool sets may differ.
	ToolsChanged func()
}

// Core is the runtime. It is safe for concurrent use.
type Core struct {
	name   string
	cfg    *config.Config
	digest string // config.Digest of cfg
	reg    *registry.Registry
	router *router.Router
	gate   *gate.Gate
	tools  *tool.Registry
	store  store.Store
	now    func() time.Time
	newID  func() string
	log    *slog.Logger // masks the secrets (redact)
	redact *redact.Redactor
	obs    Observer
	tracer trace.Tracer
	opts   Options // as given to FromConfig, for Rebuild

	mcp     []*mcpclient.Server
	stop    context.CancelFunc
	retries sync.WaitGroup
	closed  sync.Once
}

// Load reads and validates a configuration against what the options
// supply (the program's tool names, the provider names). The error is
// config.Problems for an invalid configuration.
func Load(src Source, opts *Options) (*config.Config, error) {
	if opts == nil {
		opts = &Options{}
	}
	co := (&registry.Options{Providers: opts.Providers}).ConfigOptions()
	for _, t := range opts.Tools {
		co.Tools = append(co.Tools, t.Spec().Name)
	}
	for name := range opts.Programs {
		co.Programs = append(co.Programs, name)
	}
	slices.Sort(co.Programs)
	if src.Path != "" {
		return config.Load(src.Path, co)
	}
	return config.Parse(src.YAML, src.Name, co)
}

// New loads and compiles the configuration and builds the runtime: the
// registry, the router (triggers indexed, examples trained), the tools
// (MCP servers are connected, waiting at most their connect timeout; one
// that is down is retried in the background and its tools mounted when it
// comes up), and the gate over the store. ctx bounds the start and the
// background retries; Close stops them.
func New(ctx context.Context, src Source, opts *Options) (*Core, error) {
	cfg, err := Load(src, opts)
	if err != nil {
		return nil, err
	}
	return FromConfig(ctx, src.String(), cfg, opts)
}

// String names the source in messages: its path, or its name.
func (s Source) String() string {
	if s.Path != "" {
		return s.Path
	}
	return s.Name
}

// FromConfig builds the runtime from a validated configuration; name is
// what messages call it.
func FromConfig(ctx context.Context, name string, cfg *config.Config, opts *Options) (*Core, error) {
	if opts == nil {
		opts = &Options{}
	}
	c := &Core{name: name, cfg: cfg, store: opts.Store, now: opts.Now, newID: opts.NewID, log: opts.Logger, tracer: opts.Tracer, opts: *opts}
	if c.store == nil {
		c.store = memstore.New()
	}
	if opts.Observer != nil {
		c.obs = *opts.Observer
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.newID == nil {
		c.newID = agentplane.RandomID
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	wired, secrets, err := withSecrets(cfg, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	canon, err := config.Canonical(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.digest = config.Digest(canon)
	if cs, ok := c.store.(store.Configs); ok {
		// every record names the configuration by digest: the store keeps it
		if err := cs.PutConfig(ctx, c.digest, canon); err != nil {
			return nil, fmt.Errorf("%s: keep the configuration: %w", name, err)
		}
	}
	c.redact = redact.New(append(secrets, opts.Secrets...)...)
	c.log = slog.New(c.redact.Handler(c.log.Handler()))
	c.reg, err = registry.New(wired, &registry.Options{Providers: opts.Providers, Now: c.now, HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if c.router, err = router.New(c.reg); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ctx, c.stop = context.WithCancel(ctx)
	if err := c.mountTools(ctx, wired, opts); err != nil {
		c.closeParts() // the store is the caller's while New fails
		return nil, err
	}
	var gst store.Store = c.store
	if c.obs.Committed != nil {
		gst = observed{Store: c.store, committed: c.obs.Committed}
	}
	c.gate, err = gate.New(c.reg, gst, &gate.Options{Now: c.now, NewToken: opts.NewToken, NewID: c.newID, Tools: c.tools,
		ToolTimeout: opts.ToolTimeout, ClockMargin: opts.ClockMargin, Logger: c.log, Tracer: c.tracer, Redact: c.redact, Config: c.digest})
	if err != nil {
		c.closeParts()
		return nil, err
	}
	return c, nil
}

// observed is the store as the gate sees it when commits are observed.
type observed struct {
	store.Store
	committed func(session string, seq int64, took time.Duration)
}

func (o observed) Commit(ctx context.Context, c *store.Commit) error {
	start := time.Now()
	err := o.Store.Commit(ctx, c)
	if err == nil && c.Record != nil {
		o.committed(c.SessionID, c.Record.Seq, time.Since(start))
	}
	return err
}

// mountTools registers the tools: built-in, the program's own, the
// configuration's HTTP tools and its MCP servers' tools, as wired (with
// their secret headers).
func (c *Core) mountTools(ctx context.Context, wired *config.Config, opts *Options) error {
	c.tools = tool.NewRegistry()
	declared, err := tool.FromConfig(wired, opts.HTTPClient, opts.Programs)
	if err != nil {
		return err
	}
	for _, t := range append(append(tool.Builtins(c.cfg, c.reg, c.log, opts.Notifier), opts.Tools...), declared...) {
		if err := c.tools.Register(t); err != nil {
			return err
		}
	}
	retry := opts.MCPRetry
	if retry <= 0 {
		retry = 5 * time.Second
	}
	for _, m := range wired.MCPServers {
		if opts.SkipMCP {
			break
		}
		impact := map[string]tool.Impact{}
		for k, v := range m.Impact {
			impact[k] = tool.Impact(v)
		}
		srv := mcpclient.Mount(ctx, mcpclient.Spec{Name: m.Name, Prefix: m.Prefix, Command: m.Command, URL: m.URL, Headers: m.Headers,
			Impact: impact, ConnectTimeout: m.ConnectTimeout, CallTimeout: m.CallTimeout, HTTPClient: opts.HTTPClient, Tracer: c.tracer, Redact: c.redact})
		c.mcp = append(c.mcp, srv)
		mount := func(tools []tool.Tool) {
			for _, t := range tools {
				if err := c.tools.Register(t); err != nil {
					c.log.Warn("MCP tool not mounted", "server", m.Name, "err", err)
				}
			}
		}
		if h := srv.Health(); !h.Up {
			c.log.Warn("MCP server is down; its tools are mounted when it comes up", "server", m.Name, "err", h.Error)
			c.retries.Go(func() {
				srv.Retry(ctx, retry, func(tools []tool.Tool) {
					mount(tools)
					c.log.Info("MCP server is up; its tools are mounted", "server", m.Name, "tools", len(tools))
					if c.obs.ToolsChanged != nil {
						c.obs.ToolsChanged()
					}
				})
			})
			continue
		}
		mount(srv.Tools())
	}
	return nil
}

// Close stops the MCP retries, closes the connections to MCP servers and
// closes the store. It is safe to call more than once.
func (c *Core) Close() error {
	var err error
	c.closed.Do(func() {
		c.closeParts()
		if c.store != nil {
			err = c.store.Close()
		}
	})
	return err
}

// closeParts stops the MCP retries and closes the connections to MCP
// servers: all Close does but close the store.
func (c *Core) closeParts() {
	if c.stop != nil {
		c.stop()
	}
	c.retries.Wait()
	for _, s := range c.mcp {
		s.Close()
	}
}

// Derived are the parts a derived core replaces.
type Derived struct {
	Store    store.Store // required
	Now      func() time.Time
	NewID    func() string
	NewToken func() string
	Tools    *tool.Registry // nil: the parent's tools
}

// Derive returns a core over the same compiled configuration and router
// (nothing is loaded, indexed or trained again) with its own store, clock,
// ids and tools: replay and conversation tests run each session on one.
// Closing it closes its store only.
func (c *Core) Derive(d Derived) (*Core, error) {
	if d.Store == nil {
		return nil, errors.New("core: Derive needs a store")
	}
	n := &Core{name: c.name, cfg: c.cfg, digest: c.digest, reg: c.reg, router: c.router, tools: d.Tools, store: d.Store,
		now: d.Now, newID: d.NewID, log: c.log, redact: c.redact, opts: c.opts}
	if n.tools == nil {
		n.tools = c.tools
	}
	if n.now == nil {
		n.now = c.now
	}
	if n.newID == nil {
		n.newID = c.newID
	}
	var err error
	n.gate, err = gate.New(c.reg, d.Store, &gate.Options{Now: n.now, NewToken: d.NewToken, Tools: n.tools, Logger: c.log, Redact: c.redact, Config: c.digest})
	return n, err
}

// Rebuild returns a core over cfg, a changed copy of this core's
// configuration (already valid), built with this core's options but its
// own in-memory store, no observer and no tracer, and without connecting
// to MCP servers: the tools mounted from them here are mounted there too.
// Conversation tests with a catalog's items given in the test file, and
// eval trying another example threshold, route on one. The caller closes
// it; closing it leaves this core as it is. A derived core rebuilds with
// the options of the core it was derived from.
func (c *Core) Rebuild(ctx context.Context, cfg *config.Config) (*Core, error) {
	o := c.opts
	o.Store, o.Observer, o.Tracer, o.SkipMCP = nil, nil, nil, true
	n, err := FromConfig(ctx, c.name, cfg, &o)
	if err != nil {
		return nil, err
	}
	for _, name := range c.tools.Names() {
		if _, ok := n.tools.Get(name); ok {
			continue
		}
		if t, ok := c.tools.Get(name); ok && t.Spec().Server != "" {
			if err := n.tools.Register(t); err != nil {
				n.Close()
				return nil, err
			}
		}
	}
	return n, nil
}

// Name returns what messages call the configuration: its file, or the
// embedded demo's name.
func (c *Core) Name() string { return c.name }

// Config returns the configuration.
func (c *Core) Config() *config.Config { return c.cfg }

// Digest returns the digest of the configuration (config.Digest), which
// every audit record of a decision or an execution carries.
func (c *Core) Digest() string { return c.digest }

// StoredConfig returns the configuration the store keeps under digest
// (store.Configs): the one an audit record names. false when the store
// keeps none under it, or keeps no configurations.
func (c *Core) StoredConfig(ctx context.Context, digest string) (*config.Config, bool, error) {
	if digest == c.digest {
		return c.cfg, true, nil
	}
	cs, ok := c.store.(store.Configs)
	if !ok || digest == "" {
		return nil, false, nil
	}
	body, ok, err := cs.Config(ctx, digest)
	if err != nil || !ok {
		return nil, false, err
	}
	cfg, err := config.FromCanonical(body)
	if err != nil {
		return nil, false, fmt.Errorf("configuration %s: %w", config.ShortDigest(digest), err)
	}
	return cfg, true, nil
}

// Registry returns the compiled configuration.
func (c *Core) Registry() *registry.Registry { return c.reg }

// Router returns the router.
func (c *Core) Router() *router.Router { return c.router }

// Gate returns the gate, the one door every action passes.
func (c *Core) Gate() *gate.Gate { return c.gate }

// Tools returns the tools.
func (c *Core) Tools() *tool.Registry { return c.tools }

// Store returns the store.
func (c *Core) Store() store.Store { return c.store }

// Now returns the core's clock reading.
func (c *Core) Now() time.Time { return c.now() }

// Logger returns the logger: the one given, with the server's secrets
// masked.
func (c *Core) Logger() *slog.Logger { return c.log }

// Redactor masks the server's secrets (the configuration's secret
// headers and Options.Secrets): front ends pass what a tool, a provider or
// a model said through it before they answer or log it. nil masks nothing.
func (c *Core) Redactor() *redact.Redactor { return c.redact }

// MCPServers returns the mounted MCP servers, for health reports.
func (c *Core) MCPServers() []*mcpclient.Server { return c.mcp }

// ToolInfo is a tool as a front end lists it: its spec and when it needs
// the human's confirmation.
type ToolInfo struct {
	Spec   tool.Spec
	Policy gate.Policy
}

// ActiveTools returns the tools offered to the LLM and MCP clients for a
// session in the mode with a principal holding the roles, by name.
func (c *Core) ActiveTools(mode string, roles []string) []ToolInfo {
	var out []ToolInfo
	for _, name := range c.tools.Names() {
		t, ok := c.tools.Get(name)
		if !ok {
			continue
		}
		s := t.Spec()
		if c.reg.ToolActive(mode, roles, s.Name, s.Server) {
			out = append(out, ToolInfo{Spec: s, Policy: gate.ToolPolicy(s)})
		}
	}
	return out
}

// ModeOK reports whether the configuration has the mode; "" is the
// default mode.
func (c *Core) ModeOK(mode string) bool {
	if mode == "" {
		return true
	}
	_, ok := c.reg.Mode(mode)
	return ok
}

// Route decides a turn for a session state without recording anything:
// the pure router, for `agentplane route` and explaining decisions.
func (c *Core) Route(ctx context.Context, sess *agentplane.Session, in agentplane.TurnInput) (agentplane.Decision, error) {
	if in.Now.IsZero() {
		in.Now = c.now()
	}
	return c.router.Route(ctx, sess, in)
}

// withSecrets returns the configuration as the core wires it: the
// secret headers it names (headers_env) read from the environment into
// the headers its HTTP tools, providers and MCP servers send. cfg is not
// changed, so Config never holds a secret. Every variable that is not set
// is named in the error, with where the configuration asks for it.
func withSecrets(cfg *config.Config, getenv func(string) string) (*config.Config, []string, error) {
	var missing, values []string
	fill := func(path string, headers, fromEnv map[string]string) map[string]string {
		merged := make(map[string]string, len(headers)+len(fromEnv))
		for k, v := range headers {
			merged[k] = v
		}
		for header, env := range fromEnv {
			v := getenv(env)
			if v == "" {
				missing = append(missing, fmt.Sprintf("%s.headers_env.%s: environment variable %s is not set", path, header, env))
				continue
			}
			merged[header] = v
			values = append(values, v)
		}
		return merged
	}
	w := *cfg
	w.Tools = slices.Clone(cfg.Tools)
	for i := range w.Tools {
		if h := w.Tools[i].HTTP; h != nil && len(h.HeadersEnv) > 0 {
			c := *h
			c.Headers = fill(fmt.Sprintf("tools[%d].http", i), h.Headers, h.HeadersEnv)
			w.Tools[i].HTTP = &c
		}
	}
	w.Catalogs = slices.Clone(cfg.Catalogs)
	for i := range w.Catalogs {
		if p := w.Catalogs[i].Provider; p != nil && p.HTTP != nil && len(p.HTTP.HeadersEnv) > 0 {
			c, h := *p, *p.HTTP
			h.Headers = fill(fmt.Sprintf("catalogs[%d].provider.http", i), p.HTTP.Headers, p.HTTP.HeadersEnv)
			c.HTTP = &h
			w.Catalogs[i].Provider = &c
		}
	}
	w.MCPServers = slices.Clone(cfg.MCPServers)
	for i := range w.MCPServers {
		if m := &w.MCPServers[i]; len(m.HeadersEnv) > 0 {
			m.Headers = fill(fmt.Sprintf("mcp_servers[%d]", i), m.Headers, m.HeadersEnv)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, nil, fmt.Errorf("secret headers: %s", strings.Join(missing, "; "))
	}
	return &w, values, nil
}
