package httpapi_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
	"github.com/agentplane/agentplane/replay"
)

// receiver is an OTLP/HTTP trace receiver: it keeps every span exported to
// it.
type receiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	url   string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var msg collector.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &msg) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/v1/traces"
	return r
}

func (r *receiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// attr is a span's attribute as text ("" when it has none).
func attr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			switch v := a.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return fmt.Sprint(v.IntValue)
			}
			return a.Value.String()
		}
	}
	return ""
}

// TestTracing: with the OTEL_* environment pointing at an OTLP receiver,
// one turn that the LLM answers by calling a tool is one trace — the
// turn's invoke_agent span, with the model's two chat spans (model, token
// usage, finish reason) and the tool's execute_tool span (the gate's
// decision) under it — and the HTTP tool's service got the traceparent of
// that execution. Replaying the session exports nothing.
func TestTracing(t *testing.T) {
	otlp := newReceiver(t)
	var mu sync.Mutex
	var traceparent string
	weather := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparent = r.Header.Get("Traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"forecast":"sunny"}`)
	}))
	t.Cleanup(weather.Close)
	llmSrv := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "weather", Arguments: `{"city":"Paris"}`}}},
		llmtest.Reply{Text: "It is sunny in Paris."})
	y := strings.Replace(string(demo.YAML), "    tools: [agent_list_modes, agent_get_context, agent_set_mode]\n",
		"    tools: [agent_list_modes, agent_get_context, agent_set_mode, weather]\n", 1)
	y += fmt.Sprintf("  - {name: weather, description: The weather in a city., impact: read, http: {url: %q}, "+
		"input_schema: {type: object, properties: {city: {type: string}}, required: [city]}}\n", weather.URL)
	vars := map[string]string{"AGENTPLANE_LLM_BASE_URL": llmSrv.URL, "AGENTPLANE_LLM_MODEL": "test-model",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp.url, "OTEL_SERVICE_NAME": "agentplane-test"}
	open := func() *plane.Runtime {
		rt, err := plane.Open(context.Background(), plane.Options{Config: core.Source{YAML: []byte(y), Name: "traced.yaml"},
			DB: filepath.Join(t.TempDir(), "t.db"), OpenStore: drivers.Open, Core: demotest.Options(nil), LLM: true, Getenv: func(k string) string { return vars[k] }})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	rt := open()
	if rt.Tracer == nil {
		t.Fatal("tracing is off though OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set")
	}
	srv := httptest.NewServer(httpapi.New(rt, nil).Handler())
	e := &env{t: t, srv: srv, core: rt.Core, client: srv.Client()}
	s := e.create("", nil)
	a := e.turn("", s.SessionID, httpapi.TurnBody{Text: "what's the weather like in paris today?"})
	srv.Close()
	if a.LLM == nil || a.LLM.Text != "It is sunny in Paris." || len(a.LLM.Calls) != 1 || a.LLM.Calls[0].Status != agentplane.StatusSuccess {
		t.Fatalf("the turn: %+v %+v", a.Decision, a.LLM)
	}
	recs, _ := rt.Core.Records(context.Background(), s.SessionID, 0)
	rt.Close(time.Second) // flushes the spans

	var root *tracepb.Span
	byName := map[string][]*tracepb.Span{}
	for _, sp := range otlp.all() {
		byName[sp.Name] = append(byName[sp.Name], sp)
		if sp.Name == "invoke_agent agentplane" {
			root = sp
		}
	}
	if root == nil || len(root.ParentSpanId) != 0 || attr(root, "gen_ai.conversation.id") != s.SessionID || attr(root, "agentplane.decision.action") != "continue_with_llm" {
		t.Fatalf("no turn span at the root: %v", byName)
	}
	chats, tools := byName["chat test-model"], byName["execute_tool weather"]
	if len(chats) != 2 || len(tools) != 1 {
		t.Fatalf("spans: %d chat, %d execute_tool: %v", len(chats), len(tools), byName)
	}
	for _, sp := range append(chats, tools...) {
		if !bytes.Equal(sp.TraceId, root.TraceId) || !bytes.Equal(sp.ParentSpanId, root.SpanId) {
			t.Errorf("%s is not a child of the turn's span", sp.Name)
		}
	}
	if attr(chats[0], "gen_ai.operation.name") != "chat" || attr(chats[0], "gen_ai.request.model") != "test-model" ||
		attr(chats[0], "gen_ai.response.finish_reasons") == "" || attr(chats[0], "gen_ai.usage.input_tokens") == "" {
		t.Errorf("chat span attributes: %v", chats[0].Attributes)
	}
	if attr(chats[0], "gen_ai.input.messages") != "" {
		t.Error("message content on a chat span without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
	}
	tool := tools[0]
	if attr(tool, "gen_ai.tool.name") != "weather" || attr(tool, "agentplane.gate.decision") != "allowed" || attr(tool, "agentplane.origin") != "llm" {
		t.Errorf("execute_tool attributes: %v", tool.Attributes)
	}
	mu.Lock()
	got := traceparent
	mu.Unlock()
	want := "00-" + hex.EncodeToString(root.TraceId) + "-" + hex.EncodeToString(tool.SpanId) + "-01"
	if got != want {
		t.Errorf("the tool's service got traceparent %q, want %q (the execute_tool span)", got, want)
	}

	// replaying the session emits no span
	before := len(otlp.all())
	rt = open()
	var log bytes.Buffer
	for _, r := range recs {
		log.Write(append(r.Raw, '\n'))
	}
	var out bytes.Buffer
	if n, err := replay.Run(context.Background(), rt.Core, &log, &out, nil); err != nil || n != 0 {
		t.Fatalf("replay: %d divergences, %v\n%s", n, err, out.String())
	}
	rt.Close(time.Second)
	if after := len(otlp.all()); after != before {
		t.Fatalf("replay exported %d spans", after-before)
	}
}
