package resolve

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
)

func loanItems(names ...string) []agentplane.ResolverItem {
	var items []agentplane.ResolverItem
	for i, n := range names {
		items = append(items, agentplane.ResolverItem{Header: agentplane.EntityHeader{ID: "L-" + string(rune('1'+i)), DisplayName: n},
			Aliases: []string{strings.ToLower(n)}, Related: []agentplane.RelatedEntityRef{{EntityType: "person", Role: "owner", Header: agentplane.EntityHeader{ID: "P-1", DisplayName: "Ann"}}}})
	}
	return items
}

// TestVersioned: an answer's version is the digest of its items'
// canonical JSON — the same items give the same version, other items
// another — and the body indexes back to the same items and version.
func TestVersioned(t *testing.T) {
	t.Parallel()
	v1, body, err := Versioned(loanItems("Oak street", "Elm road"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v1, VersionPrefix) || len(v1) != len(VersionPrefix)+64 || VersionOf(body) != v1 {
		t.Fatalf("version %q of %s", v1, body)
	}
	if again, _, _ := Versioned(loanItems("Oak street", "Elm road")); again != v1 {
		t.Fatalf("the same items: %s, then %s", v1, again)
	}
	if other, _, _ := Versioned(loanItems("Oak street", "Maple avenue")); other == v1 {
		t.Fatal("other items, the same version")
	}
	ix, err := StoredIndex(v1, body)
	if err != nil || ix.Version() != v1 {
		t.Fatalf("stored index: %v %v", ix, err)
	}
	if it, ok := ix.Lookup("L-2"); !ok || it.Header.DisplayName != "Elm road" || it.Related[0].Header.DisplayName != "Ann" {
		t.Fatalf("L-2 read back as %+v", it)
	}
	if back, _, _ := Versioned(ix.items); back != v1 {
		t.Fatalf("the stored items version as %s, not %s", back, v1)
	}
	if _, err := StoredIndex(v1, append(body[:len(body)-1:len(body)-1], ' ', ']')); err == nil {
		t.Fatal("a body that is not the version's was indexed")
	}
}

// pins serves one index for every source, counting its calls.
type pins struct {
	ix    *Index
	calls int
}

func (p *pins) Pinned(context.Context, agentplane.ResolverSource) (*Index, bool) {
	p.calls++
	return p.ix, p.ix != nil
}

func (p *pins) Named(agentplane.ResolverSource) bool { return p.ix != nil }

// TestProviderKeepsAndPins: a provider's answer is kept by its version
// before it is served, and an answer that cannot be kept is not served;
// in a context with pins the pinned answer is served and the provider
// is not asked.
func TestProviderKeepsAndPins(t *testing.T) {
	t.Parallel()
	var fetches atomic.Int64
	p := ProviderFunc(func(context.Context) ([]agentplane.ResolverItem, error) {
		fetches.Add(1)
		return loanItems("Oak street"), nil
	})
	kept := map[string]string{}
	var refuse bool
	src := NewProviderSource(agentplane.ResolverSource{ProviderID: "loans"}, p, time.Minute, func() time.Time { return time.Unix(0, 0) })
	src.Keep(func(_ context.Context, version string, body []byte) error {
		if refuse {
			return errors.New("disk full")
		}
		kept[version] = string(body)
		return nil
	})
	ctx := context.Background()
	ix, _, err := src.Index(ctx)
	if err != nil || ix.Version() == "" || kept[ix.Version()] == "" || VersionOf([]byte(kept[ix.Version()])) != ix.Version() {
		t.Fatalf("served %v (%v), kept %v", ix, err, kept)
	}

	other := NewProviderSource(agentplane.ResolverSource{ProviderID: "loans"}, p, time.Minute, nil)
	refuse = true
	other.Keep(src.keep)
	if _, _, err := other.Index(ctx); err == nil || !strings.Contains(err.Error(), "keep items") || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("an answer that was not kept: %v", err)
	}

	_, body, _ := Versioned(loanItems("Maple avenue"))
	stored, err := StoredIndex(VersionOf(body), body)
	if err != nil {
		t.Fatal(err)
	}
	before := fetches.Load()
	pin := &pins{ix: stored}
	fresh := NewProviderSource(agentplane.ResolverSource{ProviderID: "loans"}, p, time.Minute, nil)
	pctx := WithPins(ctx, pin)
	if got, _, err := fresh.Index(pctx); err != nil || got != stored {
		t.Fatalf("pinned Index served %v, %v", got, err)
	}
	if got := fresh.Current(pctx); got != stored {
		t.Fatalf("pinned Current served %v", got)
	}
	if fetches.Load() != before || pin.calls != 2 || fresh.Current(ctx) != nil {
		t.Fatalf("the provider was asked %d times under pins", fetches.Load()-before)
	}
	// a source the pins hold nothing for asks its provider
	if got, _, err := fresh.Index(WithPins(ctx, &pins{})); err != nil || got == stored || fetches.Load() != before+1 {
		t.Fatalf("unpinned: %v %v, %d fetches", got, err, fetches.Load()-before)
	}
}
