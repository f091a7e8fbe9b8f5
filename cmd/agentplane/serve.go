package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/webui"
	"github.com/agentplane/agentplane/workflow"
)

// serve runs the HTTP API until ctx ends (SIGINT, SIGTERM), then drains:
// event streams get a final event, in-flight requests finish (up to
// --drain-timeout), running workflow layers finish and their workflows
// are released, and the runtime closes.
// margin is the clock margin as core.Options takes it: 0 (none) is < 0 there.
func margin(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func (m *Main) serve(ctx context.Context, args []string) error {
	fs := m.flags("serve", "[--config FILE] [--db DB] [--addr HOST:PORT] [flags]")
	c := m.commonFlags(fs, true)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on, HOST:PORT (a non-loopback one needs API keys in the configuration)")
	drain := fs.Duration("drain-timeout", 30*time.Second, "how long in-flight requests may take to finish at shutdown")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	lease := fs.Duration("workflow-lease", 10*time.Second, "how long a workflow's claim holds unrenewed: another instance (or this one, restarted) takes over the workflows of one that died after this long")
	toolTimeout := fs.Duration("tool-timeout", 30*time.Second, "how long a tool call may run; a request whose instance stopped while its tool ran is recorded as interrupted after twice this and the clock margin")
	clockMargin := fs.Duration("clock-margin", time.Minute, "how far the instances' clocks may differ: added to twice the tool timeout before a request left running by a stopped instance is taken over (0 for one instance)")
	bodyTimeout := fs.Duration("body-timeout", httpapi.DefaultBodyTimeout, "how long a request body may take to arrive, from the request's start: a stalled or dripping body is cut")
	var origins []string
	fs.Func("cors-origin", "an origin (scheme://host[:port]) whose pages may call the API: CORS is answered for it; repeat for more (none by default: only this server's own page)", func(v string) error {
		if err := httpapi.CheckOrigin(v); err != nil {
			return err
		}
		origins = append(origins, v)
		return nil
	})
	maxStreams := fs.Int("max-streams", httpapi.DefaultStreamsPerPrincipal, "how many event streams (SSE and WebSocket) one principal may hold open at once; past it, 429 (0: no cap)")
	maxMCP := fs.Int("max-mcp-sessions", mcpserver.DefaultSessionsPerPrincipal, "how many MCP sessions one principal may hold open at once; past it, 429 (0: no cap)")
	pgEvents := fs.String("pg-events", "poll", "on PostgreSQL, how this instance learns of other instances' commits: poll (one query every 50 ms for all followed sessions; commits pay nothing) or notify (LISTEN/NOTIFY: about 1 ms, but concurrent commits slow down)")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	switch {
	case *lease < 100*time.Millisecond:
		return usagef("--workflow-lease %s: at least 100ms", *lease)
	case *bodyTimeout < 100*time.Millisecond:
		return usagef("--body-timeout %s: at least 100ms", *bodyTimeout)
	case *toolTimeout < 100*time.Millisecond:
		return usagef("--tool-timeout %s: at least 100ms", *toolTimeout)
	case *clockMargin < 0:
		return usagef("--clock-margin %s: not negative", *clockMargin)
	case *pgEvents != "poll" && *pgEvents != "notify":
		return usagef("--pg-events %q: want poll or notify", *pgEvents)
	case *maxStreams < 0 || *maxMCP < 0:
		return usagef("--max-streams %d, --max-mcp-sessions %d: a number of 0 or more (0: no cap)", *maxStreams, *maxMCP)
	}
	if *maxStreams == 0 {
		*maxStreams = -1 // the options' "no cap"
	}
	if *maxMCP == 0 {
		*maxMCP = -1
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewJSONHandler(m.Stderr, &slog.HandlerOptions{Level: level}))
	metrics := httpapi.NewMetrics()
	rt, err := m.open(ctx, c, plane.Options{PGEvents: *pgEvents, LLM: true, Logger: log,
		Core: core.Options{Observer: metrics.Observer(nil), ToolTimeout: *toolTimeout, ClockMargin: margin(*clockMargin)}, Workflows: workflow.Options{Lease: *lease}})
	if err != nil {
		return err
	}
	defer rt.Close(*drain)
	ways := rt.Keys.Len()
	if rt.OIDC != nil {
		ways++
	}
	if err := httpapi.CheckAddr(*addr, ways); err != nil {
		return err
	}
	metrics.WatchMCP(rt.Core.MCPHealth)
	page, err := webui.New()
	if err != nil {
		return err
	}
	mcpSrv := mcpserver.New(rt, &mcpserver.Options{SessionsPerPrincipal: *maxMCP})
	defer mcpSrv.Close() // before the runtime: its followers read the hub and the store
	srv := httpapi.New(rt, &httpapi.Options{Metrics: metrics, MCP: mcpSrv.Handler(), UI: page,
		Origins: origins, BodyTimeout: *bodyTimeout, StreamsPerPrincipal: *maxStreams})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	if err := httpapi.CheckListener(ln.Addr(), ways); err != nil { // what the name resolved to, not the name
		ln.Close()
		return fmt.Errorf("--addr %s: %w", *addr, err)
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	who := "local principal only (no API keys)"
	switch {
	case rt.OIDC != nil && rt.Keys.Len() > 0:
		who = fmt.Sprintf("tokens of %s and %d API key(s)", rt.OIDC.Config().Issuer, rt.Keys.Len())
	case rt.OIDC != nil:
		who = "tokens of " + rt.OIDC.Config().Issuer
	case rt.Keys.Len() > 0:
		who = fmt.Sprintf("%d API key(s)", rt.Keys.Len())
	}
	fmt.Fprintf(m.Stdout, "agentplane: serving http://%s (configuration %s, store %s, %s)\n", ln.Addr(), rt.Core.Name(), rt.DB, who)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	// SIGHUP reloads the configuration (as POST /v1/admin/reload does)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for reloading := true; reloading; {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			reloading = false
		case <-hup:
			m.reload(ctx, rt, log)
		}
	}
	fmt.Fprintln(m.Stdout, "agentplane: shutting down: finishing in-flight requests")
	const reason = "the server is shutting down; reconnect and resume from your last event id"
	srv.Drain(reason)
	mcpSrv.Drain() // the MCP sessions' GET streams end: Shutdown waited for them until its deadline
	sctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: shutdown: %v\n", err)
		hs.Close()
	}
	if err := srv.Wait(sctx, reason); err != nil { // the WebSocket connections, which Shutdown does not see
		fmt.Fprintf(m.Stderr, "agentplane: shutdown: WebSocket connections still open: %v\n", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
	}
	mcpSrv.Close()
	if err := rt.Close(*drain); err != nil {
		return fmt.Errorf("close the store: %w", err)
	}
	fmt.Fprintln(m.Stdout, "agentplane: stopped")
	return nil
}

