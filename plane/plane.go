// Package plane opens the runtime every agentplane command works with, in
// one place: the store, the core over the configuration, the event hub,
// the notification ledger and bus, the LLM agent and the workflow engine,
// each built once with what it needs passed in, and closed in reverse
// order. Front ends (the terminal, httpapi, mcpserver) take the Runtime
// and assemble none of these parts themselves.
//
//	rt, err := plane.Open(ctx, plane.Options{Config: core.Source{Path: "agentplane.yaml"}, DB: ".agentplane/agentplane.db", LLM: true})
//	if err != nil { ... }
//	defer rt.Close(30 * time.Second)
//	if err := rt.Start(ctx); err != nil { ... } // the watchdog, workflow takeover, other instances' events
package plane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/internal/dsn"
	"github.com/agentplane/agentplane/internal/version"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/telemetry"
	"github.com/agentplane/agentplane/workflow"
)

// Options say what to open. Config and DB are every command's common
// flags (--config, --db).
type Options struct {
	// Config is the configuration: a file, or YAML in memory (the embedded
	// demo).
	Config core.Source
	// Store, when set, keeps sessions, audit chains, notifications and
	// workflows: an embedder's store, opened with Extensions (see package
	// plane/drivers), which the runtime uses and never closes — its opener
	// closes it after Close. DB then only names it in messages.
	Store store.Store
	// DB, when Store is not set, is the database OpenStore opens once the
	// configuration is valid: a SQLite file, a postgres:// URL, or "" for
	// memory (nothing survives the process; there are no notifications
	// and no workflows). The runtime closes what it opened.
	DB string
	// OpenStore opens DB (drivers.Open, which links the SQLite and
	// PostgreSQL drivers: package plane links none, the program that
	// imports drivers does). Required when DB is set and Store is not.
	OpenStore func(ctx context.Context, db string, o *StoreOptions) (store.Store, error)
	// PGEvents is how, on PostgreSQL, this instance learns of other
	// instances' commits: "poll" (default) or "notify" (see Start).
	PGEvents string
	// Core are the core's options (the program's tools, the clock, ids,
	// the HTTP client, timeouts; an Observer for metrics). The runtime sets
	// its Store, Logger and Notifier, and adds its own to the Observer.
	Core core.Options
	// Hub are the event hub's options; its Logger is the runtime's.
	Hub events.Options
	// Workflows are the workflow engine's options; its Logger is the
	// runtime's.
	Workflows workflow.Options
	// LLM connects the LLM the configuration (and the environment, see
	// llm.FromEnv) names: continue_with_llm turns are answered, and the
	// agent's notifications reach it. An endpoint that does not answer is
	// a warning; a key variable that is not set is an error.
	LLM bool
	// Getenv reads the environment (API keys, the LLM's settings, the
	// configuration's secret headers); nil
	// means os.Getenv.
	Getenv func(string) string
	// Logger receives what the runtime logs; nil discards it.
	Logger *slog.Logger
	// TracerProvider, when set, is where the runtime's spans go (a program
	// embedding agentplane passes its own); nil: the OTEL_* environment
	// decides (package telemetry), and tracing is off by default.
	TracerProvider trace.TracerProvider
}

// Runtime is one agentplane process's runtime. Its fields are set by Open
// and read-only afterwards; the parts are safe for concurrent use.
type Runtime struct {
	Store store.Store
	Core  *core.Core
	// Hub fans committed records out to event streams; it is woken by
	// every commit through the core.
	Hub *events.Hub
	// Ledger and Bus are the notifications; nil on a memory store.
	Ledger *notify.Ledger
	Bus    *notify.Bus
	// Agent answers turns the router hands to the LLM; nil when no LLM is
	// configured or Options.LLM is false.
	Agent *llm.Agent
	// Workflows runs workflows; nil on a memory store.
	Workflows *workflow.Engine
	// Keys are the configuration's API keys (none: the local principal).
	Keys *auth.Keys
	// OIDC verifies the identity provider's access tokens (auth.oidc);
	// nil when none is configured.
	OIDC   *auth.OIDC
	Logger *slog.Logger
	// Tracer traces turns, executions, LLM calls, MCP calls, workflows and
	// notifications when the OTEL_* environment asks for it (package
	// telemetry); nil: tracing is off.
	Tracer trace.Tracer
	// DB names the database in messages, never with a password.
	DB string

	pgEvents     string
	opts         Options             // as Open was given them, for Reload
	getenv       func(string) string // Options.Getenv or os.Getenv
	reloadMu     sync.Mutex          // one Reload at a time
	recoverEvery time.Duration
	shutdown     func(context.Context) error // the tracer provider's: flushes the spans
	mu           sync.Mutex
	changed      []func()           // told when tools were mounted late
	stop         context.CancelFunc // ends the background work; nil until Start
	bg           sync.WaitGroup     // the background work Start began, waited for by Close
	started      bool
	closed       bool
}

