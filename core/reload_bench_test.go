package core_test

import (
	"context"
	"testing"

	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/catalogtest"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
)

const reloadBenchConfig = `version: 1
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

// BenchmarkReload100k measures a reload of a configuration whose catalog
// holds 100,000 items: the canonical form and digest, the store's copy,
// the registry and the router built again, the swap. The file's parsing
// is not in it (config.Parse, the same before and after).
func BenchmarkReload100k(b *testing.B) {
	cfg, err := config.Parse([]byte(reloadBenchConfig), "bench.yaml", nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Catalogs[0].Items = catalogtest.Generate(100_000).Items
	ctx := context.Background()
	c, err := core.FromConfig(ctx, "bench.yaml", cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Reload(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReloadDemo measures a reload of the demo configuration onto
// itself: what a reload costs when little changed (the tools' schemas and
// the examples' model are taken from the configuration before).
func BenchmarkReloadDemo(b *testing.B) {
	c := demotest.Core(b, nil)
	cfg := parse(b, demo.YAML)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Reload(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
	}
}
