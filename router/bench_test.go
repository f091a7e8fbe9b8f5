package router_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/internal/testkit/catalogtest"
	"github.com/agentplane/agentplane/router"
)

const benchConfig = `version: 1
modes:
  - {key: general, default: true, toolboxes: [core]}
toolboxes:
  - {id: core, catalogs: [modes, items], commands: [set_mode, open_item]}
catalogs:
  - {id: items, entity_type: item, items: []}
commands:
  - {id: set_mode, tool: agent_set_mode, parameter: mode, resolver: {catalog: modes}, sets_session_mode: true,
     triggers: ["(switch|change|go|move) [over] to [the] {item} mode"]}
  - {id: open_item, tool: agent_set_active_entity, parameter: id, resolver: {catalog: items}, sets_active_context: true,
     triggers: ["(open|load|show) [the] {item}"]}
`

// benchRegistry builds a registry whose "items" catalog holds the generated items.
func benchRegistry(tb testing.TB, items []agentplane.ResolverItem) *router.Router {
	tb.Helper()
	cfg, err := config.Parse([]byte(benchConfig), "bench.yaml", nil)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Catalogs[0].Items = items
	reg, err := compile(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// BenchmarkRoute routes a mixed workload (exact names, typos, partial
// names, misses, ordinary chat) against catalogs of growing size and
// reports the median and 99th percentile of single turns.
func BenchmarkRoute(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			cat := catalogtest.Generate(n)
			reg := benchRegistry(b, cat.Items)
			turns := cat.Workload(4096)
			sess := &agentplane.Session{ID: "bench", Mode: "general", Version: 1}
			ctx := context.Background()
			now := time.Now()
			lat := make([]time.Duration, 0, b.N)
			runtime.GC() // collect the catalog build's garbage: measure steady-state routing
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				d, err := reg.Route(ctx, sess, agentplane.TurnInput{Text: turns[i%len(turns)], UI: true, Now: now})
				lat = append(lat, time.Since(start))
				if err != nil || d.Action == "" {
					b.Fatal(d, err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// BenchmarkRouteKinds breaks the 100k workload down by kind of turn.
func BenchmarkRouteKinds(b *testing.B) {
	cat := catalogtest.Generate(100_000)
	reg := benchRegistry(b, cat.Items)
	it := cat.Items[42].Header.DisplayName
	sess := &agentplane.Session{ID: "bench", Mode: "general", Version: 1}
	for _, tc := range []struct{ name, text string }{
		{"exact", "open the " + it},
		{"typo", "open the " + it[:3] + "x" + it[4:]},
		{"partial", "open the " + it[:len(it)-3]},
		{"miss", "open the zyx qwv"},
		{"chat", "what is the weather like in paris today"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			in := agentplane.TurnInput{Text: tc.text, UI: true, Now: time.Now()}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				reg.Route(context.Background(), sess, in)
			}
		})
	}
}
