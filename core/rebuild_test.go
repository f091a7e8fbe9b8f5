package core_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
)

// TestRebuild: a core rebuilt over a changed configuration routes with
// the change, on its own store and with the parent's programs; the parent
// is left as it was, before and after the rebuilt one is closed.
func TestRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parent := demotest.Core(t, nil)
	cfg := *parent.Config()
	cfg.Catalogs = slices.Clone(cfg.Catalogs)
	i := slices.IndexFunc(cfg.Catalogs, func(c agentplane.Catalog) bool { return c.ID == "email_templates" })
	cfg.Catalogs[i].Items = []agentplane.ResolverItem{{Header: agentplane.EntityHeader{ID: "TPL-9", DisplayName: "Autumn Sale"}}}
	cfg.Router.ExampleThreshold = 0.9

	n, err := parent.Rebuild(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n.View().Registry().Settings().ExampleThreshold != 0.9 || parent.View().Registry().Settings().ExampleThreshold == 0.9 {
		t.Fatalf("thresholds: rebuilt %v, parent %v", n.View().Registry().Settings().ExampleThreshold, parent.View().Registry().Settings().ExampleThreshold)
	}
	route := func(c *core.Core, text string) agentplane.Decision {
		d, err := c.Route(ctx, &agentplane.Session{ID: "s", Mode: "general", Version: 1}, agentplane.TurnInput{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := route(n, "open the autumn sale template"); d.ResolvedID != "TPL-9" {
		t.Errorf("rebuilt: %+v", d)
	}
	if d := route(parent, "open the autumn sale template"); d.Action == agentplane.ActionInvokeCommand {
		t.Errorf("parent resolved the rebuilt core's item: %+v", d)
	}
	sess, err := n.Start(ctx, core.Start{Principal: "ann", Mode: "sales"})
	if err != nil {
		t.Fatal(err)
	}
	// the demo's program runs there (the parent's options), and its store is its own
	tn, err := n.Turn(ctx, core.TurnRequest{SessionID: sess.ID, Principal: "ann", Input: agentplane.TurnInput{Text: "open the autumn sale template"}})
	if err != nil || tn.Result == nil || tn.Result.Status != agentplane.StatusSuccess {
		t.Fatalf("turn on the rebuilt core: %+v %v", tn, err)
	}
	if _, err := parent.Session(ctx, sess.ID); err == nil {
		t.Error("the rebuilt core's session is in the parent's store")
	}
	n.Close()
	if d := route(parent, "switch to ddr mode"); d.ResolvedID != "ddr" {
		t.Errorf("parent after the rebuilt core closed: %+v", d)
	}
}
