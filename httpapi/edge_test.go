package httpapi_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/internal/testkit/oidctest"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/plane"
)

// getRoutes are the GET routes the server serves, with their path
// parameters filled in: the session, a workflow and a notification of
// the principal's, catalogs and providers of the demo.
func getRoutes(e *env, session, workflow, notification string) []string {
	var out []string
	for _, p := range e.api.Patterns() {
		method, path, _ := strings.Cut(p, " ")
		if method != "GET" {
			continue
		}
		id := session
		switch {
		case strings.HasPrefix(path, "/v1/workflows/"):
			id = workflow
		case strings.HasPrefix(path, "/v1/notifications/"):
			id = notification
		}
		path = strings.NewReplacer("{id}", id, "{catalog}", "email_templates", "{provider}", "personas", "{$}", "").Replace(path)
		out = append(out, path)
	}
	return out
}

// workflow starts a workflow of the principal's (in a session of its
// own) that waits for its approval, and returns its id.
func (e *env) workflow(key string) string {
	e.t.Helper()
	s := e.create(key, map[string]any{"mode": "sales"})
	var c httpapi.WorkflowCreated
	if st := e.call("POST", "/v1/workflows", key, strings.Replace(outreach, "%q", strconv.Quote(s.SessionID), 1), &c); st != http.StatusCreated {
		e.t.Fatalf("start a workflow: %d", st)
	}
	return c.Workflow.ID
}

// publicGET are the routes anyone may GET from anywhere: nothing there
// changes anything.
func publicGET(path string) bool {
	return slices.Contains([]string{"/", "/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/v1/auth"}, path) ||
		strings.HasPrefix(path, "/ui/") || strings.HasPrefix(path, "/.well-known/")
}

