package replay_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
)

const loansYAML = `version: 1
modes: [{key: general, default: true, toolboxes: [t]}]
toolboxes: [{id: t, providers: [loans], commands: [open_loan, approve_loan]}]
commands:
  - {id: open_loan, tool: agent_set_active_entity, parameter: loan, resolver: {provider: loans}, sets_active_context: true, active_entity_type: loan,
     triggers: ["open [the] {item} loan"]}
  - {id: approve_loan, tool: agent_set_active_entity, parameter: loan, resolver: {provider: loans}, requires_confirmation: true,
     triggers: ["approve [the] {item} loan"]}
`

// loans is a provider whose answer the test changes, counting its calls.
type loans struct {
	mu    sync.Mutex
	items []agentplane.ResolverItem
	calls atomic.Int64
}

func (l *loans) set(names ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = nil
	for i, n := range names {
		l.items = append(l.items, agentplane.ResolverItem{Header: agentplane.EntityHeader{ID: "L-" + string(rune('1'+i)), DisplayName: n}})
	}
}

func (l *loans) Items(context.Context) ([]agentplane.ResolverItem, error) {
	l.calls.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.items, nil
}

// TestReplayServesProviderVersions: a session whose provider changes its
// items between two turns names each answer in its decisions, the store
// keeps both, and replay decides each turn on the answer it read — with
// no divergence and without calling the provider, whatever it answers
// now. Without the kept answers replay asks the provider, says so, and
// diverges; with another answer in place of the recorded one it
// diverges.
func TestReplayServesProviderVersions(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	p := &loans{}
	p.set("Oak street", "Elm road")
	var mu sync.Mutex
	clock := demotest.Start
	opts := demotest.Options(&core.Options{Store: st, Providers: map[string]resolve.Provider{"loans": p},
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); clock = clock.Add(time.Second); return clock }})
	c := demotest.WithYAML(t, []byte(loansYAML), &opts)
	s, err := c.Start(ctx, core.Start{Principal: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	turn := func(text, want string) {
		t.Helper()
		got, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: text}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Decision.ResolvedID != want {
			t.Fatalf("%q resolved to %q, want %q: %v", text, got.Decision.ResolvedID, want, got.Decision.Trace)
		}
	}
	turn("open the oak street loan", "L-1")
	// the provider answers otherwise once its items are older than the TTL
	p.set("Maple avenue", "Oak street")
	mu.Lock()
	clock = clock.Add(2 * resolve.DefaultTTL)
	mu.Unlock()
	turn("open the oak street loan", "L-2")
	// a confirmation: the yes reads no item, but the gate checks it
	// against the provider's answer, which the decision names too
	turn("approve the maple avenue loan", "L-1")
	turn("yes", "L-1")

	recs, err := c.Records(ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
	var versions []string
	named := map[int64]string{} // record -> the answer its decision names
	for _, r := range recs {
		if r.Decision != nil {
			versions = append(versions, r.Decision.Sources["provider:loans"])
			named[r.Seq] = r.Decision.Sources["provider:loans"]
		}
	}
	if len(versions) != 4 || versions[0] == versions[1] || !strings.HasPrefix(versions[0], "sha256:") || versions[2] != versions[1] || versions[3] != versions[1] {
		t.Fatalf("the decisions name the answers %q", versions)
	}
	for _, v := range versions {
		if _, ok, err := st.CatalogVersion(ctx, v); !ok || err != nil {
			t.Fatalf("the store does not keep %s: %v", v, err)
		}
	}

	p.set("Birch lane") // what it answers during the replays: neither recorded answer
	calls := p.calls.Load()
	var fell []replay.Fallback
	report := &replay.Options{Fallback: func(f replay.Fallback) { fell = append(fell, f) }}
	divs, err := replay.Session(ctx, c, recs, report)
	if err != nil || len(divs) != 0 || len(fell) != 0 {
		t.Fatalf("replayed on the kept answers: %v, divergences %+v, read live %+v", err, divs, fell)
	}
	if n := p.calls.Load() - calls; n != 0 {
		t.Fatalf("replay called the provider %d times", n)
	}

	t.Run("NotKept", func(t *testing.T) {
		fell = nil
		o := *report
		o.Items = func(context.Context, string) (*resolve.Index, bool, error) { return nil, false, nil }
		divs, err := replay.Session(ctx, c, recs, &o)
		if err != nil || len(divs) == 0 {
			t.Fatalf("answers not kept, provider changed: %v, %d divergences", err, len(divs))
		}
		// each record read live until the replay diverged (the yes then
		// answers no question and reads nothing)
		if len(fell) < 3 || fell[0].Version != versions[0] || fell[1].Version != versions[1] || !strings.Contains(fell[0].String(), "does not keep it; asked the live provider") {
			t.Fatalf("the reads answered live: %+v", fell)
		}
		for _, f := range fell {
			if f.Version != named[f.Seq] || f.Source != "provider:loans" {
				t.Fatalf("a read answered live: %+v, the record names %s", f, named[f.Seq])
			}
		}
		if p.calls.Load() == calls {
			t.Fatal("the provider was not asked")
		}
	})
	t.Run("Overridden", func(t *testing.T) {
		fell = nil
		calls := p.calls.Load()
		later, _, _ := st.CatalogVersion(ctx, versions[1])
		o := *report
		o.Items = func(context.Context, string) (*resolve.Index, bool, error) {
			ix, err := resolve.StoredIndex(versions[1], later)
			return ix, err == nil, err
		}
		divs, err := replay.Session(ctx, c, recs, &o)
		if err != nil || len(divs) == 0 || len(fell) != 0 {
			t.Fatalf("the later answer in place of the first: %v, %d divergences, read live %+v", err, len(divs), fell)
		}
		if divs[0].Field != "decision" || !strings.Contains(string(divs[0].Recorded), `"resolved_id":"L-1"`) || !strings.Contains(string(divs[0].Replayed), `"resolved_id":"L-2"`) {
			t.Fatalf("the first divergence: %+v", divs[0])
		}
		if n := p.calls.Load() - calls; n != 0 {
			t.Fatalf("replay called the provider %d times", n)
		}
	})
	t.Run("RunReportsReadsAnsweredLive", func(t *testing.T) {
		var log, out strings.Builder
		for _, r := range recs {
			log.Write(r.Raw)
			log.WriteByte('\n')
		}
		o := replay.Options{Items: func(context.Context, string) (*resolve.Index, bool, error) { return nil, false, nil }}
		n, err := replay.Run(ctx, c, strings.NewReader(log.String()), &out, &o)
		if err != nil || n == 0 || !strings.Contains(out.String(), "record 2 (turn): provider:loans "+versions[0]) || !strings.Contains(out.String(), "record 3 (turn): provider:loans "+versions[1]) || !strings.Contains(out.String(), "asked the live provider") {
			t.Fatalf("%d divergences, %v:\n%s", n, err, out.String())
		}
	})
}

var _ store.CatalogVersions = (*memstore.Store)(nil)

// TestReplayServesExecutionReads: an execution that is not a turn (here
// an API intent naming a command) reads the provider in the gate's
// checks only; its record names that answer (Record.Sources) and replay
// serves it.
func TestReplayServesExecutionReads(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	p := &loans{}
	p.set("Oak street", "Elm road")
	opts := demotest.Options(&core.Options{Store: st, Providers: map[string]resolve.Provider{"loans": p}})
	c := demotest.WithYAML(t, []byte(loansYAML), &opts)
	s, err := c.Start(ctx, core.Start{Principal: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Intent(ctx, gate.IntentRequest{SessionID: s.ID, Principal: "ann",
		Intent: agentplane.Intent{Type: agentplane.IntentActionCall, Action: "open_loan", Args: json.RawMessage(`{"loan":"L-2"}`)}})
	if err != nil || res.Status != agentplane.StatusSuccess {
		t.Fatalf("%v %+v", err, res)
	}
	recs, err := c.Records(ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if v := last.Sources["provider:loans"]; !strings.HasPrefix(v, "sha256:") || last.Decision != nil {
		t.Fatalf("the execution names %v", last.Sources)
	}
	p.set("Birch lane")
	calls := p.calls.Load()
	var fell []replay.Fallback
	divs, err := replay.Session(ctx, c, recs, &replay.Options{Fallback: func(f replay.Fallback) { fell = append(fell, f) }})
	if err != nil || len(divs) != 0 || len(fell) != 0 || p.calls.Load() != calls {
		t.Fatalf("%v, divergences %+v, read live %+v, %d provider calls", err, divs, fell, p.calls.Load()-calls)
	}
}
