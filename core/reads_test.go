package core_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/tool"
)

// TestKeyedCallReadsOnce: a tool call with a request id reads the session
// and what its key holds in one statement through the core's store (which
// wraps the store to observe its commits — as a server with metrics does —
// and must not hide the read):
// then its commit, the key's result and the record, two more. A second
// call with the same key reads once and answers the result recorded.
func TestKeyedCallReadsOnce(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	noop := &tool.Func{S: tool.Spec{Name: "noop", Usage: "Does nothing.", Impact: tool.ImpactRead, Risk: tool.RiskLow, InputSchema: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }}
	c, err := core.New(ctx, core.Source{YAML: []byte(`version: 1
modes: [{key: m, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [modes], tools: [noop]}]
`), Name: "reads.yaml"}, &core.Options{Store: st, Tools: []tool.Tool{noop},
		Observer: &core.Observer{Committed: func(string, int64, time.Duration) {}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Start(ctx, core.Start{Principal: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{3, 1} {
		before := st.Stats().Statements
		res, err := c.Execute(ctx, gate.Invocation{SessionID: s.ID, Tool: "noop", Args: json.RawMessage(`{}`), RequestID: "r1", Origin: gate.OriginAPI, Principal: "ann"})
		if err != nil || res.Status != "success" {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
		if n := st.Stats().Statements - before; n != want {
			t.Errorf("call %d ran %d statements; want %d", i, n, want)
		}
	}
}
