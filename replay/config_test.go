package replay_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/store/memstore"
)

// TestReplayAcrossConfigurations: a session decided partly on
// configuration A and partly on B (a reload, or an instance already on B)
// replays without divergence, each record on the configuration it names,
// which the store kept; replayed on B alone (replay --config), the
// records A decided diverge.
func TestReplayAcrossConfigurations(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	opts := demotest.Options(&core.Options{Store: st})
	a := demotest.WithYAML(t, demo.YAML, &opts)
	b := demotest.WithYAML(t, bytes.Replace(demo.YAML, []byte("display_name: Sales"), []byte("display_name: Selling"), 1), &opts)
	if a.Digest() == b.Digest() || len(a.Digest()) != 64 {
		t.Fatalf("digests %q and %q", a.Digest(), b.Digest())
	}
	s, err := a.Start(ctx, core.Start{Principal: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	turn := func(c *core.Core, text string) {
		t.Helper()
		if _, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: text}}); err != nil {
			t.Fatal(err)
		}
	}
	turn(a, "switch to sales mode")
	turn(a, "switch to ddr mode")
	turn(b, "switch to sales mode")
	turn(b, "open the q1 cfo outreach template")
	recs, err := b.Records(ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, r := range recs {
		names[r.Config]++
	}
	if names[a.Digest()] != 3 || names[b.Digest()] != 2 {
		t.Fatalf("records by configuration: %v", names)
	}
	divs, err := replay.Session(ctx, b, recs, nil)
	if err != nil || len(divs) != 0 {
		t.Fatalf("replayed on the recorded configurations: %v %+v", err, divs)
	}
	divs, err = replay.Session(ctx, b, recs, &replay.Options{Fixed: true})
	if err != nil || len(divs) == 0 {
		t.Fatalf("every record on B: no divergence (%v): the test shows nothing", err)
	}
	if !strings.Contains(string(divs[0].Recorded), "Sales") || divs[0].Seq > 3 {
		t.Errorf("the first divergence on B alone: %+v", divs[0])
	}
	// a store that does not keep A: its records are replayed on B, and diverge
	other := demotest.WithYAML(t, bytes.Replace(demo.YAML, []byte("display_name: Sales"), []byte("display_name: Selling"), 1), nil)
	if divs, err := replay.Session(ctx, other, recs, nil); err != nil || len(divs) == 0 {
		t.Fatalf("A not kept: %v, %d divergences", err, len(divs))
	}
}
