package gate_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
)

// BenchmarkExecute measures the gate end to end for a command whose tool
// is a built-in no-op (set_mode, alternating modes so every execution
// changes state and has a diff), and beside it the audit work alone, so
// the gate's own share can be read off.
func BenchmarkExecute(b *testing.B) {
	modes := []string{"ddr", "general"}
	run := func(b *testing.B, f *fixture) {
		ctx := context.Background()
		f.open(b, "a", "general")
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r, err := f.g.Execute(ctx, gate.Invocation{SessionID: "a", CommandID: "set_mode", ResolvedID: modes[i%2], Origin: gate.OriginUser})
			if err != nil || r.Status != agentplane.StatusSuccess {
				b.Fatal(r, err)
			}
		}
	}
	b.Run("memstore", func(b *testing.B) { run(b, newFixture(b, nil)) })
	b.Run("memstore+jsonl", func(b *testing.B) {
		sink, err := audit.OpenFile(filepath.Join(b.TempDir(), "audit.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer sink.Close()
		run(b, newFixtureSink(b, nil, sink))
	})
	// the audit work alone: sealing (JSON encoding and SHA-256) the very
	// record an execution above writes, and appending records like it to
	// the synced JSONL file
	rec := func() *audit.Record {
		f := newFixture(b, nil)
		f.open(b, "a", "general")
		f.g.Execute(context.Background(), gate.Invocation{SessionID: "a", CommandID: "set_mode", ResolvedID: "ddr", Origin: gate.OriginUser})
		recs, _ := f.store.Records(context.Background(), "a")
		r := recs[len(recs)-1]
		r.Seq, r.Prev, r.Hash = 0, "", ""
		return &r
	}
	b.Run("audit-seal-only", func(b *testing.B) {
		r := rec()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := audit.Seal(r, int64(i), "0000000000000000000000000000000000000000000000000000000000000000"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jsonl-append-only", func(b *testing.B) {
		log, err := audit.OpenFile(filepath.Join(b.TempDir(), "audit.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer log.Close()
		r := rec()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := *r
			if err := log.Append(context.Background(), &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