// reload reloads the runtime's configuration on SIGHUP and says how it
// went, on stdout and in the log.
func (m *Main) reload(ctx context.Context, rt *plane.Runtime, log *slog.Logger) {
	before := rt.Core.Digest()
	digest, err := rt.Reload(ctx)
	if err != nil {
		log.Warn("configuration not reloaded (SIGHUP)", "err", err)
		fmt.Fprintf(m.Stderr, "agentplane: configuration not reloaded, nothing changed:\n%v\n", err)
		return
	}
	log.Info("configuration reloaded (SIGHUP)", "digest", config.ShortDigest(digest), "was", config.ShortDigest(before))
	fmt.Fprintf(m.Stdout, "agentplane: configuration reloaded (%s)\n", config.ShortDigest(digest))
}

// mcp serves one MCP session over stdio as the local principal, bound to
// a new agentplane session, until the client closes stdin or a signal.
// Logs go to stderr; stdout carries only the protocol.
func (m *Main) mcp(ctx context.Context, args []string) error {
	fs := m.flags("mcp", "[--config FILE] [--db DB]")
	c := m.commonFlags(fs, true)
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	rt, err := m.open(ctx, c, plane.Options{})
	if err != nil {
		return err
	}
	defer rt.Close(time.Minute) // releases its workflows for the next process
	if err := rt.Start(ctx); err != nil {
		return err
	}
	srv := mcpserver.New(rt, nil)
	defer srv.Close()
	if err := srv.Run(ctx, auth.Local, &mcpsdk.IOTransport{Reader: io.NopCloser(m.Stdin), Writer: nopWriteCloser{m.Stdout}}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
