package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/webui"
	"github.com/agentplane/agentplane/workflow"
)

// serve runs the HTTP API until ctx ends (SIGINT, SIGTERM), then drains:
// event streams get a final event, in-flight requests finish (up to
// --drain-timeout), and the store closes.
func (m *Main) serve(ctx context.Context, args []string) int {
	fs := m.flags("serve")
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	db := m.dbFlag(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on, HOST:PORT (a non-loopback one needs API keys in the configuration)")
	drain := fs.Duration("drain-timeout", 30*time.Second, "how long in-flight requests may take to finish at shutdown")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	lease := fs.Duration("workflow-lease", 10*time.Second, "how long a workflow's claim holds unrenewed: another instance (or this one, restarted) takes over the workflows of one that died after this long")
	bodyTimeout := fs.Duration("body-timeout", httpapi.DefaultBodyTimeout, "how long a request body may take to arrive, from the request's start: a stalled or dripping body is cut")
	var origins []string
	fs.Func("cors-origin", "an origin (scheme://host[:port]) whose pages may call the API: CORS is answered for it; repeat for more (default: none, only this server's own page)", func(v string) error {
		if err := httpapi.CheckOrigin(v); err != nil {
			return err
		}
		origins = append(origins, v)
		return nil
	})
	pgEvents := fs.String("pg-events", "poll", "on PostgreSQL, how this instance learns of other instances' commits: poll (one query every 50 ms for all followed sessions; commits pay nothing) or notify (LISTEN/NOTIFY: about 1 ms, but concurrent commits slow down)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *bodyTimeout < 100*time.Millisecond {
		fmt.Fprintf(m.Stderr, "agentplane: --body-timeout %s: at least 100ms\n", *bodyTimeout)
		return 2
	}
	if *lease < 100*time.Millisecond {
		fmt.Fprintf(m.Stderr, "agentplane: --workflow-lease %s: at least 100ms\n", *lease)
		return 2
	}
	if *pgEvents != "poll" && *pgEvents != "notify" {
		fmt.Fprintf(m.Stderr, "agentplane: --pg-events %q: want poll or notify\n", *pgEvents)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: --log-level %q: want debug, info, warn or error\n", *logLevel)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(m.Stderr, &slog.HandlerOptions{Level: level}))

	var st store.Store
	if isPostgres(*db) {
		pg, err := postgres.Open(ctx, *db, &postgres.Options{Notify: *pgEvents == "notify", Extensions: extensions})
		if err != nil {
			fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
			return 1
		}
		st = pg
	} else {
		var ok bool
		if st, ok = m.openStore(ctx, *db, false); !ok {
			return 1
		}
	}
	hub := events.NewHub(st.Records, &events.Options{Logger: log})
	if pg, isPG := st.(*postgres.Store); isPG { // other instances write to the same sessions
		follow, stop := context.WithCancel(context.WithoutCancel(ctx))
		defer stop()
		if *pgEvents == "notify" {
			go pg.Listen(follow, hub.Notify)
		} else {
			go hub.Poll(follow, 50*time.Millisecond, pg.Heads)
		}
	}
	metrics := httpapi.NewMetrics()
	opts := m.options(*path, st)
	opts.Logger = log
	opts.Observer = metrics.Observer(hub.Committed)
	var mcpSrv atomic.Pointer[mcpserver.Server] // set once the core is built
	var busRef atomic.Pointer[notify.Bus]       // likewise: agent_notify_user emits through it
	opts.Notifier = notify.Notifier(busRef.Load)
	opts.Observer.ToolsChanged = func() {
		if s := mcpSrv.Load(); s != nil {
			s.ToolsChanged()
		}
	}
	m.Logger = log
	// the core outlives ctx: it closes after the drain
	c, ok := m.loadWith(context.WithoutCancel(ctx), *path, opts)
	if !ok {
		return 1
	}
	defer c.Close()
	metrics.WatchMCP(c.MCPServers())
	keys, err := auth.New(c.Config().Auth, m.Getenv)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %s: %v\n", c.Name(), err)
		return 1
	}
	if err := httpapi.CheckAddr(*addr, keys.Len()); err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	ledger, err := notify.NewLedger(st, nil)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	bus := notify.NewBus(ledger, c, hub)
	busRef.Store(bus)
	agent, ok := m.agent(ctx, c)
	if !ok {
		return 1
	}
	if agent != nil {
		agent.Awareness, agent.Acknowledged = bus.Awareness, bus.AgentAck
		bus.InternalTurn = func(ctx context.Context, n notify.Notification) {
			if err := bus.Internal(ctx, agent, n); err != nil {
				log.Warn("internal turn", "notification", n.ID, "err", err)
			}
		}
	} else {
		bus.AgentDown = func() bool { return true } // no LLM: the agent's notifications go to the user at once
	}
	watch, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	go (&notify.Watchdog{Bus: bus, Logger: log}).Run(watch)
	flows, err := workflow.New(c, &workflow.Options{Logger: log, Lease: *lease, Poll: min(time.Second, *lease/2)})
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	go flows.Run(watch) // takes over the workflows nobody holds (after a crash, another instance's)
	mcpSrv.Store(mcpserver.New(c, &mcpserver.Options{Logger: log, Workflows: flows}))
	page, err := webui.New()
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	srv := httpapi.New(c, &httpapi.Options{Keys: keys, Hub: hub, Metrics: metrics, Logger: log, MCP: mcpSrv.Load().Handler(), Agent: agent, Bus: bus,
		Workflows: flows, UI: page, Origins: origins, BodyTimeout: *bodyTimeout})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: listen on %s: %v\n", *addr, err)
		return 1
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	who := "local principal only (no API keys)"
	if keys.Len() > 0 {
		who = fmt.Sprintf("%d API key(s)", keys.Len())
	}
	fmt.Fprintf(m.Stdout, "agentplane: serving http://%s (configuration %s, store %s, %s)\n", ln.Addr(), c.Name(), shownDB(*db), who)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	fmt.Fprintln(m.Stdout, "agentplane: shutting down: finishing in-flight requests")
	srv.Drain("the server is shutting down; reconnect and resume from your last event id")
	sctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: shutdown: %v\n", err)
		hs.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
	}
	flows.Close(*drain) // running layers finish; the workflows are released for the next instance
	stopWatch()
	if err := c.Close(); err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: close the store: %v\n", err)
		return 1
	}
	fmt.Fprintln(m.Stdout, "agentplane: stopped")
	return 0
}