// ErrStarted is Start's error when the runtime was started already, and
// ErrClosed when it was closed.
var (
	ErrStarted = errors.New("plane: the runtime is started already")
	ErrClosed  = errors.New("plane: the runtime is closed")
)

// Open opens the store, builds the core over the configuration (an
// invalid one is a config.Problems error), and the parts that need them,
// each with what it depends on: the ledger before the LLM agent (its
// awareness of notifications), the agent before the bus (which hands it
// its notifications), the core before all. ctx bounds the opening only;
// Close ends the runtime.
func Open(ctx context.Context, o Options) (_ *Runtime, err error) {
	rt := &Runtime{Logger: o.Logger, pgEvents: o.PGEvents, DB: Shown(o.DB), recoverEvery: recoverEvery(o.Core.ToolTimeout)}
	if o.Store != nil && o.DB == "" {
		rt.DB = "the given store"
	}
	if rt.Logger == nil {
		rt.Logger = slog.New(slog.DiscardHandler)
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	rt.opts, rt.getenv = o, getenv
	// the configuration first: a bad one, or one whose secrets are not
	// all in the environment, touches no database (every missing
	// variable is named at once)
	cfg, err := core.Load(o.Config, &o.Core)
	if err != nil {
		return nil, err
	}
	if missing := MissingSecrets(cfg, getenv, o.LLM); len(missing) > 0 {
		return nil, &MissingEnvError{Config: o.Config.String(), Missing: missing}
	}
	switch rt.pgEvents {
	case "":
		rt.pgEvents = "poll"
	case "poll", "notify":
	default:
		return nil, fmt.Errorf("plane: PGEvents %q: want poll or notify", o.PGEvents)
	}
	if o.TracerProvider != nil {
		rt.shutdown, rt.Tracer = func(context.Context) error { return nil }, telemetry.Tracer(o.TracerProvider) // the caller's to flush
	} else {
		tp, shutdown, err := telemetry.FromEnv(ctx, getenv, "agentplane", version.Version())
		if err != nil {
			return nil, err
		}
		rt.shutdown, rt.Tracer = shutdown, telemetry.Tracer(nilIfNone(tp))
	}
	defer func() { // a part that fails closes what was opened before it
		if err == nil {
			return
		}
		if rt.Core != nil {
			rt.Core.Close() // and the store it opened
		} else if rt.Store != nil && o.Store == nil {
			rt.Store.Close()
		}
		rt.shutdown(ctx)
	}()
	switch {
	case o.Store != nil:
		rt.Store = o.Store // the embedder's, to close
	case o.DB == "":
		rt.Store = memstore.New()
	case o.OpenStore == nil:
		return nil, fmt.Errorf("plane: DB %s needs Options.OpenStore (drivers.Open links the SQLite and PostgreSQL drivers), or pass the opened Options.Store", Shown(o.DB))
	default:
		if rt.Store, err = o.OpenStore(ctx, o.DB, &StoreOptions{PGNotify: rt.pgEvents == "notify"}); err != nil {
			return nil, err
		}
	}
	_, sql := rt.Store.(store.Querier)
	if sql {
		if rt.Ledger, err = notify.NewLedger(rt.Store, &notify.Options{Now: o.Core.Now, NewID: o.Core.NewID}); err != nil {
			return nil, err
		}
	}
	co := o.Core
	co.Store, co.Logger, co.Tracer, co.Getenv = rt.Store, rt.Logger, rt.Tracer, getenv
	co.LeaveStore = o.Store != nil // whoever opened the store closes it
	co.Observer = rt.observer(o.Core.Observer)
	// agent_notify_user emits through the bus, which is built on the core:
	// the tool reads it from the runtime, whole before anything runs
	co.Notifier = notify.Notifier(func() *notify.Bus { return rt.Bus })
	// values the core masks beside the configuration's secret headers
	co.Secrets = append(co.Secrets, dbPassword(o.DB))
	if o.LLM {
		if s, ok, err := llm.FromEnv(cfg.LLM, getenv); err == nil && ok {
			co.Secrets = append(co.Secrets, s.APIKey)
		}
	}
	// the core outlives ctx (it closes with the runtime)
	if rt.Core, err = core.FromConfig(context.WithoutCancel(ctx), o.Config.String(), cfg, &co); err != nil {
		return nil, err
	}
	rt.Logger = rt.Core.Logger() // what every part logs from here on has the secrets masked
	ho := o.Hub
	ho.Logger = rt.Logger
	rt.Hub = events.NewHub(rt.Store.Records, &ho) // woken by the core's commits
	if rt.Keys, err = auth.New(rt.Core.Config().Auth, getenv); err != nil {
		return nil, fmt.Errorf("%s: %w", rt.Core.Name(), err)
	}
	if c := rt.Core.Config().Auth.OIDC; c != nil {
		rt.OIDC = auth.NewOIDC(*c, nil, nil)
	}
	if o.LLM {
		if rt.Agent, err = rt.agent(ctx, getenv, &co); err != nil {
			return nil, err
		}
	}
	if rt.Ledger != nil {
		rt.Bus = notify.NewBus(rt.Ledger, rt.Core, rt.Hub, &notify.BusOptions{Agent: rt.Agent, Logger: rt.Logger, Tracer: rt.Tracer})
	}
	if sql || o.Workflows.Memory {
		wo := o.Workflows
		wo.Logger, wo.Tracer = rt.Logger, rt.Tracer
		if rt.Workflows, err = workflow.New(rt.Core, rt.Store, &wo); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// recoverEvery is how often Start looks for requests left running by a
// stopped instance: half the tool timeout, between 1 s and 15 s.
func recoverEvery(toolTimeout time.Duration) time.Duration {
	if toolTimeout <= 0 {
		toolTimeout = 30 * time.Second
	}
	return min(max(toolTimeout/2, time.Second), 15*time.Second)
}

// agent connects the configured LLM: nil when none is configured.
func (rt *Runtime) agent(ctx context.Context, getenv func(string) string, co *core.Options) (*llm.Agent, error) {
	s, ok, err := llm.FromEnv(rt.Core.Config().LLM, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rt.Core.Name(), err)
	}
	if !ok {
		return nil, nil
	}
	model := llm.NewOpenAI(s, co.HTTPClient)
	if err := model.Check(ctx); err != nil {
		rt.Logger.Warn("the LLM does not answer; its turns fail until it does", "err", err)
	}
	lo := &llm.Options{Tracer: rt.Tracer, CaptureContent: strings.EqualFold(getenv(telemetry.EnvCaptureContent), "true")}
	if rt.Ledger != nil {
		lo.Awareness, lo.Acknowledged = rt.Ledger.Awareness, rt.Ledger.AgentAck
	}
	return llm.New(rt.Core, model, s.LLM, lo), nil
}

// observer is the core's observer: the caller's (metrics), the hub woken
// by every commit, and tools mounted late told to OnToolsChanged's
// listeners.
func (rt *Runtime) observer(given *core.Observer) *core.Observer {
	var obs core.Observer
	if given != nil {
		obs = *given
	}
	committed, toolsChanged := obs.Committed, obs.ToolsChanged
	obs.Committed = func(session string, seq int64, took time.Duration) {
		rt.Hub.Committed(session, seq, took)
		if committed != nil {
			committed(session, seq, took)
		}
	}
	obs.ToolsChanged = func() {
		rt.mu.Lock()
		fns := append([]func(){}, rt.changed...)
		rt.mu.Unlock()
		for _, fn := range fns {
			fn()
		}
		if toolsChanged != nil {
			toolsChanged()
		}
	}
	return &obs
}

// OnToolsChanged registers fn to be told when tools were mounted after the
// start (an MCP server that was down came up): the tools active in a mode
// may differ. fn must not block.
func (rt *Runtime) OnToolsChanged(fn func()) {
	rt.mu.Lock()
	rt.changed = append(rt.changed, fn)
	rt.mu.Unlock()
}

// Start runs the background work of a serving process until Close: the
// takeover of requests a stopped instance left running (core.Recover), the
// notification watchdog, the workflow engine taking over what nobody holds
// (after a crash, another instance's), and, on PostgreSQL, following other
// instances' commits for the event streams — by polling the followed
// sessions' chain heads every 50 ms (commits pay nothing) or by
// LISTEN/NOTIFY (about 1 ms, but concurrent commits slow down) — and the
// notifications they stored for the inbox streams open here and the
// workflow events they wrote for the workflow streams open here (every
// 50 ms each).
func (rt *Runtime) Start(ctx context.Context) error {
	rt.mu.Lock()
	defer rt.mu.Unlock() // Close waits: nothing is started after it began
	switch {
	case rt.closed:
		return ErrClosed
	case rt.started:
		return ErrStarted
	}
	rt.started = true
	ctx, rt.stop = context.WithCancel(context.WithoutCancel(ctx))
	// requests left running by an instance that stopped while a tool ran
	rt.bg.Go(func() { rt.Core.Recover(ctx, rt.recoverEvery) })
	if rt.Bus != nil {
		rt.bg.Go(func() { (&notify.Watchdog{Bus: rt.Bus, Logger: rt.Logger}).Run(ctx) })
	}
	if rt.Workflows != nil {
		rt.bg.Go(func() { rt.Workflows.Run(ctx) })
	}
	if pg, ok := rt.Store.(shared); ok {
		if rt.Bus != nil { // notifications other instances stored for this one's inbox streams
			rt.bg.Go(func() { rt.Bus.Follow(ctx, 50*time.Millisecond) })
		}
		if rt.Workflows != nil { // other instances' workflow events for this one's workflow streams
			rt.bg.Go(func() { rt.Workflows.Watch(ctx, 50*time.Millisecond) })
		}
		if rt.pgEvents == "notify" {
			rt.bg.Go(func() { pg.Listen(ctx, rt.Hub.Notify) })
		} else {
			rt.bg.Go(func() { rt.Hub.Poll(ctx, 50*time.Millisecond, pg.Heads) })
		}
	}
	return nil
}

// Close ends the runtime in the reverse order of Open, and returns once
// everything it started has ended: running workflow layers get up to
// drain to finish (the workflows are released for the next instance), the
// background work stops, the bus's internal turns get up to drain too, the
// event hub drops its streams, then the core closes (MCP servers, the
// store) and the spans are flushed. It is safe to call more than once; a
// Start after it is refused.
func (rt *Runtime) Close(drain time.Duration) error {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil
	}
	rt.closed = true
	stop := rt.stop
	rt.mu.Unlock()
	if rt.Workflows != nil {
		rt.Workflows.Close(drain)
	}
	if stop != nil {
		stop()
	}
	rt.bg.Wait()
	if rt.Bus != nil {
		rt.Bus.Close(drain)
	}
	rt.Hub.Close("the server is shutting down; reconnect and resume from your last event id")
	if rt.OIDC != nil {
		rt.OIDC.Close() // a fetch of the provider's keys in flight
	}
	err := rt.Core.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := rt.shutdown(ctx); serr != nil {
		rt.Logger.Warn("the spans could not all be exported", "err", serr)
	}
	return err
}

// nilIfNone turns a nil provider into a nil interface.
func nilIfNone(tp *sdktrace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return nil
	}
	return tp
}

// shared is a store other instances write to (PostgreSQL): the runtime
// follows their commits by the sessions' chain heads, or by LISTEN/NOTIFY.
type shared interface {
	Heads(ctx context.Context, sessions []string) (map[string]int64, error)
	Listen(ctx context.Context, fn func(session string)) error
}

// StoreOptions configure Options.OpenStore. nil means defaults.
type StoreOptions struct {
	// ReadOnly opens an existing SQLite database for reading only: nothing
	// is created or migrated.
	ReadOnly bool
	// PGNotify makes every PostgreSQL commit NOTIFY other instances.
	PGNotify bool
}

// Extensions are the subsystems' tables every store is opened with.
var Extensions = []store.Extension{notify.Extension, workflow.Extension}

// IsPostgres reports whether db names a PostgreSQL database.
func IsPostgres(db string) bool { return dsn.IsPostgres(db) }

// Shown is how messages name a database: never with a password; "memory"
// for none.
func Shown(db string) string {
	switch {
	case db == "":
		return "memory"
	case IsPostgres(db):
		return dsn.Redact(db)
	}
	return db
}

// dbPassword is the password in a PostgreSQL URL, or "".
func dbPassword(db string) string { return dsn.Password(db) }
