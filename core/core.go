// Package core holds what turns and actions need: one value, built once
// from a configuration and options, with the compiled configuration, the
// router, the gate, the tools (built-in, the program's own, HTTP and those
// mounted from MCP servers), the store, the clock, the id source and the
// logger. It is the one door to a session: turns, executions, intents,
// notices, LLM exchanges and proposals are its methods, each on one
// snapshot of the configuration; it hands out neither its gate nor its
// store nor its tools (View gives the configuration and the tools' specs).
// The runtime every command opens (package plane) builds it first and the
// notifications, the LLM agent and the workflows on it; front ends
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
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	// closes it unless LeaveStore (when New or FromConfig fails, it is the
	// caller's to close). nil means a new in-memory store.
	Store store.Store
	// LeaveStore leaves Store open when the Core closes: whoever opened it
	// closes it (an embedder's store given to plane.Options.Store).
	LeaveStore bool
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
//
// What the configuration decides — the compiled configuration, the
// router, the gate, the tools and the MCP servers mounted — is one
// snapshot, replaced whole by Reload: a turn, an execution or an intent
// runs to its end on the snapshot it started on.
type Core struct {
	name   string
	snap   atomic.Pointer[snapshot]
	store  store.Store
	now    func() time.Time
	newID  func() string
	log    *slog.Logger // masks the secrets (redact)
	redact *redact.Redactor
	obs    Observer
	tracer trace.Tracer
	opts   Options // as given to FromConfig, for Rebuild and Reload
	getenv func(string) string

	ctx      context.Context // the MCP retries' and drains' (Close cancels it)
	stop     context.CancelFunc
	bg       sync.WaitGroup // MCP retries, closings of retired MCP servers
	reloadMu sync.Mutex     // one Reload at a time
	closed   sync.Once
	derived  bool // by Derive: shares its parent's MCP servers, closes its store only
}

// snapshot is what one configuration makes of the core, never changed
// once in force (tools mounted late aside).
type snapshot struct {
	cfg    *config.Config
	digest string // config.Digest of cfg
	reg    *registry.Registry
	router *router.Router
	gate   *gate.Gate
	tools  *tool.Registry
	mcp    []*mounted

	users   atomic.Int64 // turns, executions and intents running on it
	retired atomic.Bool  // a Reload replaced it
	once    sync.Once
	drained chan struct{} // closed once retired with no users left
}

// mounted is an MCP server as one configuration mounts it.
type mounted struct {
	spec  config.MCPServer // as wired: with its secret headers
	srv   *mcpclient.Server
	retry context.CancelFunc // ends its background retry
}

// acquire returns the snapshot in force, counted as used until release.
func (c *Core) acquire() *snapshot {
	for {
		s := c.snap.Load()
		s.users.Add(1)
		if c.snap.Load() == s {
			return s
		}
		s.release() // replaced meanwhile: take the new one
	}
}

// release ends one use of s; the last use of a retired snapshot drains it.
func (s *snapshot) release() {
	if s.users.Add(-1) == 0 && s.retired.Load() {
		s.once.Do(func() { close(s.drained) })
	}
}

// retire marks s replaced; drained closes when its last use ends.
func (s *snapshot) retire() {
	s.retired.Store(true)
	if s.users.Load() == 0 {
		s.once.Do(func() { close(s.drained) })
	}
}

// cur is the snapshot in force, for what needs no consistency across calls.
func (c *Core) cur() *snapshot { return c.snap.Load() }

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
	c := &Core{name: name, store: opts.Store, now: opts.Now, newID: opts.NewID, log: opts.Logger, tracer: opts.Tracer, opts: *opts, getenv: opts.Getenv}
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
	if c.getenv == nil {
		c.getenv = os.Getenv
	}
	c.redact = redact.Growing(opts.Secrets...)
	c.log = slog.New(c.redact.Handler(c.log.Handler()))
	c.ctx, c.stop = context.WithCancel(ctx)
	s, err := c.build(ctx, cfg, nil)
	if err != nil {
		c.stop()
		c.bg.Wait()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.snap.Store(s)
	return c, nil
}

