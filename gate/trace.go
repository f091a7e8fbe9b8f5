package gate

import (
	"context"

	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/telemetry"
)

// traced runs an execution in an execute_tool span (the GenAI
// conventions' tool execution): the tool's name, the request id, who asked,
// and what the gate decided — allowed, confirmation_required or rejected,
// with the result's status and error code. The tool runs in the span's
// context: an HTTP tool sends its traceparent.
func (g *Gate) traced(ctx context.Context, inv Invocation) (agentplane.ExecutionResult, error) {
	name := inv.Tool
	if name == "" {
		if cmd, ok := g.reg.Command(inv.CommandID); ok {
			name = cmd.Tool
		} else {
			name = inv.CommandID
		}
	}
	ctx, span := g.tracer.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(name), semconv.GenAIToolType("function"),
			semconv.GenAIConversationID(inv.SessionID), telemetry.Origin.String(string(inv.Origin))))
	defer span.End()
	if inv.RequestID != "" {
		span.SetAttributes(semconv.GenAIToolCallID(inv.RequestID))
	}
	if inv.CommandID != "" {
		span.SetAttributes(telemetry.Command.String(inv.CommandID))
	}
	res, err := g.execute(ctx, inv)
	if err != nil {
		telemetry.Fail(span, "store", err.Error())
		return res, err
	}
	decision := "allowed"
	switch {
	case res.Status == agentplane.StatusConfirmationRequired:
		decision = "confirmation_required"
	case res.Status == agentplane.StatusRejected:
		decision = "rejected"
	}
	span.SetAttributes(telemetry.Decision.String(decision), telemetry.Status.String(string(res.Status)))
	if res.Error != nil && res.Status != agentplane.StatusConfirmationRequired {
		telemetry.Fail(span, res.Error.Code, res.Message)
	}
	return res, nil
}
