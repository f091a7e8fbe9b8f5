package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
)

// The hostile-client suite: each case runs against real serve processes
// (the binary, built with the race detector when the tests run with it)
// and a service that records what the send tool sends, as an impatient or
// hostile client would try them: the same confirmation from many clients
// at once, bodies the audit reader would refuse, requests from other web
// pages, another principal's MCP session, stalled and dripping bodies.

// The keys of the suite's two principals.
const (
	aliceKey = "alice-key-0123456789abcdef"
	bobKey   = "bob-key-0123456789abcdef"
)

// hostileConfig writes the demo configuration with the send tool as an
// HTTP tool to the outbox rec, and, when keyed, API keys for alice and bob (from the
// environment: ALICE_KEY, BOB_KEY).
func hostileConfig(t *testing.T, rec *servetest.Outbox, keyed bool) string {
	t.Helper()
	y := servetest.SendOverHTTP(t, string(demo.YAML), rec.URL)
	if keyed {
		y += "\nauth:\n  keys:\n    - {user_id: alice, key_env: ALICE_KEY}\n    - {user_id: bob, key_env: BOB_KEY}\n"
	}
	p := filepath.Join(t.TempDir(), "agentplane.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// serveHostile starts serve with the configuration and arguments and
// waits until it answers.
func serveHostile(t *testing.T, bin, cfg string, args ...string) servetest.Instance {
	t.Helper()
	return servetest.ServeEnv(t, bin, cfg, []string{"ALICE_KEY=" + aliceKey, "BOB_KEY=" + bobKey}, args...)
}

// askToSend opens a session, opens a template and asks to send it: the
// answer holds the confirmation's intent (with its token).
func askToSend(t *testing.T, url, key string) (session string, confirm json.RawMessage) {
	t.Helper()
	st, raw := servetest.Call(t, "POST", url+"/v1/sessions", key, `{"mode":"sales"}`)
	var created struct {
		SessionID string `json:"session_id"`
	}
	if st != 201 || json.Unmarshal(raw, &created) != nil {
		t.Fatalf("create session: %d %s", st, raw)
	}
	turns := url + "/v1/sessions/" + created.SessionID + "/turns"
	if st, raw := servetest.Call(t, "POST", turns, key, `{"text":"open the Q1 CFO Outreach template"}`); st != 200 {
		t.Fatalf("open the template: %d %s", st, raw)
	}
	st, raw = servetest.Call(t, "POST", turns, key, `{"text":"send this to the Q1 pilot list"}`)
	var asked struct {
		ConfirmIntent json.RawMessage `json:"confirm_intent"`
	}
	if st != 200 || json.Unmarshal(raw, &asked) != nil || len(asked.ConfirmIntent) == 0 {
		t.Fatalf("ask to send: %d %s", st, raw)
	}
	return created.SessionID, asked.ConfirmIntent
}

// auditOf reads a session's audit chain through the API and verifies it.
func auditOf(t *testing.T, url, key, session string) []audit.Record {
	t.Helper()
	st, raw := servetest.Call(t, "GET", url+"/v1/sessions/"+session+"/audit", key, "")
	if st != 200 {
		t.Fatalf("audit: %d %s", st, raw)
	}
	var recs []audit.Record
	if err := audit.ReadJSONL(bytes.NewReader(raw), func(_ int, r *audit.Record) error {
		recs = append(recs, *r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatalf("the chain does not verify: %v", err)
	}
	return recs
}

// TestOneConfirmationRunsOnceOverHTTP: n clients answer one confirmation
// at the same moment — "yes" turns, the page's confirm intent under keys
// of their own, the intent with no key — on SQLite, on PostgreSQL and on
// two serve processes sharing one PostgreSQL: the recording service gets
// exactly one send, the audit records exactly that run, and no run is
// recorded as a version conflict. (One confirmation sent up to 8 times and
// the audit recorded one.)
func TestOneConfirmationRunsOnceOverHTTP(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time
	bin := servetest.RaceBinary(t)
	rec := servetest.NewOutbox(t, 50*time.Millisecond)
	cfg := hostileConfig(t, rec, false)
	setups := map[string]func(t *testing.T) []string{
		"sqlite": func(t *testing.T) []string {
			return []string{serveHostile(t, bin, cfg, "--db", filepath.Join(t.TempDir(), "a.db")).URL}
		},
		"postgres": func(t *testing.T) []string {
			return []string{serveHostile(t, bin, cfg, "--db", pgtest.Schema(t)).URL}
		},
		"two-instances-postgres": func(t *testing.T) []string {
			db := pgtest.Schema(t)
			return []string{serveHostile(t, bin, cfg, "--db", db).URL, serveHostile(t, bin, cfg, "--db", db).URL}
		},
	}
	for _, name := range []string{"sqlite", "postgres", "two-instances-postgres"} {
		t.Run(name, func(t *testing.T) {
			urls := setups[name](t)
			for _, n := range []int{2, 8, 32} {
				t.Run(fmt.Sprint(n), func(t *testing.T) {
					session, confirm := askToSend(t, urls[0], "")
					before := rec.Count()
					start := make(chan struct{})
					var wg sync.WaitGroup
					for i := range n {
						wg.Go(func() {
							url := urls[i%len(urls)] + "/v1/sessions/" + session
							<-start
							var st int
							var raw []byte
							switch i % 3 {
							case 0:
								st, raw = servetest.Call(t, "POST", url+"/turns", "", `{"text":"yes"}`)
							case 1:
								st, raw = servetest.Call(t, "POST", url+"/intents", "", string(confirm), "Idempotency-Key", fmt.Sprintf("click-%d", i))
							default:
								st, raw = servetest.Call(t, "POST", url+"/intents", "", string(confirm))
							}
							if st >= 500 {
								t.Errorf("answer %d: %d %s", i, st, raw)
							}
						})
					}
					close(start)
					wg.Wait()
					if got := rec.Count() - before; got != 1 {
						t.Fatalf("%d clients confirmed once: the service got %d sends", n, got)
					}
					ran, refused := 0, 0
					for _, r := range auditOf(t, urls[0], "", session) {
						switch {
						case r.Result == nil:
						case r.Result.Tool == "send_template" && r.Result.Status == "success":
							ran++
						case r.Result.Error != nil && r.Result.Error.Code == "version_conflict":
							t.Errorf("record %d: a version conflict: %s", r.Seq, r.Result.Message)
						case r.Result.Error != nil && r.Result.Error.Code == "confirmation_invalid":
							refused++
						}
					}
					if ran != 1 {
						t.Fatalf("the audit records %d sends; the service got 1", ran)
					}
					t.Logf("%d clients: 1 send, %d refusals recorded", n, refused)
				})
			}
		})
	}
}

// TestOneApprovalRunsOnceOverHTTP: a workflow's approval before its send
// answered by 8 clients at once, on two instances sharing one PostgreSQL:
// the service gets one send; one answer is applied, the others refused.
func TestOneApprovalRunsOnceOverHTTP(t *testing.T) {
	bin := servetest.RaceBinary(t)
	rec := servetest.NewOutbox(t, 50*time.Millisecond)
	cfg := hostileConfig(t, rec, false)
	db := pgtest.Schema(t)
	urls := []string{serveHostile(t, bin, cfg, "--db", db).URL, serveHostile(t, bin, cfg, "--db", db).URL}
	session, _ := askToSend(t, urls[0], "")
	st, raw := servetest.Call(t, "POST", urls[0]+"/v1/workflows", "", `{"session_id":"`+session+`","wait":true,"tasks":[{"id":"send","tool":"send_template","args":{"list_id":"LIST-9"}}]}`)
	var started struct {
		WorkflowID string `json:"workflow_id"`
		Workflow   struct {
			Status   string `json:"status"`
			Approval struct {
				CheckpointID string `json:"checkpoint_id"`
			} `json:"approval"`
		} `json:"workflow"`
	}
	if st != 201 || json.Unmarshal(raw, &started) != nil || started.Workflow.Approval.CheckpointID == "" {
		t.Fatalf("start: %d %s", st, raw)
	}
	approve := `{"type":"approval_response","checkpoint_id":"` + started.Workflow.Approval.CheckpointID + `","approved":true}`
	before := rec.Count()
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := 0
	for i := range 8 {
		wg.Go(func() {
			<-start
			st, raw := servetest.Call(t, "POST", urls[i%2]+"/v1/workflows/"+started.WorkflowID+"/commands?wait=true", "", approve)
			switch {
			case st == 200:
				mu.Lock()
				applied++
				mu.Unlock()
			case st == 409:
			default:
				t.Errorf("approval %d: %d %s", i, st, raw)
			}
		})
	}
	close(start)
	wg.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, raw := servetest.Call(t, "GET", urls[0]+"/v1/workflows/"+started.WorkflowID, "", "")
		if st == 200 && bytes.Contains(raw, []byte(`"status":"completed"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workflow did not complete: %d %s", st, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := rec.Count() - before; got != 1 || applied != 1 {
		t.Fatalf("8 approvals at once: %d sends, %d applied", got, applied)
	}
}

// TestHostileClients runs the rest of the suite against one keyless and
// one keyed serve.
func TestHostileClients(t *testing.T) {
	bin := servetest.RaceBinary(t)
	rec := servetest.NewOutbox(t, 50*time.Millisecond)
	local := serveHostile(t, bin, hostileConfig(t, rec, false), "--db", filepath.Join(t.TempDir(), "local.db"), "--body-timeout", "1s")
	keyed := serveHostile(t, bin, hostileConfig(t, rec, true), "--db", filepath.Join(t.TempDir(), "keyed.db"), "--body-timeout", "1s",
		"--cors-origin", "https://app.example.com")

	t.Run("NothingStoredThatCannotBeReadBack", func(t *testing.T) {
		session, _ := askToSend(t, local.URL, "")
		before := len(auditOf(t, local.URL, "", session))
		for name, c := range map[string]struct{ path, body, want string }{
			"CaseVariantPayload": {"/v1/notifications", `{"address":"SESSION","session_id":"` + session + `","target":"USER","handler":"SYSTEM","title":"t","payload":{"a":1,"A":2}}`, `(payload): member names "A" and "a" differ only in letter case`},
			"HugeNumber":         {"/v1/notifications", `{"address":"SESSION","session_id":"` + session + `","target":"USER","handler":"SYSTEM","title":"t","payload":{"n":1e999}}`, "(payload.n): number 1e999 is out of range"},
			"DeepPayload":        {"/v1/notifications", `{"address":"SESSION","session_id":"` + session + `","target":"USER","handler":"SYSTEM","title":"t","payload":` + strings.Repeat("[", 129) + strings.Repeat("]", 129) + `}`, "nested deeper than 128"},
			"DuplicatePayload":   {"/v1/notifications", `{"address":"SESSION","session_id":"` + session + `","target":"USER","handler":"SYSTEM","title":"t","payload":{"a":1,"a":2}}`, `duplicate member name "a"`},
			"LoneSurrogate":      {"/v1/notifications", `{"address":"SESSION","session_id":"` + session + `","target":"USER","handler":"SYSTEM","title":"\udc00","payload":{}}`, "(title): lone surrogate"},
			"DuplicateText":      {"/v1/sessions/" + session + "/turns", `{"text":"hello","text":"switch to ddr mode"}`, `duplicate member name "text"`},
			"CaseVariantArgs":    {"/v1/sessions/" + session + "/intents", `{"type":"action_call","action":"send_template","args":{"list_id":"LIST-9","List_id":"LIST-10"}}`, "differ only in letter case"},
			"WorkflowArgs":       {"/v1/workflows", `{"session_id":"` + session + `","tasks":[{"id":"a","tool":"catalog_search","args":{"query":"x","Query":"y"}}]}`, "differ only in letter case"},
		} {
			st, raw := servetest.Call(t, "POST", local.URL+c.path, "", c.body)
			if code, msg := apiError(raw); st != 400 || code != "invalid_input" || !strings.Contains(msg, c.want) {
				t.Errorf("%s: %d %s, want 400 saying %q", name, st, raw, c.want)
			}
		}
		if after := len(auditOf(t, local.URL, "", session)); after != before {
			t.Fatalf("refused requests added %d records", after-before)
		}
	})

	t.Run("ForeignHostWithoutKeys", func(t *testing.T) {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/", ""}, {"GET", "/healthz", ""}, {"GET", "/v1/sessions", ""}, {"POST", "/v1/sessions", `{}`},
			{"GET", "/v1/sessions/x/ws", ""}, {"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`},
		} {
			st, raw := servetest.Call(t, c.method, local.URL+c.path, "", c.body, "Host", "evil.example:8080", "Connection", "Upgrade", "Upgrade", "websocket",
				"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Accept", "application/json, text/event-stream")
			if st != http.StatusMisdirectedRequest || !strings.Contains(string(raw), "not a loopback name") {
				t.Errorf("%s %s with Host evil.example: %d %s", c.method, c.path, st, raw)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, resp, err := websocket.Dial(ctx, strings.Replace(local.URL, "http://", "ws://", 1)+"/v1/sessions/x/ws",
			&websocket.DialOptions{Host: "evil.example"}); err == nil || resp == nil || resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("a WebSocket with Host evil.example: %v %v", err, resp)
		}
		for _, host := range []string{"localhost", "127.0.0.1", "[::1]:1"} {
			if st, raw := servetest.Call(t, "GET", local.URL+"/v1/sessions", "", "", "Host", host); st != 200 {
				t.Errorf("Host %s: %d %s", host, st, raw)
			}
		}
		// with keys, the server may have any name: the key is the guard
		if st, raw := servetest.Call(t, "GET", keyed.URL+"/v1/sessions", aliceKey, "", "Host", "agentplane.example.com"); st != 200 {
			t.Errorf("keyed, Host agentplane.example.com: %d %s", st, raw)
		}
	})

	t.Run("OtherWebPages", func(t *testing.T) {
		for _, srv := range []struct {
			name, url, key string
		}{{"local", local.URL, ""}, {"keyed", keyed.URL, aliceKey}} {
			for name, h := range map[string][]string{
				"NoContentType":    {"Content-Type", ""},
				"TextPlain":        {"Content-Type", "text/plain"},
				"FormPost":         {"Content-Type", "application/x-www-form-urlencoded"},
				"CrossSiteOrigin":  {"Origin", "https://evil.example"},
				"SecFetchCross":    {"Sec-Fetch-Site", "cross-site"},
				"SecFetchSameSite": {"Sec-Fetch-Site", "same-site"},
			} {
				st, raw := servetest.Call(t, "POST", srv.url+"/v1/sessions", srv.key, `{}`, h...)
				if st != 415 && st != 403 {
					t.Errorf("%s %s: %d %s", srv.name, name, st, raw)
				}
			}
			if st, raw := servetest.Call(t, "POST", srv.url+"/v1/sessions", srv.key, `{}`, "Origin", srv.url, "Sec-Fetch-Site", "same-origin"); st != 201 {
				t.Errorf("%s: the server's own page: %d %s", srv.name, st, raw)
			}
		}
		// an allowed origin gets CORS, and its state changes pass
		st, _ := servetest.Call(t, "OPTIONS", keyed.URL+"/v1/sessions", "", "", "Origin", "https://app.example.com", "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "authorization, content-type")
		if st != 204 {
			t.Errorf("preflight from the allowed origin: %d", st)
		}
		req, _ := http.NewRequest("POST", keyed.URL+"/v1/sessions", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		req.Header.Set("Origin", "https://app.example.com")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 201 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
			t.Errorf("POST from the allowed origin: %v %v", err, resp)
		}
		if resp != nil {
			resp.Body.Close()
		}
		req, _ = http.NewRequest("OPTIONS", keyed.URL+"/v1/sessions", nil)
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err = http.DefaultClient.Do(req)
		if err != nil || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from another origin was answered: %v %v", err, resp.Header)
		}
		if resp != nil {
			resp.Body.Close()
		}
	})

	t.Run("MCPSessionsBelongToTheirPrincipal", func(t *testing.T) {
		ctx := context.Background()
		client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "alice", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: keyed.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport{key: aliceKey}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		id := cs.ID()
		if id == "" {
			t.Fatal("no MCP session id")
		}
		call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agent_set_mode","arguments":{"mode":"ddr"}}}`
		for _, method := range []string{"POST", "GET", "DELETE"} {
			body := ""
			if method == "POST" {
				body = call
			}
			st, raw := callMCP(t, method, keyed.URL+"/mcp", bobKey, id, body)
			if st != 404 {
				t.Errorf("bob's %s with alice's MCP session: %d %s", method, st, raw)
			}
		}
		// alice's session is untouched, and hers still
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "agent_get_context", Arguments: json.RawMessage(`{}`)})
		if err != nil || res.IsError || strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, `"mode":"ddr"`) {
			t.Fatalf("alice's session after bob's attempts: %+v %v", res, err)
		}
		if strings.Contains(keyed.Stderr.String(), id) {
			t.Fatal("the MCP session id is in the server's log")
		}
	})

	t.Run("StalledAndDrippingBodies", func(t *testing.T) {
		// 50 connections that declare a body and send one byte, without a
		// key (answered 401 at once, before the body) and with one: every
		// connection is cut within the body timeout (1s here), not held
		results := make(chan stalled, 100)
		for i := range 50 {
			go func() {
				key := ""
				if i%2 == 1 {
					key = aliceKey
				}
				results <- stall(t, keyed.URL, key, false)
			}()
		}
		for range 50 {
			a := <-results
			if a.key == "" && !strings.Contains(a.status, "401") {
				t.Errorf("no key: answered %q, want 401 at once", a.status)
			}
			if a.cut <= 0 || a.cut > 10*time.Second {
				t.Errorf("with a key %v: the connection was held %s", a.key != "", a.cut)
			}
		}
		// a body sent a byte every 100ms is cut too, keyless or keyed
		for _, url := range []string{local.URL, keyed.URL} {
			a := stall(t, url, aliceKey, true)
			if a.cut <= 0 || a.cut > 10*time.Second {
				t.Errorf("%s: a dripping body held the connection %s (%s)", url, a.cut, a.status)
			}
		}
	})

	t.Run("WebSocketMessagesAreDecodedAsBodies", func(t *testing.T) {
		session, _ := askToSend(t, local.URL, "")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, _, err := websocket.Dial(ctx, strings.Replace(local.URL, "http://", "ws://", 1)+"/v1/sessions/"+session+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		for msg, want := range map[string]string{
			`{"type":"turn","text":"hello","text":"switch to ddr mode"}`: `duplicate member name \"text\"`,
			`{"type":"turn","text":"hello","Text":"switch to ddr mode"}`: "differ only in letter case",
			`{"type":"turn","text":"hello","extra":1}`:                   `unknown field \"extra\"`,
			`{"type":"turn","text":"hello","request_id":"a\u0007b"}`:     `holds a byte 0x07`,
			`{"type":"turn","text":"hello"} {}`:                          "data after the JSON value",
		} {
			if err := conn.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			for {
				_, data, err := conn.Read(ctx)
				if err != nil {
					t.Fatalf("%s: %v", msg, err)
				}
				if !bytes.Contains(data, []byte(`"type":"error"`)) {
					continue // the session's events
				}
				if !bytes.Contains(data, []byte(want)) || !bytes.Contains(data, []byte("invalid_input")) {
					t.Errorf("%s: %s, want %q", msg, data, want)
				}
				break
			}
		}
		snap := auditOf(t, local.URL, "", session)
		if last := snap[len(snap)-1]; last.State.Mode == "ddr" {
			t.Fatal("a refused message switched the mode")
		}
	})

	t.Run("ReadinessTellsLittleWithoutAKey", func(t *testing.T) {
		st, raw := servetest.Call(t, "GET", keyed.URL+"/readyz", "", "")
		var got map[string]any
		if st != 200 || json.Unmarshal(raw, &got) != nil || len(got) != 1 || got["status"] != "ready" {
			t.Errorf("readyz without a key: %d %s, want the status alone", st, raw)
		}
		st, raw = servetest.Call(t, "GET", keyed.URL+"/readyz", aliceKey, "")
		if st != 200 || !bytes.Contains(raw, []byte("agentplane.yaml")) {
			t.Errorf("readyz with a key: %d %s", st, raw)
		}
	})
}

// TestServeRefusesLookalikeLoopbackNames: --addr accepts as loopback only
// loopback addresses and localhost, not a name that starts like one.
func TestServeRefusesLookalikeLoopbackNames(t *testing.T) {
	for _, addr := range []string{"127.evil:0", "127.0.0.1.nip.io:0", "localhost.evil.example:0"} {
		_, stderr, code := run(t, "", "serve", "--addr", addr, "--db", filepath.Join(t.TempDir(), "x.db"))
		if code != 1 || !strings.Contains(stderr, "not a loopback address") {
			t.Errorf("%s: exit %d: %s", addr, code, stderr)
		}
	}
}

// stalled is how a connection with a stalled body ended.
type stalled struct {
	key    string
	status string        // the status line the server answered, if any
	cut    time.Duration // when the server closed the connection; 0: it did not within 30s
}

// stall opens a connection, declares a 100,000-byte body and sends one
// byte (or, dripping, a byte every 100ms); it returns the status line the
// server answered (if any) and how long until the server cut the
// connection.
func stall(t *testing.T, url, key string, drip bool) (a stalled) {
	a.key = key
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Error(err)
		return a
	}
	defer conn.Close()
	head := "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
	if key != "" {
		head += "Authorization: Bearer " + key + "\r\n"
	}
	start := time.Now()
	if _, err := io.WriteString(conn, head+"\r\n{"); err != nil {
		t.Error(err)
		return a
	}
	stop := make(chan struct{})
	defer close(stop)
	if drip {
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
					if _, err := io.WriteString(conn, " "); err != nil {
						return
					}
				}
			}
		}()
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err == nil {
		a.status = strings.TrimSpace(line)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return a // not closed by the server within 30s
		}
		// reset: the server closed while a dripped byte was on its way
	}
	a.cut = time.Since(start)
	return a
}

// apiError reads the API's error envelope.
func apiError(raw []byte) (code, message string) {
	var e struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(raw, &e)
	return e.Error.Code, e.Error.Message
}

// callMCP sends a raw MCP request in a session, as another client would.
func callMCP(t *testing.T, method, url, key, session, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s /mcp: %v", method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, raw
}

// bearerTransport adds an API key to every request.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}