// get sends a GET with the headers (name, value, …) and returns the
// status; a stream's answer is not read past its headers.
func (e *env) get(path, key string, header ...string) (int, http.Header) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// No GET from another site reaches a route that could change anything:
// on a keyless server (where being on this machine is the credential),
// every GET route but the page and the public documents refuses a
// browser's cross-site or same-site request — by Sec-Fetch-Site, or by
// Origin from a browser that does not send it — and the inbox stays as
// it was (a no-cors GET /v1/inbox from another site marked the person's
// notifications dispatched). A GET of the inbox from the page itself
// only reads too; an origin listed with --cors-origin is let through.
func TestCrossSiteGETChangesNothing(t *testing.T) {
	e := newEnv(t, &envOptions{origins: []string{"https://app.example.com"}})
	s := e.create("", nil)
	var ids []string
	for i := range 3 {
		var n httpapi.NotificationCreated
		if st := e.call("POST", "/v1/notifications", "", map[string]any{"address": "USER", "target": "USER", "handler": "SYSTEM",
			"title": fmt.Sprintf("n%d", i)}, &n); st != 201 || n.State != notify.StatePending {
			t.Fatalf("emit: %d %+v", st, n)
		}
		ids = append(ids, n.ID)
	}
	routes := getRoutes(e, s.SessionID, e.workflow(""), ids[0])
	if !slices.Contains(routes, "/v1/inbox") || !slices.Contains(routes, "/v1/inbox/events") || !slices.Contains(routes, "/v1/sessions/"+s.SessionID+"/ws") {
		t.Fatalf("routes: %v", routes)
	}
	from := [][]string{
		{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"},
		{"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "cors", "Origin", "https://other.localhost"},
		{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"},
		{"Origin", "https://evil.example"}, // a browser that sends no Sec-Fetch-Site
	}
	refused := 0
	for _, path := range routes {
		for _, h := range from {
			st, _ := e.get(path, "", h...)
			switch {
			case publicGET(path) && st == http.StatusForbidden:
				t.Errorf("GET %s %v: the public route refused it", path, h)
			case !publicGET(path) && st != http.StatusForbidden:
				t.Errorf("GET %s %v: %d, want 403", path, h, st)
			case !publicGET(path):
				refused++
			}
		}
	}
	state := func() []notify.State {
		var out []notify.State
		for _, id := range ids {
			var n notify.Notification
			e.call("GET", "/v1/notifications/"+id, "", nil, &n)
			out = append(out, n.State)
		}
		return out
	}
	if got := state(); slices.ContainsFunc(got, func(s notify.State) bool { return s != notify.StatePending }) {
		t.Fatalf("after %d cross-site GETs: %v", refused, got)
	}
	// the page's own GET of the inbox, and one from a listed origin: read, nothing moved
	for _, h := range [][]string{{"Sec-Fetch-Site", "same-origin"}, {"Sec-Fetch-Site", "cross-site", "Origin", "https://app.example.com"}, nil} {
		if st, _ := e.get("/v1/inbox", "", h...); st != 200 {
			t.Fatalf("GET /v1/inbox %v: %d", h, st)
		}
	}
	if got := state(); slices.ContainsFunc(got, func(s notify.State) bool { return s != notify.StatePending }) {
		t.Fatalf("after the page read its inbox: %v", got)
	}
	// the ack is the page's explicit call: it delivers what was left pending
	var acked notify.Notification
	if st := e.call("POST", "/v1/notifications/"+ids[0]+"/ack", "", nil, &acked); st != 200 || acked.State != notify.StateDelivered {
		t.Fatalf("ack: %d %+v", st, acked)
	}
	t.Logf("%d cross-site GETs of %d routes refused", refused, len(routes))
}

// A request without credentials is answered 401 at once, its body never
// read: on every authenticated route, a POST declaring 100,000 bytes and
// sending one gets its 401 while the body is still owed (it waited for
// the body timeout, 30 s), and the connection is closed after it.
func TestUnauthorizedBeforeTheBody(t *testing.T) {
	e := newEnv(t, &envOptions{keys: map[string]string{"alice-key-0123456789": "alice"}, bodyTimeout: 10 * time.Minute})
	var paths []string
	for _, p := range e.api.Patterns() {
		method, path, _ := strings.Cut(p, " ")
		if method == "" || method == "GET" && publicGET(path) || strings.HasPrefix(path, "/v1/auth") || strings.HasPrefix(path, "/.well-known") {
			continue // the public routes need no key
		}
		if path == "" { // "/mcp": every method
			method, path = "POST", method
		}
		paths = append(paths, method+" "+strings.NewReplacer("{id}", "x", "{catalog}", "c", "{provider}", "p").Replace(path))
	}
	for _, mp := range paths {
		method, path, _ := strings.Cut(mp, " ")
		conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", method, path)
		conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // a guard against hanging; the body timeout is 10 minutes
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s: no answer while the body was owed: %v", mp, err)
			conn.Close()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 401 || !resp.Close {
			t.Errorf("%s: %d (close %v) %s, want 401 and the connection closed", mp, resp.StatusCode, resp.Close, body)
		}
		conn.Close()
	}
	if len(paths) < 20 {
		t.Fatalf("only %d routes: %v", len(paths), paths)
	}
}

// Every GET of a principal's data says no cache may keep it.
func TestPersonalGETsAreNotStored(t *testing.T) {
	key := "alice-key-0123456789"
	e := newEnv(t, &envOptions{keys: map[string]string{key: "alice"}})
	s := e.create(key, nil)
	var n httpapi.NotificationCreated
	e.call("POST", "/v1/notifications", key, map[string]any{"address": "USER", "target": "USER", "handler": "SYSTEM", "title": "t"}, &n)
	checked := 0
	for _, path := range getRoutes(e, s.SessionID, e.workflow(key), n.ID) {
		if publicGET(path) || strings.HasSuffix(path, "/ws") {
			continue
		}
		st, h := e.get(path, key)
		if st != 200 && !(st == 404 && strings.Contains(path, "/providers/")) || h.Get("Cache-Control") != "no-store" { // the demo has no provider
			t.Errorf("GET %s: %d, Cache-Control %q", path, st, h.Get("Cache-Control"))
		}
		checked++
	}
	if checked < 15 {
		t.Fatalf("%d routes checked", checked)
	}
}

// A principal holds at most StreamsPerPrincipal event streams, SSE and
// WebSocket of every kind together: the next is 429 naming the cap,
// another principal is not affected, and a stream closed makes room.
func TestStreamsPerPrincipal(t *testing.T) {
	alice, bob := "alice-key-0123456789", "bob-key-0123456789ab"
	e := newEnv(t, &envOptions{keys: map[string]string{alice: "alice", bob: "bob"}, streams: 4})
	s := e.create(alice, nil)
	wf := e.workflow(alice)
	open := func(path, key string) (int, string, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(body), cancel
		}
		return 200, "", cancel
	}
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, strings.Replace(e.srv.URL, "http", "ws", 1)+"/v1/sessions/"+s.SessionID+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + alice}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	var cancels []context.CancelFunc
	for _, path := range []string{"/v1/sessions/" + s.SessionID + "/events", "/v1/inbox/events", "/v1/workflows/" + wf + "/events"} {
		st, body, cancel := open(path, alice)
		if st != 200 {
			t.Fatalf("%s: %d %s", path, st, body)
		}
		cancels = append(cancels, cancel)
	}
	st, body, cancel := open("/v1/sessions/"+s.SessionID+"/events?inbox=true", alice)
	defer cancel()
	var eb httpapi.ErrorBody
	json.Unmarshal([]byte(body), &eb)
	if st != http.StatusTooManyRequests || eb.Error.Code != agentplane.CodeTooManyRequests || !strings.Contains(eb.Error.Message, "holds 4 open, the cap") {
		t.Fatalf("a fifth stream: %d %s", st, body)
	}
	if _, _, err := websocket.Dial(ctx, strings.Replace(e.srv.URL, "http", "ws", 1)+"/v1/sessions/"+s.SessionID+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + alice}}}); err == nil {
		t.Fatal("a fifth stream over the WebSocket")
	}
	if st, body, c := open("/v1/inbox/events", bob); st != 200 { // bob's own
		t.Fatalf("bob: %d %s", st, body)
	} else {
		defer c()
	}
	cancels[0]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _, c := open("/v1/inbox/events", alice)
		if st == 200 {
			c()
			break
		}
		c()
		if time.Now().After(deadline) {
			t.Fatal("a closed stream did not make room")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range cancels[1:] {
		c()
	}
}

