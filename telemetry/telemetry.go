// Package telemetry is agentplane's tracing: OpenTelemetry spans that
// follow the GenAI and MCP semantic conventions of OpenTelemetry semantic
// conventions v1.40.0 (development status), exported over OTLP
// (http/protobuf) when the standard OTEL_* environment variables ask for
// it. It is off by default, and then free: every part holds a nil
// trace.Tracer and Start returns the context unchanged.
//
// What is traced, one tree per user turn:
//
//	invoke_agent agentplane          the turn (core.Core.TraceTurn), gen_ai.conversation.id = the session
//	├─ execute_tool send_template    a gate execution: its decision (allowed, confirmation_required, rejected) and code
//	│    └─ (HTTP tool)              traceparent sent to the tool's service
//	└─ chat MODEL                    an LLM call: model, token usage, finish reasons (message content only when asked)
//	   └─ execute_tool …             the model's tool calls, through the gate
//
// and beside it: tools/call spans of the MCP server (trace context taken
// from the request's _meta.traceparent) and of mounted MCP servers (sent in
// _meta), workflow and layer spans, notification dispatch spans.
//
//	tp, shutdown, err := telemetry.FromEnv(ctx, os.Getenv, "agentplane", version)
//	tracer := telemetry.Tracer(tp) // nil when tracing is off
package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// SchemaURL is the semantic conventions the spans follow.
const SchemaURL = semconv.SchemaURL

// Scope is the instrumentation scope of agentplane's spans.
const Scope = "github.com/agentplane/agentplane"

// The environment variables that turn tracing on and shape it (the
// exporter reads OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, _TIMEOUT and
// _COMPRESSION too).
const (
	envDisabled  = "OTEL_SDK_DISABLED"
	envExporter  = "OTEL_TRACES_EXPORTER"
	envEndpoint  = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTraces    = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol  = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	// EnvCaptureContent opts in to the LLM's messages on chat spans
	// (gen_ai.input.messages, gen_ai.output.messages): off by default, as
	// the GenAI conventions ask.
	EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
)

// FromEnv returns the tracer provider the environment asks for, or nil
// when tracing is off, with the function that flushes and stops it (a
// no-op when off). Tracing is on when OTEL_TRACES_EXPORTER is otlp, or is
// unset and an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn it off. The protocol is http/protobuf
// (grpc is not built in: an error says so). Sampling follows
// OTEL_TRACES_SAMPLER (default: parent-based, always on), the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. An https endpoint is
// verified against the system's certificates.
func FromEnv(ctx context.Context, getenv func(string) string, service, version string) (*sdktrace.TracerProvider, func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	exporter := strings.TrimSpace(getenv(envExporter))
	endpoint := getenv(envTraces)
	base := getenv(envEndpoint)
	switch {
	case strings.EqualFold(getenv(envDisabled), "true"), exporter == "none":
		return nil, off, nil
	case exporter == "" && endpoint == "" && base == "":
		return nil, off, nil
	case exporter != "" && exporter != "otlp":
		return nil, off, fmt.Errorf("telemetry: %s=%q: agentplane exports traces over otlp (or none)", envExporter, exporter)
	}
	for _, v := range []string{envTProtocol, envProtocol} {
		if p := getenv(v); p != "" {
			if p != "http/protobuf" {
				return nil, off, fmt.Errorf("telemetry: %s=%q: agentplane exports OTLP over http/protobuf only", v, p)
			}
			break
		}
	}
	if endpoint == "" {
		endpoint = strings.TrimRight(base, "/") + "/v1/traces" // the signal's path under the base
	}
	exp, err := newExporter(endpoint, getenv)
	if err != nil {
		return nil, off, fmt.Errorf("telemetry: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(service), semconv.ServiceVersion(version)), resource.WithFromEnv())
	if err != nil {
		return nil, off, fmt.Errorf("telemetry: the resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// Tracer returns agentplane's tracer from a provider; nil for none, which
// every part takes as "tracing is off".
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(Scope, trace.WithSchemaURL(SchemaURL))
}

// Start starts a span with the tracer, or, when the tracer is nil, returns
// ctx unchanged and the span it holds (a no-op one when none): no
// allocation, no work.
func Start(t trace.Tracer, ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.Start(ctx, name, opts...)
}

// Fail marks a span failed with the error's type (error.type) and
// message.
func Fail(span trace.Span, errType, message string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(errType))
	span.SetStatus(codes.Error, message)
}

// propagator carries trace context across process boundaries: the W3C
// traceparent and tracestate.
var propagator = propagation.TraceContext{}

// InjectHTTP adds the trace context of ctx to an outgoing HTTP request's
// headers (traceparent): nothing when ctx holds no span.
func InjectHTTP(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// InjectMeta adds the trace context of ctx to an MCP request's _meta
// (traceparent, tracestate), as the MCP semantic conventions carry it;
// it returns meta (made when nil and there is something to add).
func InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	if meta == nil {
		meta = map[string]any{}
	}
	for k, v := range c {
		meta[k] = v
	}
	return meta
}

// ExtractMeta returns ctx with the remote trace context an MCP request's
// _meta carries (traceparent, tracestate), if any.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	c := propagation.MapCarrier{}
	for _, k := range propagator.Fields() {
		if v, ok := meta[k].(string); ok {
			c[k] = v
		}
	}
	if len(c) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, c)
}

// Attributes of agentplane's own, beside the conventions'.
const (
	// Origin is who asked the gate for an execution (user, api, llm, mcp,
	// workflow, agent_internal).
	Origin = attribute.Key("agentplane.origin")
	// Decision is the gate's decision: allowed, confirmation_required or
	// rejected.
	Decision = attribute.Key("agentplane.gate.decision")
	// Status is an execution's result: success, failed, rejected,
	// confirmation_required.
	Status = attribute.Key("agentplane.result.status")
	// Action is the router's decision for a turn.
	Action = attribute.Key("agentplane.decision.action")
	// Command is the command a decision or an execution names.
	Command = attribute.Key("agentplane.command")
	// Mode is the session's mode.
	Mode = attribute.Key("agentplane.mode")
	// Workflow, Layer and Channel name a workflow, a layer and a
	// notification channel.
	Workflow = attribute.Key("agentplane.workflow.id")
	Layer    = attribute.Key("agentplane.workflow.layer")
	Channel  = attribute.Key("agentplane.notification.channel")
)
