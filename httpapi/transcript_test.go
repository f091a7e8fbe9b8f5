package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/tools/txtar"
)

// TestTranscripts plays the protocol transcripts of testdata/transcripts
// against a server on loopback: each file's script section is what a
// client does (HTTP calls, an SSE stream, a WebSocket, MCP over streamable
// HTTP), its want section every byte the client got back, in order, with
// the session's and the MCP session's ids written $S and $M. The runtime is
// deterministic (a clock that moves a second per reading, sequential ids),
// so a transcript that differs is a protocol change: go test ./httpapi
// -run TestTranscripts -update rewrites them, and the diff is the change.
//
// Script lines (# starts a comment):
//
//	session JSON          POST /v1/sessions; its id is $S from then on
//	turn TEXT             POST /v1/sessions/$S/turns {"text": TEXT}
//	call METHOD PATH [JSON]  any API call; its status and body
//	sse [LAST-EVENT-ID]   open the session's SSE stream (closing the last)
//	sse-read N            the next N events of the stream, as sent
//	drain REASON          the server drains (every stream gets its closing event)
//	ws [AFTER]            open the session's WebSocket (closing the last)
//	ws-send JSON          send one message
//	ws-read N             the next N messages (sorted: a turn's answer and
//	                      its event may come in either order)
//	mcp JSON              one JSON-RPC message to /mcp; the answer's data
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/transcripts/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var script, want *txtar.File
			for i := range ar.Files {
				switch ar.Files[i].Name {
				case "script":
					script = &ar.Files[i]
				case "want":
					want = &ar.Files[i]
				}
			}
			if script == nil {
				t.Fatalf("%s: no script section", file)
			}
			got := play(t, newEnv(t, nil), string(script.Data))
			if *update {
				if want == nil {
					ar.Files = append(ar.Files, txtar.File{Name: "want"})
					want = &ar.Files[len(ar.Files)-1]
				}
				want.Data = []byte(got)
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want == nil {
				t.Fatalf("%s: no want section (run with -update)", file)
			}
			if got != string(want.Data) {
				t.Errorf("%s: the transcript differs (go test ./httpapi -run TestTranscripts -update rewrites it)\n%s", file, firstDifference(string(want.Data), got))
			}
		})
	}
}

// firstDifference shows the first line where want and got part.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			col := 0
			for col < min(len(wl), len(gl)) && wl[col] == gl[col] {
				col++
			}
			from := max(col-60, 0)
			cut := func(s string) string { return s[min(from, len(s)):min(col+120, len(s))] }
			return fmt.Sprintf("line %d, byte %d:\n  want: …%s\n  got:  …%s", i+1, col+1, cut(wl), cut(gl))
		}
	}
	return "(equal)"
}

// transcript is a client playing a script against one server.
type transcript struct {
	t        *testing.T
	e        *env
	ctx      context.Context
	out      strings.Builder
	session  string
	mcp      string
	sse      *bufio.Reader
	closeSSE func()
	ws       *websocket.Conn
}

func play(t *testing.T, e *env, script string) string {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p := &transcript{t: t, e: e, ctx: ctx}
	defer p.closeStreams()
	for n, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, arg, _ := strings.Cut(line, " ")
		fmt.Fprintf(&p.out, "> %s\n", line)
		if err := p.step(verb, p.expand(arg)); err != nil {
			t.Fatalf("script line %d (%s): %v", n+1, line, err)
		}
	}
	return p.out.String()
}

func (p *transcript) expand(s string) string {
	return strings.NewReplacer("$S", p.session, "$M", p.mcp).Replace(s)
}

// norm writes what the server sent with the ids a run makes up named.
func (p *transcript) norm(s string) string {
	r := []string{}
	if p.session != "" {
		r = append(r, p.session, "$S")
	}
	if p.mcp != "" {
		r = append(r, p.mcp, "$M")
	}
	return strings.NewReplacer(r...).Replace(s)
}