// mcp serves one MCP session over stdio as the local principal, bound to
// a new agentplane session, until the client closes stdin or a signal.
// Logs go to stderr; stdout carries only the protocol.
func (m *Main) mcp(ctx context.Context, args []string) int {
	fs := m.flags("mcp")
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	db := m.dbFlag(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	st, ok := m.openStore(ctx, *db, false)
	if !ok {
		return 1
	}
	var srv atomic.Pointer[mcpserver.Server]
	opts := m.options(*path, st)
	opts.Observer = &core.Observer{ToolsChanged: func() {
		if s := srv.Load(); s != nil {
			s.ToolsChanged()
		}
	}}
	c, ok := m.loadWith(context.WithoutCancel(ctx), *path, opts)
	if !ok {
		return 1
	}
	defer c.Close()
	flows, err := workflow.New(c, &workflow.Options{Logger: m.Logger})
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	defer flows.Close(time.Minute) // releases its workflows for the next process
	go flows.Run(ctx)
	srv.Store(mcpserver.New(c, &mcpserver.Options{Logger: m.Logger, Workflows: flows}))
	if err := srv.Load().Run(ctx, auth.Local, &mcpsdk.IOTransport{Reader: io.NopCloser(m.Stdin), Writer: nopWriteCloser{m.Stdout}}); err != nil && ctx.Err() == nil {
		fmt.Fprintf(m.Stderr, "agentplane: mcp: %v\n", err)
		return 1
	}
	return 0
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