// build makes a snapshot of cfg: the secret headers read from the
// environment (and masked from then on), the configuration kept in the
// store by digest, the registry, the router, the tools and the gate. The
// MCP servers prev mounted with the same settings are kept, the others
// mounted (a server that is down is retried in the background); prev's
// that cfg drops are left to the caller. On error nothing new is left
// running.
func (c *Core) build(ctx context.Context, cfg *config.Config, prev *snapshot) (_ *snapshot, err error) {
	wired, secrets, err := withSecrets(cfg, c.getenv)
	if err != nil {
		return nil, err
	}
	canon, err := config.Canonical(cfg)
	if err != nil {
		return nil, err
	}
	s := &snapshot{cfg: cfg, digest: config.Digest(canon), drained: make(chan struct{})}
	if cs, ok := c.store.(store.Configs); ok {
		// every record names the configuration by digest: the store keeps it
		if err := cs.PutConfig(ctx, s.digest, canon); err != nil {
			return nil, fmt.Errorf("keep the configuration: %w", err)
		}
	}
	c.redact.Add(secrets...)
	if s.reg, err = registry.New(wired, &registry.Options{Providers: c.opts.Providers, Now: c.now, HTTPClient: c.opts.HTTPClient, Keep: c.keepItems()}); err != nil {
		return nil, err
	}
	if s.router, err = router.NewAfter(s.reg, prev.routerOrNil()); err != nil {
		return nil, err
	}
	if err := c.mountTools(ctx, s, wired, prev); err != nil {
		c.unmount(s, prev)
		return nil, err
	}
	var gst store.Store = c.store
	if c.obs.Committed != nil {
		gst = observed{Store: c.store, committed: c.obs.Committed}
	}
	s.gate, err = gate.New(s.reg, gst, &gate.Options{Now: c.now, NewToken: c.opts.NewToken, NewID: c.newID, Tools: s.tools,
		ToolTimeout: c.opts.ToolTimeout, ClockMargin: c.opts.ClockMargin, Logger: c.log, Tracer: c.tracer, Redact: c.redact, Config: s.digest})
	if err != nil {
		c.unmount(s, prev)
		return nil, err
	}
	return s, nil
}

// unmount closes the MCP servers s mounted that prev does not have (a
// build that failed).
func (c *Core) unmount(s, prev *snapshot) {
	for _, m := range s.mcp {
		if !prev.has(m) {
			m.retry()
			m.srv.Close()
		}
	}
}

