package telemetry_test

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/telemetry"
)

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

// Tracing is off unless the environment asks for it, and what it cannot
// do is an error at start, naming the variable.
func TestFromEnv(t *testing.T) {
	ctx := context.Background()
	for name, vars := range map[string]map[string]string{
		"nothing":  {},
		"none":     {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"},
		"disabled": {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"},
	} {
		tp, _, err := telemetry.FromEnv(ctx, env(vars), "s", "v")
		if tp != nil || err != nil {
			t.Errorf("%s: %v %v", name, tp, err)
		}
	}
	for name, c := range map[string]struct {
		vars map[string]string
		want string
	}{
		"grpc":     {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		"zipkin":   {map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		"headers":  {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_HEADERS": "nokey"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		"timeout":  {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
		"endpoint": {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"}, "endpoint"},
		"lz4":      {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_COMPRESSION": "lz4"}, "COMPRESSION"},
	} {
		if _, _, err := telemetry.FromEnv(ctx, env(c.vars), "s", "v"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", name, err, c.want)
		}
	}
}

// The exporter sends OTLP protobuf to the signal's path under the base
// endpoint, with the configured headers, gzipped when asked, and tries
// again when the collector is unavailable.
func TestExport(t *testing.T) {
	var mu sync.Mutex
	var got []*tracepb.Span
	var auth, encoding string
	fails := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		auth, encoding = r.Header.Get("Authorization"), r.Header.Get("Content-Encoding")
		var body io.Reader = r.Body
		if encoding == "gzip" {
			body, _ = gzip.NewReader(r.Body)
		}
		raw, _ := io.ReadAll(body)
		var msg tracepb.TracesData
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(raw, &msg) != nil {
			http.Error(w, "bad", 400)
			return
		}
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				got = append(got, ss.Spans...)
			}
		}
	}))
	t.Cleanup(srv.Close)
	tp, shutdown, err := telemetry.FromEnv(context.Background(), env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL + "/",
		"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20k1", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}), "s", "v")
	if err != nil || tp == nil {
		t.Fatal(err)
	}
	tracer := telemetry.Tracer(tp)
	ctx, parent := tracer.Start(context.Background(), "parent")
	_, child := tracer.Start(ctx, "child")
	child.SetAttributes(attribute.StringSlice("s", []string{"a", "b"}), attribute.Int("n", 7), attribute.Bool("b", true))
	telemetry.Fail(child, "boom", "it broke")
	child.End()
	parent.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || auth != "Bearer k1" || encoding != "gzip" {
		t.Fatalf("%d spans, auth %q, encoding %q", len(got), auth, encoding)
	}
	var c *tracepb.Span
	for _, s := range got {
		if s.Name == "child" {
			c = s
		}
	}
	if c == nil || c.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || c.Status.Message != "it broke" || len(c.ParentSpanId) != 8 || len(c.Attributes) != 4 {
		t.Fatalf("child: %v", c)
	}
}
