package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/tool"
)

func fn(spec tool.Spec) tool.Tool {
	return &tool.Func{S: spec, Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }}
}

func TestRegisterRefusesBadTools(t *testing.T) {
	t.Parallel()
	good := tool.Spec{Name: "ok_tool", Usage: "Does a thing.", InputSchema: json.RawMessage(`{"type":"object"}`), Impact: tool.ImpactRead, Risk: tool.RiskLow}
	tests := []struct {
		name   string
		mutate func(*tool.Spec)
		want   string
	}{
		{"BadName", func(s *tool.Spec) { s.Name = "send mail!" }, `name "send mail!" must match`},
		{"LongName", func(s *tool.Spec) { s.Name = strings.Repeat("a", 65) }, "must match"},
		{"EmptyUsage", func(s *tool.Spec) { s.Usage = "  " }, "empty usage text"},
		{"NotObject", func(s *tool.Spec) { s.InputSchema = json.RawMessage(`{"type":"string"}`) }, "must be an object schema"},
		{"NotCompiling", func(s *tool.Spec) { s.InputSchema = json.RawMessage(`{"type":"object","properties":{"x":{"type":5}}}`) }, "does not compile"},
		{"NotJSON", func(s *tool.Spec) { s.InputSchema = json.RawMessage(`{`) }, "not a JSON object"},
		{"BadOutput", func(s *tool.Spec) { s.OutputSchema = json.RawMessage(`{"type":"nope"}`) }, "output schema does not compile"},
		{"BadImpact", func(s *tool.Spec) { s.Impact = "sideways" }, `impact "sideways"`},
		{"BadRisk", func(s *tool.Spec) { s.Risk = "" }, `risk ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			tt.mutate(&s)
			err := tool.NewRegistry().Register(fn(s))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Register = %v, want %q", err, tt.want)
			}
		})
	}
	reg := tool.NewRegistry()
	if err := reg.Register(fn(good)); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(fn(good)); err == nil || !strings.Contains(err.Error(), "registered already") {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := reg.Validate("ok_tool", json.RawMessage(`[]`)); err == nil {
		t.Fatal("an array passed an object schema")
	}
	if out, err := reg.Validate("ok_tool", json.RawMessage(` { "b": 2.50, "a" : 1 } `)); err != nil || string(out) != `{"a":1,"b":2.5}` {
		t.Fatalf("Validate = %s, %v: want canonical JSON", out, err)
	}
	// arguments a schema check and a tool's decoder could read differently
	for args, want := range map[string]string{
		`{"a":1,"a":2}`:       "duplicate member name",
		`{"list":1,"LIST":2}`: "differ only in letter case",
		"{\"a\":\"\xff\"}":    "invalid UTF-8",
	} {
		if _, err := reg.Validate("ok_tool", json.RawMessage(args)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%q) = %v, want %q", args, err, want)
		}
	}
}

func TestHTTPTool(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex // handlers of timed-out requests may still run
	var got struct {
		body    map[string]any
		idemKey string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/ok":
			mu.Lock()
			json.Unmarshal(b, &got.body)
			got.idemKey = r.Header.Get("Idempotency-Key")
			mu.Unlock()
			w.Write([]byte(`{"sent": true}`))
		case "/500":
			http.Error(w, "mail server exploded", 500)
		case "/html":
			w.Write([]byte("<html>hi</html>"))
		case "/big":
			w.Write([]byte(`"` + strings.Repeat("x", tool.MaxHTTPBody) + `"`))
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		}
	}))
	t.Cleanup(srv.Close)
	spec := tool.Spec{Name: "send", Usage: "Sends.", InputSchema: json.RawMessage(`{"type":"object"}`), Impact: tool.ImpactExternal, Risk: tool.RiskMedium}
	ctx := tool.WithCallInfo(context.Background(), tool.CallInfo{Context: agentplane.InvocationContext{SessionID: "s1", RequestID: "req-7", Mode: "sales",
		Principal: agentplane.ContextPrincipal{UserID: "alice", Roles: []string{"agent"}}, Authorization: agentplane.Authorization{Kind: agentplane.AuthorizedByHuman}}})
	h := &tool.HTTP{S: spec, URL: srv.URL + "/ok"}
	out, err := h.Call(ctx, json.RawMessage(`{"list_id":"LIST-9"}`))
	if err != nil || string(out) != `{"sent": true}` {
		t.Fatalf("ok: %s %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	cx, _ := got.body["context"].(map[string]any)
	if got.idemKey != "req-7" || got.body["session_id"] != "s1" || got.body["args"].(map[string]any)["list_id"] != "LIST-9" ||
		cx["mode"] != "sales" || cx["principal"].(map[string]any)["user_id"] != "alice" || cx["authorization"].(map[string]any)["kind"] != "human_confirmation" {
		t.Fatalf("request: %+v", got)
	}
	for path, want := range map[string]string{
		"/500":  `http_status: POST ` + srv.URL + `/500: status 500: "mail server exploded\n"`,
		"/html": `not_json: POST ` + srv.URL + `/html: status 200, body is not JSON: "<html>hi</html>"`,
		"/big":  "too_large",
		"/slow": "timeout",
	} {
		// Only /slow should meet the timeout; the others get time to spare
		// on a loaded machine (reading /big's megabyte under the race
		// detector once took over 100 ms).
		timeout := 10 * time.Second
		if path == "/slow" {
			timeout = 100 * time.Millisecond
		}
		h := &tool.HTTP{S: spec, URL: srv.URL + path, Timeout: timeout}
		_, err := h.Call(ctx, json.RawMessage(`{}`))
		var te *tool.Error
		if !errors.As(err, &te) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want prefix %q", path, err, want)
		}
	}
	h = &tool.HTTP{S: spec, URL: "http://127.0.0.1:1/x"}
	if _, err := h.Call(ctx, json.RawMessage(`{}`)); err == nil || !strings.HasPrefix(err.Error(), "unreachable") {
		t.Fatalf("refused: %v", err)
	}
}

// TestRegistryAfterChecksWhatChanged registers, after a registry, tools
// with the same schemas (taken as checked), a changed schema (checked and
// refused when bad, validated by the new one when good) and a bad schema
// under a new name; every refusal names what is wrong.
func TestRegistryAfterChecksWhatChanged(t *testing.T) {
	t.Parallel()
	spec := func(name, schema string) tool.Spec {
		return tool.Spec{Name: name, Usage: "Does a thing.", InputSchema: json.RawMessage(schema), Impact: tool.ImpactRead, Risk: tool.RiskLow}
	}
	prev := tool.NewRegistry()
	for _, s := range []tool.Spec{spec("same", `{"type":"object","required":["a"]}`), spec("changed", `{"type":"object","required":["a"]}`)} {
		if err := prev.Register(fn(s)); err != nil {
			t.Fatal(err)
		}
	}
	next := tool.NewRegistryAfter(prev)
	if err := next.Register(fn(spec("same", `{"type":"object","required":["a"]}`))); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Validate("same", json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "missing property 'a'") {
		t.Errorf("the schema taken from before does not validate: %v", err)
	}
	if err := next.Register(fn(spec("changed", `{"type":"string"}`))); err == nil || !strings.Contains(err.Error(), "must be an object schema") {
		t.Errorf("a changed schema was not checked again: %v", err)
	}
	if err := next.Register(fn(spec("changed", `{"type":"object","required":["b"]}`))); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Validate("changed", json.RawMessage(`{"a":1}`)); err == nil || !strings.Contains(err.Error(), "missing property 'b'") {
		t.Errorf("the changed schema does not validate: %v", err)
	}
	if err := next.Register(fn(spec("new", `{"type":"object","properties":{"x":{"type":5}}}`))); err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Errorf("a new bad schema was taken: %v", err)
	}
	// prev registering later (an MCP server up late) changes nothing in next
	if err := prev.Register(fn(spec("late", `{"type":"object"}`))); err != nil {
		t.Fatal(err)
	}
	if _, ok := next.Get("late"); ok {
		t.Error("a tool registered in the earlier registry appeared in the next")
	}
}
