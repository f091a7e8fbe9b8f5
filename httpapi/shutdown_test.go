package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/mcpserver"
)

// TestShutdownUnderLoad: while clients send turns over HTTP and over a
// WebSocket and follow the session's SSE stream, the server shuts down
// as serve does (Drain, the http.Server's Shutdown, Wait for the
// WebSocket connections, then the runtime's Close), while an MCP client
// calls a tool back to back. Nothing an instance
// acknowledged is lost or cut: every turn answered 200 is in the audit;
// every WebSocket turn the audit holds was answered on the socket before
// its closing message; every MCP call answered is in the audit; the SSE stream and the socket end with their
// closing frame, after every event up to the last id it names, in order.
func TestShutdownUnderLoad(t *testing.T) {
	e := newEnv(t, nil)
	s := e.create("", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	modes := []string{"ddr", "sales", "general"}

	// clients sending turns over HTTP until the server refuses them
	const clients = 4
	var mu sync.Mutex
	acked := map[int64]bool{} // the sequence numbers of turns answered 200
	busy := make(chan struct{}, clients+2)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			signaled := false
			for i := 0; ; i++ {
				body := fmt.Sprintf(`{"text":"switch to %s mode"}`, modes[(c+i)%3])
				req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/v1/sessions/"+s.SessionID+"/turns", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := e.srv.Client().Do(req)
				if err != nil {
					return // the listener is closed
				}
				var a httpapi.TurnAnswer
				err = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return
				}
				if err != nil {
					t.Errorf("a turn answered 200 with a body cut: %v", err)
					return
				}
				mu.Lock()
				acked[a.Seq] = true
				mu.Unlock()
				if !signaled {
					signaled = true
					busy <- struct{}{}
				}
			}
		})
	}

	// a follower of the SSE stream
	resp, stop := e.stream(t, s.SessionID, 0)
	defer stop()
	type streamEnd struct {
		ids    []int64
		closed *httpapi.Closing
	}
	sse := make(chan streamEnd, 1)
	go func() {
		var end streamEnd
		defer func() { sse <- end }()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id, _ := strconv.ParseInt(v, 10, 64)
				end.ids = append(end.ids, id)
			}
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				kind = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok && kind == "closed" {
				end.closed = &httpapi.Closing{}
				json.Unmarshal([]byte(v), end.closed)
				return
			}
		}
	}()

	// a WebSocket client sending its turns one after another, each as soon
	// as the last is answered
	conn, _, err := websocket.Dial(ctx, strings.Replace(e.srv.URL, "http", "ws", 1)+"/v1/sessions/"+s.SessionID+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	type wsEnd struct {
		answered map[string]bool // request ids answered before the closing message
		sent     int             // turns ws-1 … ws-sent were sent
		ids      []int64
		closed   *int64
	}
	ws := make(chan wsEnd, 1)
	go func() {
		end := wsEnd{answered: map[string]bool{}}
		defer func() { ws <- end }()
		send := func() bool {
			end.sent++
			n := end.sent
			// the text names the turn: every turn taken is recorded with it
			data, _ := json.Marshal(map[string]any{"type": "turn", "request_id": fmt.Sprint("ws-", n), "text": fmt.Sprintf("switch to %s mode (ws-%d)", modes[n%3], n)})
			return conn.Write(ctx, websocket.MessageText, data) == nil
		}
		if !send() {
			return
		}
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var m struct {
				Type        string `json:"type"`
				RequestID   string `json:"request_id"`
				ID          int64  `json:"id"`
				LastEventID *int64 `json:"last_event_id"`
				Error       *httpapi.ErrorDetail
			}
			json.Unmarshal(data, &m)
			switch m.Type {
			case "event":
				end.ids = append(end.ids, m.ID)
			case "turn":
				if len(end.answered) == 0 {
					busy <- struct{}{}
				}
				end.answered[m.RequestID] = true
				if !send() {
					return
				}
			case "error":
				if m.Error.Code != agentplane.CodeUnavailable {
					t.Errorf("websocket: %+v", m.Error)
				}
			case "closed":
				end.closed = m.LastEventID
				return
			}
		}
	}()
	// an MCP client bound to the session, calling a tool back to back
	mcpOK := 0
	mcpDone := make(chan struct{})
	hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		r.Header.Set(mcpserver.SessionHeader, s.SessionID)
		return http.DefaultTransport.RoundTrip(r)
	})}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(mcpDone)
		for i := 0; ; i++ {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_set_mode", Arguments: map[string]any{"mode": modes[i%3]}})
			if err != nil { // the server is gone
				if mcpOK == 0 { // never answered: say why, and let the test go on
					t.Errorf("the MCP calls: %v", err)
					busy <- struct{}{}
				}
				return
			}
			if res.IsError {
				continue // a version conflict with the other clients' turns, recorded as such
			}
			if mcpOK++; mcpOK == 1 {
				busy <- struct{}{}
			}
		}
	}()
	// every client has had an answer: shut down, as serve does
	for range clients + 2 {
		<-busy
	}
	const reason = "the server is shutting down"
	e.api.Drain(reason)
	e.mcp.Drain() // the MCP sessions' GET streams: Shutdown waited for them until its deadline
	sctx, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	if err := e.srv.Config.Shutdown(sctx); err != nil {
		t.Fatalf("the HTTP server's Shutdown: %v", err)
	}
	if err := e.api.Wait(sctx, reason); err != nil {
		t.Fatalf("the WebSocket connections did not end: %v", err)
	}
	e.mcp.Close()
	wg.Wait()
	<-mcpDone
	cs.Close()
	gotSSE, gotWS := <-sse, <-ws

	recs, err := e.core.Records(context.Background(), s.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	inAudit := map[int64]bool{}
	var wsRan []string // the WebSocket's turns that were taken
	executions := 0    // the MCP client's calls
	for _, r := range recs {
		inAudit[r.Seq] = true
		if r.Kind == "execution" {
			executions++
		}
		if r.Kind == "turn" && r.Input != nil {
			if _, id, ok := strings.Cut(r.Input.Text, "("); ok {
				wsRan = append(wsRan, strings.TrimSuffix(id, ")"))
			}
		}
	}
	for seq := range acked {
		if !inAudit[seq] {
			t.Errorf("turn %d was answered 200 and is not in the audit", seq)
		}
	}
	if executions < mcpOK {
		t.Errorf("%d MCP calls answered, %d in the audit", mcpOK, executions)
	}
	for _, id := range wsRan {
		if !gotWS.answered[id] {
			t.Errorf("websocket turn %s ran and was not answered before the closing message", id)
		}
	}
	if gotSSE.closed == nil || gotSSE.closed.Reason != reason {
		t.Errorf("the SSE stream ended without its closing event: %+v", gotSSE.closed)
	} else {
		checkIDs(t, "SSE", gotSSE.ids, gotSSE.closed.LastEventID)
	}
	if gotWS.closed == nil {
		t.Error("the WebSocket ended without its closing message")
	} else {
		checkIDs(t, "WebSocket", gotWS.ids, *gotWS.closed)
	}
	t.Logf("%d HTTP turns answered, %d WebSocket turns ran and were answered, %d MCP calls answered; the chain has %d records, SSE closed after %d, WebSocket after %d",
		len(acked), len(wsRan), mcpOK, len(recs), len(gotSSE.ids), len(gotWS.ids))
}

// checkIDs: a stream sent the events 1..last, each once, in order.
func checkIDs(t *testing.T, name string, ids []int64, last int64) {
	t.Helper()
	if int64(len(ids)) != last {
		t.Errorf("%s: %d events before the closing frame naming %d", name, len(ids), last)
		return
	}
	for i, id := range ids {
		if id != int64(i+1) {
			t.Errorf("%s: event %d at place %d", name, id, i+1)
			return
		}
	}
}
