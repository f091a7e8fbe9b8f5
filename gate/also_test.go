package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/tool"
)

// TestAlsoCommitsWithTheResult: a caller's writes built from the result
// are committed with it; writes that fail leave the result committed
// alone (the tool ran: its record must stay), and the tool is not run
// again.
func TestAlsoCommitsWithTheResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ext := store.Extension{Name: "also", Migrations: map[string][]string{store.SQLite: {`CREATE TABLE also_rows (request TEXT, status TEXT)`}}}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"), &sqlite.Options{Extensions: []store.Extension{ext}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var sends atomic.Int32
	send := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		sends.Add(1)
		return json.RawMessage(`{"sent":true}`), nil
	}
	g := demotest.Core(t, &core.Options{Store: st, Programs: demo.SendWith(tool.Program(send))})
	if _, err := g.Open(ctx, gate.Opening{SessionID: "s", Mode: "sales"}); err != nil {
		t.Fatal(err)
	}
	rows := func() []string {
		var out []string
		if err := st.Query(ctx, `SELECT request || ' ' || status FROM also_rows`, nil, func(scan func(...any) error) error {
			var s string
			out = append(out, s)
			return scan(&out[len(out)-1])
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	insert := func(id string, fail bool) *gate.Also {
		return &gate.Also{Ops: func(res agentplane.ExecutionResult) []store.Op {
			return []store.Op{store.OpFunc(func(ctx context.Context, tx store.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO also_rows (request, status) VALUES (?, ?)`, id, string(res.Status)); err != nil {
					return err
				}
				if fail {
					return errors.New("lease lost")
				}
				return nil
			})}
		}}
	}
	exec := func(id string, also *gate.Also) agentplane.ExecutionResult {
		t.Helper()
		res, err := g.Execute(ctx, gate.Invocation{SessionID: "s", Tool: "send_template", Args: json.RawMessage(`{"list_id":"LIST-9"}`),
			Origin: gate.OriginAPI, Principal: "ann", RequestID: id, Also: also})
		if err != nil || res.Status != agentplane.StatusSuccess {
			t.Fatalf("%s: %+v %v", id, res, err)
		}
		return res
	}

	ok := insert("r1", false)
	res := exec("r1", ok)
	if !ok.Written || len(rows()) != 1 || rows()[0] != "r1 success" {
		t.Fatalf("written %v, rows %q", ok.Written, rows())
	}
	failing := insert("r2", true)
	res2 := exec("r2", failing)
	if failing.Written || len(rows()) != 1 {
		t.Fatalf("a failed write: written %v, rows %q", failing.Written, rows())
	}
	if sends.Load() != 2 || res2.Seq != res.Seq+1 {
		t.Fatalf("%d sends; records %d then %d", sends.Load(), res.Seq, res2.Seq)
	}
	recs, err := st.Records(ctx, "s", 0)
	if err != nil || recs[len(recs)-1].Seq != res2.Seq || recs[len(recs)-1].Result.Status != agentplane.StatusSuccess {
		t.Fatalf("the result of r2 is not in the chain: %v", err)
	}
	// Asked again, r2 answers from its record: nothing runs, nothing is built.
	again := insert("r2", false)
	if r := exec("r2", again); again.Written || r.Seq != res2.Seq || sends.Load() != 2 {
		t.Fatalf("a repeated request: written %v, seq %d, %d sends", again.Written, r.Seq, sends.Load())
	}
}

// TestAlsoKeepsTheResult: a caller whose writes keep the result (Keeps:
// a workflow's task state) spares the request key's row — only for an
// invocation that claimed nothing (a read tool's), and only when its
// writes committed with the result. Every other case stores the result
// under the key, and a repeat of the request answers from it without
// running anything.
func TestAlsoKeepsTheResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ext := store.Extension{Name: "also", Migrations: map[string][]string{store.SQLite: {`CREATE TABLE also_rows (request TEXT)`}}}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"), &sqlite.Options{Extensions: []store.Extension{ext}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var runs atomic.Int32
	count := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`{}`), nil
	}
	yaml := []byte("version: 1\nmodes: [{key: m, default: true, toolboxes: [t]}]\ntoolboxes: [{id: t, catalogs: [modes], tools: [look, act]}]\n")
	spec := func(name string, impact tool.Impact) tool.Spec {
		return tool.Spec{Name: name, Usage: "Counts its runs.", Impact: impact, Risk: tool.RiskLow, InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	g := demotest.WithYAML(t, yaml, &core.Options{Store: st, Tools: []tool.Tool{
		&tool.Func{S: spec("look", tool.ImpactRead), Fn: count},
		&tool.Func{S: spec("act", tool.ImpactInternal), Fn: count},
	}})
	if _, err := g.Open(ctx, gate.Opening{SessionID: "s", Mode: "m"}); err != nil {
		t.Fatal(err)
	}
	const (
		none    = iota // Ops builds nothing
		written        // Ops' write commits
		failed         // Ops' write fails: the result is committed alone
	)
	for i, c := range []struct {
		tool   string
		keeps  bool
		writes int
		kept   bool // the key holds the result afterwards
	}{
		{"look", true, written, false},
		{"look", true, failed, true},
		{"look", true, none, true},
		{"look", false, written, true},
		{"act", true, written, true}, // claimed before it ran: the key holds it
		{"act", true, failed, true},
		{"act", false, written, true},
	} {
		id := fmt.Sprintf("r%d", i)
		also := &gate.Also{Keeps: c.keeps, Ops: func(agentplane.ExecutionResult) []store.Op {
			if c.writes == none {
				return nil
			}
			return []store.Op{store.OpFunc(func(ctx context.Context, tx store.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO also_rows (request) VALUES (?)`, id); err != nil {
					return err
				}
				if c.writes == failed {
					return errors.New("lease lost")
				}
				return nil
			})}
		}}
		exec := func(also *gate.Also) agentplane.ExecutionResult {
			t.Helper()
			res, err := g.Execute(ctx, gate.Invocation{SessionID: "s", Tool: c.tool, Args: json.RawMessage(`{}`), Origin: gate.OriginWorkflow, Principal: "ann", RequestID: id, Also: also})
			if err != nil || res.Status != agentplane.StatusSuccess {
				t.Fatalf("case %d %+v: %+v %v", i, c, res, err)
			}
			return res
		}
		before := runs.Load()
		res := exec(also)
		if also.Written != (c.writes == written) {
			t.Errorf("case %d %+v: written %v", i, c, also.Written)
		}
		held, ok, err := st.Request(ctx, store.RequestKey{SessionID: "s", Principal: "ann", RequestID: id})
		if err != nil || ok != c.kept {
			t.Errorf("case %d %+v: the key holds a result: %v (%v), want %v", i, c, ok, err, c.kept)
			continue
		}
		if !ok {
			continue
		}
		if held.Result == nil || held.Result.Seq != res.Seq && held.Result.Seq != 0 || held.State != store.RequestDone {
			t.Errorf("case %d %+v: the key holds %+v", i, c, held)
		}
		if r := exec(nil); r.Seq != res.Seq || runs.Load() != before+1 {
			t.Errorf("case %d %+v: a repeat ran again (%d runs) or answered record %d, not %d", i, c, runs.Load()-before, r.Seq, res.Seq)
		}
	}
}
