package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/plane"
)

// A tools/call whose _meta carries a traceparent continues that trace: the
// server's tools/call span is the remote span's child, and the gate's
// execute_tool span the server span's.
func TestTraceContextFromMeta(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	rt := demotest.Runtime(t, plane.Options{TracerProvider: tp})
	ms := mcpserver.New(rt, nil)
	t.Cleanup(ms.Close)
	hs := httptest.NewServer(ms.Handler())
	t.Cleanup(hs.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent_get_context", Arguments: json.RawMessage(`{}`),
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + parent + "-01"}})
	if err != nil {
		t.Fatal(err)
	}
	var server, exec tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		switch s.Name {
		case "tools/call agent_get_context":
			server = s
		case "execute_tool agent_get_context":
			exec = s
		}
	}
	if server.SpanContext.TraceID().String() != traceID || server.Parent.SpanID().String() != parent || !server.Parent.IsRemote() {
		t.Fatalf("the server span does not continue the client's trace: %+v", server)
	}
	if exec.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Fatalf("the gate's span is not the server span's child: %+v", exec)
	}
}
