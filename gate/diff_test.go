package gate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
)

// TestStateDiffIsAPatch applies the diff with a minimal RFC 6902 applier
// over generic JSON and checks it turns before into after.
func TestStateDiffIsAPatch(t *testing.T) {
	h := agentplane.EntityHeader{ID: "TPL-1", DisplayName: "One"}
	cases := []struct{ before, after agentplane.Session }{
		{agentplane.Session{ID: "s", Mode: "general", Version: 1}, agentplane.Session{ID: "s", Mode: "ddr", Version: 2}},
		{agentplane.Session{ID: "s", Mode: "sales", Version: 2}, agentplane.Session{ID: "s", Mode: "sales", Version: 3,
			AWC: agentplane.ActiveWorkContext{Domain: "sales", EntityType: "email_template", Entity: &h,
				RelatedEntities: []agentplane.RelatedEntityRef{{EntityType: "persona", Header: agentplane.EntityHeader{ID: "P"}, Role: "audience"}}}}},
		{agentplane.Session{ID: "s", Mode: "sales", Version: 3, AWC: agentplane.ActiveWorkContext{EntityType: "t", Entity: &h},
			PendingConfirmation: &agentplane.PendingConfirmation{CommandID: "c", ResolvedID: "x"}},
			agentplane.Session{ID: "s", Mode: "sales", Version: 4, PendingPicker: &agentplane.PendingPicker{CommandID: "p"}}},
	}
	for i, c := range cases {
		ops, err := stateDiff(&c.before, &c.after)
		if err != nil {
			t.Fatal(err)
		}
		doc := toGeneric(t, &c.before)
		for _, op := range ops {
			apply(t, doc, op)
		}
		want := toGeneric(t, &c.after)
		a, _ := json.Marshal(doc)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Errorf("case %d: patched\n%s\nwant\n%s\nops %+v", i, a, b, ops)
		}
	}
	if ops, _ := stateDiff(&cases[0].before, &cases[0].before); ops == nil || len(ops) != 0 {
		t.Fatalf("equal states: %+v", ops)
	}
}

func toGeneric(t *testing.T, s *agentplane.Session) map[string]any {
	b, _ := json.Marshal(s)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// apply applies add/replace/remove at paths of depth one or two.
func apply(t *testing.T, doc map[string]any, op agentplane.PatchOp) {
	parts := strings.Split(op.Path[1:], "/")
	parent := doc
	if len(parts) == 2 {
		parent = doc[parts[0]].(map[string]any)
	}
	key := parts[len(parts)-1]
	switch op.Op {
	case "add", "replace":
		if op.Op == "replace" {
			if _, ok := parent[key]; !ok {
				t.Fatalf("replace of missing %s", op.Path)
			}
		}
		var v any
		json.Unmarshal(op.Value, &v)
		parent[key] = v
	case "remove":
		if _, ok := parent[key]; !ok {
			t.Fatalf("remove of missing %s", op.Path)
		}
		delete(parent, key)
	}
}
