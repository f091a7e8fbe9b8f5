package gate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
)

// BenchmarkConfirmedCall measures a confirmed external call — the human
// presenting the token a send_template_to_list question issued — through
// the gate on SQLite (synchronous FULL) and in memory, with and without the
// client's request id. Only the confirmed execution is timed, not the
// question before it. It is where the claim that uses the confirmation up
// before the tool runs costs: compare it with git stash.
func BenchmarkConfirmedCall(b *testing.B) {
	ctx := context.Background()
	for _, backend := range []string{"sqlite", "memstore"} {
		for _, keyed := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/keyed=%v", backend, keyed), func(b *testing.B) {
				var st store.Store
				if backend == "sqlite" {
					s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "a.db"), nil)
					if err != nil {
						b.Fatal(err)
					}
					st = s
				}
				noop := func(context.Context, json.RawMessage) (json.RawMessage, error) {
					return json.RawMessage(`{"sent":true}`), nil
				}
				c := demotest.Core(b, &core.Options{Store: st, Programs: demo.SendWith(noop)})
				g := c
				if _, err := g.Open(ctx, gate.Opening{SessionID: "a", Mode: "sales"}); err != nil {
					b.Fatal(err)
				}
				if r, _ := g.Execute(ctx, gate.Invocation{SessionID: "a", CommandID: "set_active_email_template", ResolvedID: "TPL-123", Origin: gate.OriginUser}); r.Status != agentplane.StatusSuccess {
					b.Fatal(r)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					asked, err := g.Execute(ctx, gate.Invocation{SessionID: "a", CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginAPI})
					if err != nil || asked.ConfirmationToken == "" {
						b.Fatal(asked, err)
					}
					inv := gate.Invocation{SessionID: "a", CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginAPI,
						ConfirmationToken: asked.ConfirmationToken}
					if keyed {
						inv.RequestID = fmt.Sprint("r", i)
					}
					b.StartTimer()
					r, err := g.Execute(ctx, inv)
					if err != nil || r.Status != agentplane.StatusSuccess {
						b.Fatal(r, err)
					}
				}
			})
		}
	}
}