// newServer serves the API on loopback until the test ends.
func newServer(t *testing.T, api *httpapi.Server) string {
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// longSession is a server on a memory store with one session of n turns
// of 4 KiB each: a long chain whose records are large.
func longSession(t *testing.T, n int, opts *httpapi.Options) (url, session string) {
	t.Helper()
	rt := demotest.Runtime(t, plane.Options{})
	api := httpapi.New(rt, opts)
	srv := newServer(t, api)
	sess, err := rt.Core.Start(context.Background(), core.Start{Principal: agentplane.LocalPrincipal})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("lorem ipsum dolor sit amet ", 151)[:4000]
	for i := range n {
		if _, err := rt.Core.Turn(context.Background(), core.TurnRequest{SessionID: sess.ID, Principal: agentplane.LocalPrincipal,
			Input: agentplane.TurnInput{Text: fmt.Sprintf("%d %s", i, text)}}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, sess.ID
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Streams opened from the start of a long session hold a page of its
// backlog each, not the whole of it: 20 clients that read nothing of a
// 1,500-record chain (6 MB of events) leave the server's heap within 3 MB
// a stream of where it was (each held every event of the chain before,
// ~10 MB).
func TestBacklogIsPaged(t *testing.T) {
	url, session := longSession(t, 1500, nil)
	base := heapInUse()
	for range 20 {
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).SetReadBuffer(4096)
		defer c.Close()
		fmt.Fprintf(c, "GET /v1/sessions/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", session) // and nothing read
	}
	// the streams write until the sockets are full, then wait: the heap
	// settles where they hold what they hold
	var now uint64
	for i := 0; ; i++ {
		time.Sleep(300 * time.Millisecond)
		next := heapInUse()
		if i > 3 && next < now+now/50 && next+next/50 > now || i > 60 {
			now = next
			break
		}
		now = next
	}
	grown := int64(now) - int64(base)
	t.Logf("heap %d MB → %d MB with 20 stalled streams from the start of a 1,500-record session", base>>20, now>>20)
	if grown > 20*3<<20 {
		t.Fatalf("20 streams grew the heap by %d MB: each holds more than a page of its backlog", grown>>20)
	}
	// and a client that reads gets the whole chain, in order
	resp, err := http.Get(url + "/v1/sessions/" + session + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var want int64 = 1
	for want <= 1501 && sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			if id != fmt.Sprint(want) {
				t.Fatalf("event %s where %d was due", id, want)
			}
			want++
		}
	}
	if want != 1502 {
		t.Fatalf("the stream ended at %d", want)
	}
}

// An ack over the WebSocket reads one record, however long the chain: 20
// acks of event 1 of a 1,000-record session allocate what one record
// costs, not the chain (they read every record after the one acked: 200
// acks of a 4,001-record chain cost 40 CPU-seconds).
func TestAckReadsOneRecord(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	text := strings.Repeat("lorem ipsum dolor sit amet ", 40)
	for i := range 500 {
		if _, err := e.core.Turn(context.Background(), core.TurnRequest{SessionID: s.SessionID, Principal: agentplane.LocalPrincipal,
			Input: agentplane.TurnInput{Text: fmt.Sprintf("%d %s", i, text)}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, strings.Replace(e.srv.URL, "http", "ws", 1)+"/v1/sessions/"+s.SessionID+"/ws?after=501", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	ack := func() {
		if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"ack","id":1}`)); err != nil {
			t.Fatal(err)
		}
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var m struct{ Type string }
			json.Unmarshal(data, &m)
			if m.Type == "acked" {
				return
			}
			if m.Type == "error" {
				t.Fatalf("ack: %s", data)
			}
		}
	}
	ack()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		ack()
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / 20
	t.Logf("%d KB allocated per ack of event 1 on a 501-record chain", per>>10)
	if per > 256<<10 {
		t.Fatalf("an ack allocated %d KB: it reads more than one record", per>>10)
	}
}

// A WebSocket whose client stalls in the middle of a frame is cut: the
// server's pings go unanswered (a client cannot answer until its frame is
// whole). A client that is idle but answers pings keeps its connection.
func TestWebSocketStalledMidFrameIsCut(t *testing.T) {
	e := newEnv(t, nil) // pings every 50 ms, a pong waited for 5 s
	s := e.create("", nil)
	// an idle client that answers pings (its reader runs) stays
	ctx := context.Background()
	idle, _, err := websocket.Dial(ctx, strings.Replace(e.srv.URL, "http", "ws", 1)+"/v1/sessions/"+s.SessionID+"/ws?after=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.CloseNow()
	got := make(chan []byte, 16)
	go func() {
		for {
			_, data, err := idle.Read(ctx)
			if err != nil {
				close(got)
				return
			}
			got <- data
		}
	}()
	// the stalled one: a handshake by hand, then half a frame
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	key := make([]byte, 16)
	rand.Read(key)
	fmt.Fprintf(conn, "GET /v1/sessions/%s/ws?after=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n",
		s.SessionID, base64.StdEncoding.EncodeToString(key))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	conn.Write([]byte{0x81, 0x85, 1, 2, 3, 4, 'h' ^ 1, 'e' ^ 2}) // a masked text frame of 5 bytes, 2 sent
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // a guard: the server must cut it long before
	io.Copy(io.Discard, br)                                // the server's pings, then its close
	if time.Since(start) > 55*time.Second {
		t.Fatal("a WebSocket stalled mid-frame was not cut")
	}
	t.Logf("the stalled WebSocket was cut after %v", time.Since(start).Round(time.Millisecond))
	// the idle one is still there and works
	if err := idle.Write(ctx, websocket.MessageText, []byte(`{"type":"turn","text":"hello"}`)); err != nil {
		t.Fatal(err)
	}
	for data := range got {
		if strings.Contains(string(data), `"type":"turn"`) {
			return
		}
	}
	t.Fatal("the idle WebSocket was cut")
}

// The page's code exchange is relayed to the provider at most
// tokenRate a second (a burst of 20): a flood of anonymous exchanges is
// mostly 429, and the provider hears only what the rate lets through.
func TestTokenExchangeRateLimited(t *testing.T) {
	p := oidctest.New(t)
	e := newEnv(t, &envOptions{oidc: p})
	body := `{"code":"made-up","code_verifier":"` + strings.Repeat("v", 50) + `","redirect_uri":"` + e.srv.URL + `/"}`
	start := time.Now()
	limited := 0
	for range 80 {
		st, _, b := e.raw("POST", "/v1/auth/token", "", body)
		switch st {
		case http.StatusTooManyRequests:
			if !strings.Contains(b, "too_many_requests") || !strings.Contains(b, "10 code exchanges a second") {
				t.Fatalf("429 without the cap: %s", b)
			}
			limited++
		case http.StatusUnauthorized: // the provider refused the made-up code
		default:
			t.Fatalf("%d %s", st, b)
		}
	}
	took := time.Since(start).Seconds()
	hits := int(p.TokenHits.Load())
	if limited == 0 || float64(hits) > 20+10*took+1 {
		t.Fatalf("80 exchanges in %.2fs: %d reached the provider, %d limited", took, hits, limited)
	}
	t.Logf("80 exchanges in %.2fs: %d reached the provider, %d answered 429", took, hits, limited)
}
