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
// changes state and has a diff), a call of a read tool, and beside them
// the audit work alone, so the gate's own share can be read off.
func BenchmarkExecute(b *testing.B) {
	modes := []string{"ddr", "general"}
	ctx := context.Background()
	run := func(b *testing.B, f *fixture, after func()) {
		f.open(b, "a", "general")
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r, err := f.g.Execute(ctx, gate.Invocation{SessionID: "a", CommandID: "set_mode", ResolvedID: modes[i%2], Origin: gate.OriginUser})
			if err != nil || r.Status != agentplane.StatusSuccess {
				b.Fatal(r, err)
			}
			if after != nil {
				after()
			}
		}
	}
	b.Run("memstore", func(b *testing.B) { run(b, newFixture(b, nil), nil) })
	// a tool the gate calls (agent_get_context, a read): what a call costs
	// besides the command's effects — the invocation context built for it,
	// the call in its own goroutine under a timeout, the record
	b.Run("memstore/tool-call", func(b *testing.B) {
		f := newFixture(b, nil)
		f.open(b, "a", "general")
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r, err := f.g.Execute(ctx, gate.Invocation{SessionID: "a", Tool: "agent_get_context", Origin: gate.OriginUser, Principal: "ann", Roles: []string{"rep"}})
			if err != nil || r.Status != agentplane.StatusSuccess {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("memstore+jsonl", func(b *testing.B) {
		// each execution exported to an fsync'd JSONL file, as chat --audit-file does
		file, err := audit.OpenFile(filepath.Join(b.TempDir(), "audit.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer file.Close()
		f := newFixture(b, nil)
		run(b, f, func() {
			if err := file.Export(ctx, "a", func(ctx context.Context, after int64) ([]audit.Record, error) {
				return f.store.Records(ctx, "a", after)
			}); err != nil {
				b.Fatal(err)
			}
		})
	})
	// the audit work alone: sealing (JSON encoding, RFC 8785
	// canonicalization and SHA-256) the very record an execution above
	// writes, and appending records like it to the synced JSONL file
	rec := func() *audit.Record {
		f := newFixture(b, nil)
		f.open(b, "a", "general")
		f.g.Execute(ctx, gate.Invocation{SessionID: "a", CommandID: "set_mode", ResolvedID: "ddr", Origin: gate.OriginUser})
		recs, _ := f.store.Records(ctx, "a", 0)
		r := recs[len(recs)-1]
		r.Seq, r.Prev, r.Hash, r.Raw = 0, "", "", nil
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
		file, err := audit.OpenFile(filepath.Join(b.TempDir(), "audit.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer file.Close()
		r := rec()
		b.ReportAllocs()
		b.ResetTimer()
		var prev string
		for i := 0; i < b.N; i++ {
			c := *r
			if err := audit.Seal(&c, int64(i), prev); err != nil {
				b.Fatal(err)
			}
			prev = c.Hash
			if err := file.Write(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
