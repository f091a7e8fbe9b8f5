package core_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/mcpclient"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/tool"
)

// TestOneDoor: neither the core nor a view of its configuration hands out
// the gate, the store, the tool registry, a tool (whose Call runs it
// around the gate) or an MCP server (whose tools do): a session is written through the core's methods only.
// (The router it hands out is pure: it decides and records nothing.)
func TestOneDoor(t *testing.T) {
	forbidden := []reflect.Type{
		reflect.TypeFor[*gate.Gate](), reflect.TypeFor[store.Store](), reflect.TypeFor[*tool.Registry](), reflect.TypeFor[tool.Tool](),
		reflect.TypeFor[*mcpclient.Server](), // its Tools run around the gate
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[*core.Core](), reflect.TypeFor[core.View]()} {
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			for j := range m.Type.NumOut() {
				out := m.Type.Out(j)
				for out.Kind() == reflect.Slice || out.Kind() == reflect.Map {
					out = out.Elem()
				}
				for _, f := range forbidden {
					if out == f || out.Kind() == reflect.Struct && hasField(out, f) {
						t.Errorf("%s.%s hands out %s", typ, m.Name, f)
					}
				}
			}
		}
	}
}

// hasField reports whether a struct has an exported field of type f.
func hasField(s reflect.Type, f reflect.Type) bool {
	for i := range s.NumField() {
		if fl := s.Field(i); fl.IsExported() && fl.Type == f {
			return true
		}
	}
	return false
}

// TestDoorAfterReload: the core's writes of a session run on the
// configuration in force when they are made — an LLM exchange recorded
// after a Reload names the new configuration, a proposal is checked
// against the schema of the tool in force (arguments it refuses are
// invalid_args and record nothing) and is kept in canonical form.
func TestDoorAfterReload(t *testing.T) {
	c := demotest.Core(t, nil)
	ctx := context.Background()
	s := startSession(t, c, "sales")
	before := c.Digest()
	if _, err := c.RecordExchange(ctx, s.ID, "p", nil, &agentplane.LLMExchange{Model: "m"}); err != nil {
		t.Fatal(err)
	}
	after, err := c.Reload(ctx, parse(t, changed))
	if err != nil || after == before {
		t.Fatalf("reload: %s %v", after, err)
	}
	seq, err := c.RecordExchange(ctx, s.ID, "p", nil, &agentplane.LLMExchange{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := c.Records(ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[len(recs)-1]; got.Seq != seq || got.Config != after || recs[1].Config != before {
		t.Fatalf("exchange records name %s then %s, want %s then %s", recs[1].Config, got.Config, before, after)
	}
	base, _ := c.Session(ctx, s.ID)
	_, err = c.Propose(ctx, core.Proposal{Base: base, Principal: "p", Tool: demo.SendTemplateTool, Args: json.RawMessage(`{"list_id":7}`), Question: "Send?"})
	if agentplane.ErrorCode(err) != agentplane.CodeInvalidArgs {
		t.Fatalf("arguments the schema refuses: %v, want invalid_args", err)
	}
	if n, _ := c.Records(ctx, s.ID, seq); len(n) != 0 {
		t.Fatalf("a refused proposal recorded %d records", len(n))
	}
	d, err := c.Propose(ctx, core.Proposal{Base: base, Principal: "p", Tool: demo.SendTemplateTool, Args: json.RawMessage(`{ "list_id" : "LIST-9" }`), Question: "Send?"})
	if err != nil || d.Session.PendingConfirmation == nil || string(d.Session.PendingConfirmation.Args) != `{"list_id":"LIST-9"}` {
		t.Fatalf("proposal: %+v %v", d, err)
	}
}

// TestReady: the core is ready while its store answers, and says the
// store is not once it cannot.
func TestReady(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := demotest.Core(t, &core.Options{Store: st})
	if err := c.Ready(context.Background()); err != nil {
		t.Fatalf("ready: %v", err)
	}
	st.Close()
	if err := c.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "store") {
		t.Fatalf("a closed store: %v, want the store's error", err)
	}
}
