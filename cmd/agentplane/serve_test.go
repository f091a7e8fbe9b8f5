package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
)

// TestServeShutdownLosesNoAcknowledgedTurn stops serve with SIGTERM while
// clients send turns: every turn answered 200 is in the store afterwards,
// an open event stream gets a final "closed" event, and the process exits
// cleanly with the database intact.
func TestServeShutdownLosesNoAcknowledgedTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := servetest.Binary(t)
	db := filepath.Join(t.TempDir(), "serve.db")
	url, cmd, out := servetest.Serve(t, bin, "--db", db)
	resp, body, err := servetest.PostJSON(url+"/v1/sessions", map[string]string{"mode": "sales"})
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("%v %s", err, body)
	}
	var created struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal(body, &created)
	id := created.SessionID

	stream, err := http.Get(url + "/v1/sessions/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close() // the reader below stops at the closing frame, not at the end of the body
	closed := make(chan string, 1)
	var streamed []int64 // ids the stream delivered
	go func() {
		sc := bufio.NewScanner(stream.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "event: ") {
				kind = line[7:]
			}
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				streamed = append(streamed, n)
			}
			if kind == "closed" && strings.HasPrefix(line, "data: ") {
				closed <- line[6:]
				return
			}
		}
		close(closed)
	}()

	var mu sync.Mutex
	acked := map[int64]string{} // seq -> text
	var wg sync.WaitGroup
	texts := []string{"open the q1 cfo outreach template", "hello", "switch to general mode", "switch to sales mode"}
	stop := make(chan struct{})
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				text := texts[(c+i)%len(texts)]
				resp, body, err := servetest.PostJSON(url+"/v1/sessions/"+id+"/turns", map[string]string{"text": text})
				if err != nil {
					return // the server is gone
				}
				if resp.StatusCode != 200 {
					continue // a version conflict, or draining
				}
				var a struct{ Seq int64 }
				json.Unmarshal(body, &a)
				mu.Lock()
				acked[a.Seq] = text
				mu.Unlock()
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var lines []string
	for out.Scan() {
		lines = append(lines, out.Text())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v; printed %q", err, lines)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	close(stop)
	wg.Wait()
	if len(lines) == 0 || lines[len(lines)-1] != "agentplane: stopped" {
		t.Fatalf("printed %q", lines)
	}
	select {
	case c, ok := <-closed:
		if !ok || !strings.Contains(c, "shutting down") {
			t.Fatalf("the stream ended without a closing event: %q", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no closing event")
	}
	// the stream followed the turns live, in order, with no gap
	if len(streamed) < 10 {
		t.Fatalf("the stream delivered %d events while turns were taken", len(streamed))
	}
	for i, id := range streamed {
		if id != int64(i+1) {
			t.Fatalf("event %d has id %d", i, id)
		}
	}

	recs := servetest.StoredChain(t, db, id)
	bySeq := map[int64]audit.Record{}
	for _, r := range recs {
		bySeq[r.Seq] = r
	}
	if len(acked) == 0 {
		t.Fatal("no turn was acknowledged")
	}
	for seq, text := range acked {
		r, ok := bySeq[seq]
		if !ok || r.Kind != audit.KindTurn || r.Input == nil || r.Input.Text != text {
			t.Fatalf("acknowledged turn %d (%q) is not stored as such: %+v", seq, text, r)
		}
	}
	t.Logf("%d turns acknowledged, all stored (%d records)", len(acked), len(recs))
}

// Serving a non-loopback address without API keys is refused at start.
func TestServeRefusesAnOpenAddressWithoutKeys(t *testing.T) {
	_, stderr, code := run(t, "", "serve", "--addr", "0.0.0.0:0", "--db", filepath.Join(t.TempDir(), "x.db"))
	if code != 1 || !strings.Contains(stderr, "not a loopback address and the configuration has no API keys") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// A key given by an environment variable that is not set stops the start.
func TestServeNeedsItsKeys(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("version: 1\nmodes: [{key: a, default: true}]\nauth:\n  keys: [{user_id: alice, key_env: AP_TEST_KEY_UNSET}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, "", "serve", "--config", cfg, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "x.db"))
	if code != 1 || !strings.Contains(stderr, "environment variable AP_TEST_KEY_UNSET is not set") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// agentplane mcp speaks MCP over stdio: the go-sdk client lists the
// active tools and calls one through the gate, and runs a workflow
// through the meta-tools.
func TestMCPOverStdio(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	m := &Main{Stdin: inR, Stdout: outW, Stderr: io.Discard, Getenv: func(k string) string {
		if k == "AGENTPLANE_DB" {
			return filepath.Join(t.TempDir(), "mcp.db")
		}
		return ""
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{"mcp"}); outW.Close() }()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcpsdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("%v %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "agent_get_context", Arguments: json.RawMessage(`{}`)})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, `"mode":"general"`) {
		t.Fatalf("%+v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "workflow_execute",
		Arguments: json.RawMessage(`{"tasks": [{"id": "a", "tool": "catalog_search", "args": {"catalog_id": "modes", "query": "sales"}}]}`)})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, `"status":"completed"`) {
		t.Fatalf("workflow_execute: %+v %v", res, err)
	}
	cs.Close()
	inW.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agentplane mcp did not end with its input")
	}
}
