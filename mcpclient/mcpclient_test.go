package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/agentplane/agentplane/mcpclient"
	"github.com/agentplane/agentplane/tool"
)

// testServer is a real MCP server, built with the same SDK.
func testServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	type echoOut struct {
		Said string `json:"said"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Said: in.Text}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_file", Description: "Deletes a file."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{}, errors.New("permission denied")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Takes its time."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			select {
			case <-time.After(10 * time.Second):
			case <-ctx.Done():
			}
			return nil, echoOut{}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "huge", Description: "Returns too much."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Said: strings.Repeat("x", mcpclient.MaxResult)}, nil
		})
	return s
}

// TestMain makes the test binary an MCP server over stdio when asked, for
// the stdio transport test.
func TestMain(m *testing.M) {
	if os.Getenv("MCPCLIENT_TEST_SERVER") == "1" {
		testServer().Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	goleak.VerifyTestMain(m) // fails the tests when a goroutine they started is still running after them
}

// endSessions ends a test server's MCP sessions, before its HTTP server
// closes: a session whose client went away without deleting it (a test
// cut the connection) would be served on.
func endSessions(srv *mcp.Server) {
	for ss := range srv.Sessions() {
		ss.Close()
	}
}

// sessions counts a test server's MCP sessions.
func sessions(srv *mcp.Server) int {
	n := 0
	for range srv.Sessions() {
		n++
	}
	return n
}

func byName(t *testing.T, s *mcpclient.Server) map[string]tool.Tool {
	t.Helper()
	out := map[string]tool.Tool{}
	for _, tl := range s.Tools() {
		out[tl.Spec().Name] = tl
	}
	return out
}

func exercise(t *testing.T, s *mcpclient.Server) {
	t.Helper()
	if h := s.Health(); !h.Up || h.ToolCount != 4 {
		t.Fatalf("health: %+v", h)
	}
	tools := byName(t, s)
	reg := tool.NewRegistry()
	for _, tl := range tools {
		if err := reg.Register(tl); err != nil {
			t.Fatalf("register %s: %v", tl.Spec().Name, err)
		}
	}
	echo, del := tools["files_echo"], tools["files_delete_file"]
	if echo == nil || echo.Spec().Impact != tool.ImpactRead || del.Spec().Impact != tool.ImpactExternal {
		t.Fatalf("tools: %v", tools)
	}
	if _, err := reg.Validate("files_echo", json.RawMessage(`{"text": 5}`)); err == nil {
		t.Fatal("the server's input schema was not used")
	}
	ctx := context.Background()
	out, err := echo.Call(ctx, json.RawMessage(`{"text":"hello"}`))
	if err != nil || string(out) != `{"said":"hello"}` {
		t.Fatalf("echo: %s %v", out, err)
	}
	var te *tool.Error
	if _, err := del.Call(ctx, json.RawMessage(`{"text":"x"}`)); !errors.As(err, &te) || te.Code != "tool_error" || !strings.Contains(te.Message, "permission denied") {
		t.Fatalf("delete: %v", err)
	}
	if _, err := tools["files_huge"].Call(ctx, json.RawMessage(`{"text":"x"}`)); !errors.As(err, &te) || te.Code != "too_large" {
		t.Fatalf("huge: %v", err)
	}
}

func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	srv := testServer()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { endSessions(srv) })
	s := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "files", URL: hs.URL}) // the default call timeout: the huge answer has time on a loaded machine
	t.Cleanup(func() { s.Close() })
	exercise(t, s)
	short := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "files", URL: hs.URL, CallTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { short.Close() })
	var te *tool.Error
	if _, err := byName(t, short)["files_slow"].Call(context.Background(), json.RawMessage(`{"text":"x"}`)); !errors.As(err, &te) || te.Code != "timeout" {
		t.Fatalf("slow: %v", err)
	}
}

func TestStdio(t *testing.T) {
	t.Setenv("MCPCLIENT_TEST_SERVER", "1") // the child inherits it and serves
	s := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "files", Command: []string{os.Args[0]}})
	t.Cleanup(func() { s.Close() })
	exercise(t, s)
}

// TestDownServerNeverBlocksAndReconnects: a server that is down at mount
// is reported down within the connect timeout; one that goes away fails
// calls clearly and is reconnected on a later call.
func TestDownServerNeverBlocksAndReconnects(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "gone", URL: "http://127.0.0.1:1/mcp", ConnectTimeout: 500 * time.Millisecond})
	if h := s.Health(); h.Up || h.Error == "" || len(s.Tools()) != 0 || time.Since(start) > 3*time.Second {
		t.Fatalf("down at mount: %+v after %s", h, time.Since(start))
	}

	srv := testServer()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var down atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { endSessions(srv) })
	s = mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "files", URL: hs.URL, ConnectTimeout: time.Second, Backoff: 10 * time.Millisecond})
	t.Cleanup(func() { s.Close() })
	echo := byName(t, s)["files_echo"]
	if echo.Spec().Server != "files" {
		t.Fatalf("a mounted tool does not name its server: %+v", echo.Spec())
	}
	down.Store(true)
	if _, err := echo.Call(context.Background(), json.RawMessage(`{"text":"a"}`)); err == nil {
		t.Fatal("a call to a down server succeeded")
	}
	// the connection is gone and the server refuses to reconnect: unavailable
	if _, err := echo.Call(context.Background(), json.RawMessage(`{"text":"a"}`)); !errors.Is(err, tool.ErrUnavailable) {
		t.Fatalf("a call while the server is down: %v, want tool.ErrUnavailable", err)
	}
	if h := s.Health(); h.Up {
		t.Fatalf("health after a failed call: %+v", h)
	}
	down.Store(false)
	time.Sleep(50 * time.Millisecond) // the backoff after the failed reconnect
	out, err := echo.Call(context.Background(), json.RawMessage(`{"text":"back"}`))
	if err != nil || string(out) != `{"said":"back"}` || !s.Health().Up {
		t.Fatalf("after the server came back: %s %v %+v", out, err, s.Health())
	}
}

// TestRetryMountsAServerThatCameUpLate mounts a server that answers 503
// Service Unavailable, then lets it serve: Retry reconnects and hands over
// its tools.
func TestRetryMountsAServerThatCameUpLate(t *testing.T) {
	var up atomic.Bool
	srv := testServer()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer hs.Close()
	defer endSessions(srv)
	s := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "late", URL: hs.URL, ConnectTimeout: time.Second})
	defer s.Close() // before the server: its open stream would keep hs.Close waiting
	if s.Health().Up || len(s.Tools()) != 0 {
		t.Fatalf("the server is not serving yet, but health is %+v", s.Health())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []tool.Tool, 1)
	go s.Retry(ctx, 50*time.Millisecond, func(tools []tool.Tool) { got <- tools })

	time.Sleep(150 * time.Millisecond) // a few failed attempts first
	up.Store(true)
	select {
	case tools := <-got:
		names := map[string]bool{}
		for _, tl := range tools {
			names[tl.Spec().Name] = true
		}
		if len(tools) != 4 || !names["late_echo"] || !s.Health().Up {
			t.Fatalf("mounted %v, health %+v", names, s.Health())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the server came up but Retry did not mount it: %+v", s.Health())
	}
}

// TestRetryStopsWithItsContext returns when the context ends while the
// server is still down.
func TestRetryStopsWithItsContext(t *testing.T) {
	s := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "gone", URL: "http://127.0.0.1:1/mcp", ConnectTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() {
		s.Retry(ctx, 50*time.Millisecond, func([]tool.Tool) { t.Error("a server that is gone came up") })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Retry did not return when its context ended")
	}
}

// TestReconnectHoldsNoLock: while a reconnect waits on a server that does
// not answer, the server's health and tools are still readable (they once
// waited for the whole connect timeout behind the server's lock).
func TestReconnectHoldsNoLock(t *testing.T) {
	t.Parallel()
	srv := testServer()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mode atomic.Int32 // 0 serve, 1 hang, 2 refuse
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mode.Load() == 2 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if mode.Load() == 1 {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer hs.Close()
	defer endSessions(srv)
	defer close(release)
	s := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "files", URL: hs.URL, ConnectTimeout: time.Minute, Backoff: time.Millisecond})
	defer s.Close()
	echo := byName(t, s)["files_echo"]
	mode.Store(2)
	if _, err := echo.Call(context.Background(), json.RawMessage(`{"text":"a"}`)); err == nil { // drops the connection
		t.Fatal("a call to a refusing server succeeded")
	}
	mode.Store(1)
	go echo.Call(context.Background(), json.RawMessage(`{"text":"a"}`)) // reconnects, and hangs in the server
	<-entered
	done := make(chan struct{})
	go func() {
		s.Health()
		s.Tools()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a liveness bound, far above any scheduling delay
		t.Fatal("Health and Tools waited for a call or reconnect in progress")
	}
}

// Close while a reconnect is in flight ends it: the connection it had
// opened is closed (the server holds no session of it), not installed
// after Close, and nothing connects again — with Close's ending removed,
// the reconnect finishes after Close and its session stays open.
func TestCloseDuringConnectKeepsNoSession(t *testing.T) {
	t.Parallel()
	srv := testServer()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mode, posts atomic.Int32 // mode 0 serve, 1 refuse, 2 hold tools/list until released
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 1:
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		case 2:
			if r.Method == http.MethodPost {
				posts.Add(1)
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if bytes.Contains(body, []byte(`"tools/list"`)) { // after initialize: the server holds a session
					select {
					case entered <- struct{}{}:
					default:
					}
					<-release
				}
			}
		}
		handler.ServeHTTP(w, r)
	}))
	defer hs.Close()
	defer endSessions(srv)
	s := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "files", URL: hs.URL, ConnectTimeout: time.Minute, Backoff: time.Millisecond})
	echo := byName(t, s)["files_echo"]
	mode.Store(1)
	if _, err := echo.Call(context.Background(), json.RawMessage(`{"text":"a"}`)); err == nil { // drops the connection
		t.Fatal("a call to a refusing server succeeded")
	}
	held := sessions(srv) // the first connection's: its end was refused
	mode.Store(2)
	called := make(chan error, 1)
	go func() {
		_, err := echo.Call(context.Background(), json.RawMessage(`{"text":"a"}`)) // reconnects, held at tools/list
		called <- err
	}()
	<-entered
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	close(release) // the server answers tools/list: a reconnect Close did not end would now succeed
	err := <-called
	if !errors.Is(err, tool.ErrUnavailable) {
		t.Fatalf("the call during Close: %v, want tool.ErrUnavailable", err)
	}
	if n := sessions(srv); n != held {
		t.Fatalf("the server holds %d sessions, %d before the reconnect that Close ended", n, held)
	}
	if h := s.Health(); h.Up || h.Error != "closed" {
		t.Fatalf("health after Close: %+v, want down, closed", h)
	}
	before := posts.Load()
	if _, err := echo.Call(context.Background(), json.RawMessage(`{"text":"b"}`)); !errors.Is(err, tool.ErrUnavailable) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a call after Close: %v", err)
	}
	if n := posts.Load() - before; n != 0 {
		t.Fatalf("a call after Close sent %d requests to the server", n)
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}

// A call of a mounted tool inside a trace sends the trace context in the
// request's _meta (traceparent), from its tools/call client span.
func TestTraceContextInMeta(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	type in struct {
		Text string `json:"text"`
	}
	type out struct {
		Said string `json:"said"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "traced", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo."},
		func(ctx context.Context, req *mcp.CallToolRequest, i in) (*mcp.CallToolResult, out, error) {
			tp, _ := req.Params.Meta["traceparent"].(string)
			got <- tp
			return nil, out{Said: i.Text}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { endSessions(s) })
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	srv := mcpclient.Mount(context.Background(), mcpclient.Spec{Name: "traced", URL: hs.URL, Tracer: tp.Tracer("test")})
	t.Cleanup(func() { srv.Close() })
	ctx, parent := tp.Tracer("test").Start(context.Background(), "turn")
	if _, err := byName(t, srv)["traced_echo"].Call(ctx, json.RawMessage(`{"text":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var call tracetest.SpanStub
	for _, sp := range spans.GetSpans() {
		if sp.Name == "tools/call echo" {
			call = sp
		}
	}
	want := "00-" + parent.SpanContext().TraceID().String() + "-" + call.SpanContext.SpanID().String() + "-01"
	if tp := <-got; tp != want || call.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("_meta.traceparent %q, want %q", tp, want)
	}
}