func (p *transcript) step(verb, arg string) error {
	switch verb {
	case "session":
		st, body, _, err := p.do("POST", "/v1/sessions", arg, nil)
		if err != nil {
			return err
		}
		var s struct {
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal(body, &s); err != nil || s.SessionID == "" {
			return fmt.Errorf("no session: %d %s", st, body)
		}
		p.session = s.SessionID
		p.printf("< %d %s\n", st, body)
	case "turn":
		text, _ := json.Marshal(map[string]string{"text": arg})
		st, body, _, err := p.do("POST", "/v1/sessions/"+p.session+"/turns", string(text), nil)
		if err != nil {
			return err
		}
		p.printf("< %d %s\n", st, body)
	case "call":
		f := strings.SplitN(arg, " ", 3)
		if len(f) < 2 {
			return fmt.Errorf("call METHOD PATH [JSON]")
		}
		var body string
		if len(f) == 3 {
			body = f[2]
		}
		st, out, _, err := p.do(f[0], f[1], body, nil)
		if err != nil {
			return err
		}
		p.printf("< %d %s\n", st, out)
	case "sse":
		p.closeStreams()
		ctx, cancel := context.WithCancel(p.ctx)
		req, _ := http.NewRequestWithContext(ctx, "GET", p.e.srv.URL+"/v1/sessions/"+p.session+"/events", nil)
		if arg != "" {
			req.Header.Set("Last-Event-ID", arg)
		}
		resp, err := p.e.srv.Client().Do(req)
		if err != nil {
			cancel()
			return err
		}
		p.printf("< %d %s\n", resp.StatusCode, resp.Header.Get("Content-Type"))
		p.sse = bufio.NewReader(resp.Body)
		p.closeSSE = func() { cancel(); resp.Body.Close() }
	case "sse-read":
		n, err := strconv.Atoi(arg)
		if err != nil || p.sse == nil {
			return fmt.Errorf("sse-read N after sse")
		}
		for i := 0; i < n; i++ {
			frame, err := p.frame()
			if err != nil {
				return err
			}
			p.printf("%s", frame)
		}
	case "drain":
		p.e.api.Drain(arg)
	case "ws":
		p.closeStreams()
		url := strings.Replace(p.e.srv.URL, "http", "ws", 1) + "/v1/sessions/" + p.session + "/ws"
		if arg != "" {
			url += "?after=" + arg
		}
		conn, resp, err := websocket.Dial(p.ctx, url, nil)
		if err != nil {
			return err
		}
		p.printf("< %d\n", resp.StatusCode)
		p.ws = conn
	case "ws-send":
		if p.ws == nil {
			return fmt.Errorf("ws-send after ws")
		}
		return p.ws.Write(p.ctx, websocket.MessageText, []byte(arg))
	case "ws-read":
		n, err := strconv.Atoi(arg)
		if err != nil || p.ws == nil {
			return fmt.Errorf("ws-read N after ws")
		}
		var msgs []string
		for i := 0; i < n; i++ {
			_, data, err := p.ws.Read(p.ctx)
			if err != nil {
				return err
			}
			msgs = append(msgs, "< "+string(data)+"\n")
		}
		slices.Sort(msgs)
		for _, m := range msgs {
			p.printf("%s", m)
		}
	case "mcp":
		var msg map[string]any
		if err := json.Unmarshal([]byte(arg), &msg); err != nil {
			return fmt.Errorf("mcp JSON: %v", err)
		}
		h := http.Header{"Accept": {"application/json, text/event-stream"}}
		if p.mcp != "" {
			h.Set("Mcp-Session-Id", p.mcp)
		}
		st, body, rh, err := p.do("POST", "/mcp", arg, h)
		if err != nil {
			return err
		}
		if id := rh.Get("Mcp-Session-Id"); id != "" && p.mcp == "" {
			p.mcp = id
		}
		if strings.HasPrefix(rh.Get("Content-Type"), "text/event-stream") {
			// the answer's data lines; the SSE framing is the SDK's
			var data []string
			for _, l := range strings.Split(string(body), "\n") {
				if d, ok := strings.CutPrefix(l, "data: "); ok {
					data = append(data, d)
				}
			}
			body = []byte(strings.Join(data, "\n"))
		}
		p.printf("< %d %s\n", st, bytes.TrimSpace(body))
	default:
		return fmt.Errorf("unknown step %q", verb)
	}
	return nil
}

// frame reads the next SSE event (comments — heartbeats — skipped).
func (p *transcript) frame() (string, error) {
	var b strings.Builder
	for {
		line, err := p.sse.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("the stream ended: %v", err)
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		if line == "\n" {
			if b.Len() == 0 {
				continue
			}
			return b.String(), nil
		}
		b.WriteString("< " + line)
	}
}

func (p *transcript) do(method, path, body string, h http.Header) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(p.ctx, method, p.e.srv.URL+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.e.srv.Client().Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, bytes.TrimSpace(out), resp.Header, err
}

func (p *transcript) printf(format string, args ...any) {
	fmt.Fprint(&p.out, p.norm(fmt.Sprintf(format, args...)))
}

func (p *transcript) closeStreams() {
	if p.closeSSE != nil {
		p.closeSSE()
		p.closeSSE, p.sse = nil, nil
	}
	if p.ws != nil {
		p.ws.Close(websocket.StatusNormalClosure, "")
		p.ws = nil
	}
}