// has reports whether s mounted m (nil s: none).
func (s *snapshot) has(m *mounted) bool {
	if s == nil {
		return false
	}
	for _, o := range s.mcp {
		if o == m {
			return true
		}
	}
	return false
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

// SessionRequest reads as the store beneath does (in one read where it
// can: the wrapper must not hide that).
func (o observed) SessionRequest(ctx context.Context, key store.RequestKey) (*agentplane.Session, store.Request, bool, error) {
	return store.SessionRequest(ctx, o.Store, key)
}

// mountTools registers s's tools: built-in, the program's own, the
// configuration's HTTP tools and its MCP servers' tools, as wired (with
// their secret headers). An MCP server prev mounted with the same
// settings is kept, with its connection.
func (c *Core) mountTools(ctx context.Context, s *snapshot, wired *config.Config, prev *snapshot) error {
	opts := &c.opts
	s.tools = tool.NewRegistryAfter(prev.toolsOrNil())
	declared, err := tool.FromConfig(wired, opts.HTTPClient, opts.Programs)
	if err != nil {
		return err
	}
	for _, t := range append(append(tool.Builtins(s.cfg, s.reg, c.log, opts.Notifier), opts.Tools...), declared...) {
		if err := s.tools.Register(t); err != nil {
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
		if kept := prev.mounted(m); kept != nil {
			s.mcp = append(s.mcp, kept)
			if kept.srv.Health().Up {
				c.register(s.tools, m.Name, kept.srv.Tools())
			} // else its retry mounts them in the snapshot in force
			continue
		}
		impact := map[string]tool.Impact{}
		for k, v := range m.Impact {
			impact[k] = tool.Impact(v)
		}
		srv := mcpclient.Mount(c.ctx, mcpclient.Spec{Name: m.Name, Prefix: m.Prefix, Command: m.Command, URL: m.URL, Headers: m.Headers,
			Impact: impact, ConnectTimeout: m.ConnectTimeout, CallTimeout: m.CallTimeout, HTTPClient: opts.HTTPClient, Tracer: c.tracer, Redact: c.redact})
		rctx, cancel := context.WithCancel(c.ctx)
		s.mcp = append(s.mcp, &mounted{spec: m, srv: srv, retry: cancel})
		if h := srv.Health(); !h.Up {
			c.log.Warn("MCP server is down; its tools are mounted when it comes up", "server", m.Name, "err", h.Error)
			c.bg.Go(func() {
				srv.Retry(rctx, retry, func(tools []tool.Tool) {
					target := c.snap.Load()
					if target == nil { // up before the first snapshot is in force
						target = s
					}
					c.register(target.tools, m.Name, tools)
					c.log.Info("MCP server is up; its tools are mounted", "server", m.Name, "tools", len(tools))
					if c.obs.ToolsChanged != nil {
						c.obs.ToolsChanged()
					}
				})
			})
			continue
		}
		c.register(s.tools, m.Name, srv.Tools())
	}
	return nil
}

// register adds an MCP server's tools to a registry; one already there is
// left as it is.
func (c *Core) register(reg *tool.Registry, server string, tools []tool.Tool) {
	for _, t := range tools {
		if _, ok := reg.Get(t.Spec().Name); ok {
			continue
		}
		if err := reg.Register(t); err != nil {
			c.log.Warn("MCP tool not mounted", "server", server, "err", err)
		}
	}
}

// toolsOrNil is s's tool registry, nil without s.
func (s *snapshot) toolsOrNil() *tool.Registry {
	if s == nil {
		return nil
	}
	return s.tools
}

// routerOrNil is s's router, nil without s.
func (s *snapshot) routerOrNil() *router.Router {
	if s == nil {
		return nil
	}
	return s.router
}

// mounted returns the server s mounted with exactly m's settings, or nil.
func (s *snapshot) mounted(m config.MCPServer) *mounted {
	if s == nil {
		return nil
	}
	for _, o := range s.mcp {
		if reflect.DeepEqual(o.spec, m) {
			return o
		}
	}
	return nil
}

// Close stops the MCP retries, closes the connections to MCP servers and
// closes the store. It is safe to call more than once.
func (c *Core) Close() error {
	var err error
	c.closed.Do(func() {
		c.reloadMu.Lock() // a reload in progress ends first; none starts after
		defer c.reloadMu.Unlock()
		if c.stop != nil {
			c.stop()
		}
		c.bg.Wait()
		if s := c.cur(); s != nil && !c.derived {
			for _, m := range s.mcp {
				m.srv.Close()
			}
		}
		if c.store != nil && (c.derived || !c.opts.LeaveStore || c.opts.Store == nil) { // a store the core opened, or was given to close
			err = c.store.Close()
		}
	})
	return err
}

// Derived are the parts a derived core replaces.
type Derived struct {
	Store    store.Store // required
	Now      func() time.Time
	NewID    func() string
	NewToken func() string
	Tools    *tool.Registry // nil: the parent's tools
	// Replace are tools that take the place of the parent's tools of the
	// same name (a test's stubs, a fresh outbox); each must name one.
	// With Tools nil only.
	Replace []tool.Tool
}

// Derive returns a core over the same compiled configuration and router
// (nothing is loaded, indexed or trained again) with its own store, clock,
// ids and tools: replay and conversation tests run each session on one.
// Closing it closes its store only.
func (c *Core) Derive(d Derived) (*Core, error) {
	if d.Store == nil {
		return nil, errors.New("core: Derive needs a store")
	}
	p := c.cur()
	n := &Core{name: c.name, store: d.Store, now: d.Now, newID: d.NewID, log: c.log, redact: c.redact, opts: c.opts, getenv: c.getenv, derived: true}
	s := &snapshot{cfg: p.cfg, digest: p.digest, reg: p.reg, router: p.router, tools: d.Tools, mcp: p.mcp, drained: make(chan struct{})}
	switch {
	case s.tools != nil && len(d.Replace) > 0:
		return nil, errors.New("core: Derive takes Tools or Replace, not both")
	case s.tools == nil && len(d.Replace) > 0:
		var err error
		if s.tools, err = replaced(p.tools, d.Replace); err != nil {
			return nil, err
		}
	case s.tools == nil:
		s.tools = p.tools
	}
	if n.now == nil {
		n.now = c.now
	}
	if n.newID == nil {
		n.newID = c.newID
	}
	var err error
	s.gate, err = gate.New(p.reg, d.Store, &gate.Options{Now: n.now, NewToken: d.NewToken, Tools: s.tools, Logger: c.log, Redact: c.redact, Config: p.digest})
	n.snap.Store(s)
	return n, err
}

// replaced returns a registry of tools with some replaced by the tools of
// the same name.
func replaced(tools *tool.Registry, with []tool.Tool) (*tool.Registry, error) {
	by := map[string]tool.Tool{}
	for _, t := range with {
		name := t.Spec().Name
		if _, ok := tools.Get(name); !ok {
			return nil, fmt.Errorf("core: Derive replaces tool %q, which is not registered (tools: %s)", name, strings.Join(tools.Names(), ", "))
		}
		by[name] = t
	}
	out := tool.NewRegistry()
	for _, name := range tools.Names() {
		t, ok := by[name]
		if !ok {
			t, _ = tools.Get(name)
		}
		if err := out.Register(t); err != nil {
			return nil, err
		}
	}
	return out, nil
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
	from, to := c.cur().tools, n.cur().tools
	for _, name := range from.Names() {
		if _, ok := to.Get(name); ok {
			continue
		}
		if t, ok := from.Get(name); ok && t.Spec().Server != "" {
			if err := to.Register(t); err != nil {
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

// Config returns the configuration in force.
func (c *Core) Config() *config.Config { return c.cur().cfg }

// Digest returns the digest of the configuration in force
// (config.Digest), which every audit record of a decision or an execution
// carries.
func (c *Core) Digest() string { return c.cur().digest }

// StoredConfig returns the configuration the store keeps under digest
// (store.Configs): the one an audit record names. false when the store
// keeps none under it, or keeps no configurations.
func (c *Core) StoredConfig(ctx context.Context, digest string) (*config.Config, bool, error) {
	if s := c.cur(); digest == s.digest {
		return s.cfg, true, nil
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

// Router returns the router of the configuration in force: a pure
// function of a session and an input, which records nothing.
func (c *Core) Router() *router.Router { return c.cur().router }

// Now returns the core's clock reading.
func (c *Core) Now() time.Time { return c.now() }

// Logger returns the logger: the one given, with the server's secrets
// masked.
func (c *Core) Logger() *slog.Logger { return c.log }

// Redactor masks the server's secrets (the configuration's secret
// headers and Options.Secrets): front ends pass what a tool, a provider or
// a model said through it before they answer or log it. nil masks nothing.
func (c *Core) Redactor() *redact.Redactor { return c.redact }

// MCPState is a mounted MCP server's health, for health reports and
// metrics.
type MCPState struct {
	Name string
	mcpclient.Health
}

// MCPHealth returns the health of the MCP servers the configuration in
// force mounted, in its order. The servers are not handed out: their tools
// run through the gate only.
func (c *Core) MCPHealth() []MCPState {
	var out []MCPState
	for _, m := range c.cur().mcp {
		out = append(out, MCPState{Name: m.srv.Name(), Health: m.srv.Health()})
	}
	return out
}

// ToolInfo is a tool as a front end lists it: its spec, when it needs
// the human's confirmation, and whether it is idempotent by key
// (tool.ByKey: a call repeated with the same key acts once downstream).
type ToolInfo struct {
	Spec   tool.Spec
	Policy gate.Policy
	ByKey  bool
}

// ActiveTools returns the tools offered to the LLM and MCP clients for a
// session in the mode with a principal holding the roles, by name (see
// View.ActiveTools).
func (c *Core) ActiveTools(mode string, roles []string) []ToolInfo {
	return c.View().ActiveTools(mode, roles)
}

// ModeOK reports whether the configuration in force has the mode; "" is
// the default mode.
func (c *Core) ModeOK(mode string) bool { return c.View().ModeOK(mode) }

// Route decides a turn for a session state without recording anything:
// the pure router, for `agentplane route` and explaining decisions.
func (c *Core) Route(ctx context.Context, sess *agentplane.Session, in agentplane.TurnInput) (agentplane.Decision, error) {
	if in.Now.IsZero() {
		in.Now = c.now()
	}
	return c.cur().router.Route(ctx, sess, in)
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
