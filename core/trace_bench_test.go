package core_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/telemetry"
)

// BenchmarkTracedTurn measures a turn that runs a command through the gate
// (a mode switch, in memory) with tracing off, and on with every span
// sampled and sent to a batch processor whose exporter drops them: the
// added cost of the turn's and the execution's spans.
func BenchmarkTracedTurn(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		opts := &core.Options{}
		if on {
			name = "on"
			tp := trace.NewTracerProvider(trace.WithSampler(trace.AlwaysSample()), trace.WithBatcher(tracetest.NewNoopExporter()))
			defer tp.Shutdown(context.Background())
			opts.Tracer = telemetry.Tracer(tp)
		}
		b.Run(name, func(b *testing.B) {
			c := demotest.Core(b, opts)
			ctx := context.Background()
			s, _ := c.Start(ctx, core.Start{Principal: "p"})
			texts := []string{"switch to ddr mode", "switch to general mode"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tctx, end := c.TraceTurn(ctx, s.ID)
				t, err := c.Turn(tctx, core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: texts[i%2]}})
				end(&t.Decision, err)
				if err != nil || t.Result == nil || t.Result.Status != agentplane.StatusSuccess {
					b.Fatal(t.Result, err)
				}
			}
		})
	}
}
