package resolve

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
)

func item(id, name string, aliases, keywords []string, usage int64) agentplane.ResolverItem {
	return agentplane.ResolverItem{Header: agentplane.EntityHeader{ID: id, DisplayName: name}, Aliases: aliases, Keywords: keywords, UsageCount: usage}
}

func testIndex(t testing.TB) *Index {
	t.Helper()
	ix, err := NewIndex([]agentplane.ResolverItem{
		item("TPL-123", "Q1 CFO Outreach", []string{"cfo outreach"}, []string{"q1", "cfo"}, 0),
		item("TPL-124", "Q1 CTO Outreach", nil, []string{"cto"}, 5),
		item("TPL-200", "Renewal Reminder", []string{"renewal"}, nil, 0),
		item("TPL-201", "Renewal Reminder Final", nil, nil, 0),
		item("LIST-9", "Q1 pilot list", nil, nil, 0),
		item("dup-a", "Twin", nil, nil, 0),
		item("dup-b", "Twin", nil, nil, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func ids(ix *Index, r Result) string {
	var s []string
	for _, i := range r.Items {
		s = append(s, ix.Item(i).Header.ID)
	}
	return strings.Join(s, ",")
}

func TestResolveTiers(t *testing.T) {
	t.Parallel()
	ix := testIndex(t)
	tests := []struct {
		name   string
		query  string
		tier   Tier
		strict bool
		want   string
	}{
		{"ExactName", "q1 cfo outreach", TierExact, true, "TPL-123"},
		{"ExactNameNoisy", "  Q1 CFO-Outreach!", TierExact, true, "TPL-123"},
		{"ExactID", "tpl-123", TierExact, true, "TPL-123"},
		{"ExactAlias", "Renewal", TierExact, true, "TPL-200"},
		{"ExactAmbiguous", "twin", TierExact, false, "dup-a,dup-b"},
		{"TokenSet", "outreach cfo", TierToken, false, "TPL-123"},
		{"TokenKeywordRankOrder", "outreach q1", TierToken, false, "TPL-124,TPL-123"},
		{"Prefix", "renewal remind", TierPrefix, false, "TPL-200,TPL-201"},
		{"PrefixPartial", "pilot li", TierPrefix, false, "LIST-9"},
		{"Fuzzy", "renewel", TierFuzzy, false, "TPL-200,TPL-201"},
		{"FuzzyTransposition", "outraech cfo", TierFuzzy, false, "TPL-123"},
		{"Miss", "zebra", TierNone, false, ""},
		{"MissWithKnownWord", "cfo zebra", TierNone, false, ""},
		{"Empty", "  ", TierNone, false, ""},
		{"DigitsNotFuzzed", "tpl 124x", TierNone, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := ix.Resolve(tt.query, 10)
			if r.Tier != tt.tier || r.Strict() != tt.strict || ids(ix, r) != tt.want {
				t.Errorf("Resolve(%q) = tier %v strict %v items %q; want %v %v %q", tt.query, r.Tier, r.Strict(), ids(ix, r), tt.tier, tt.strict, tt.want)
			}
		})
	}
}

func TestResolveLimit(t *testing.T) {
	t.Parallel()
	ix := testIndex(t)
	r := ix.Resolve("q1", 1)
	if len(r.Items) != 1 || ix.Item(r.Items[0]).Header.ID != "TPL-124" {
		t.Fatalf("Resolve(q1, 1) = %q", ids(ix, r))
	}
}

func TestNewIndexErrors(t *testing.T) {
	t.Parallel()
	_, err := NewIndex([]agentplane.ResolverItem{item("a", "A", nil, nil, 0), item("a", "B", nil, nil, 0)})
	if err == nil || !strings.Contains(err.Error(), `duplicate id "a"`) {
		t.Fatalf("duplicate ids: err = %v", err)
	}
	_, err = NewIndex([]agentplane.ResolverItem{item("", "A", nil, nil, 0)})
	if err == nil || !strings.Contains(err.Error(), "empty id") {
		t.Fatalf("empty id: err = %v", err)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	ix := testIndex(t)
	if it, ok := ix.Lookup("LIST-9"); !ok || it.Header.DisplayName != "Q1 pilot list" {
		t.Fatalf("Lookup(LIST-9) = %v, %v", it, ok)
	}
	if _, ok := ix.Lookup("list-9"); ok {
		t.Fatal("Lookup is by exact id, yet list-9 was found")
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		max  int
		want int
	}{
		{"abc", "abc", 1, 0},
		{"abc", "abd", 1, 1},
		{"abc", "acb", 1, 1},
		{"abc", "a", 1, 2},
		{"kitten", "sitting", 2, 3},
		{"renewel", "renewal", 2, 1},
		{"café", "cafe", 1, 1},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b, tt.max); got != tt.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tt.a, tt.b, tt.max, got, tt.want)
		}
	}
}

// TestHostileItemsAndQueries: an item with a huge number of keywords is
// refused when indexed, naming it; an 80 KB query matches nothing. (The
// first made every turn that touched it take 16 s, the second took 16 s in
// catalog_search.)
func TestHostileItemsAndQueries(t *testing.T) {
	t.Parallel()
	many := make([]string, 200_000)
	for i := range many {
		many[i] = fmt.Sprintf("kw%d", i)
	}
	_, err := NewIndex([]agentplane.ResolverItem{{Header: agentplane.EntityHeader{ID: "BIG", DisplayName: "Big"}, Keywords: many}})
	if err == nil || !strings.Contains(err.Error(), `item 0 ("BIG"): 200001 distinct words`) {
		t.Fatalf("an item of 200,000 keywords: %v", err)
	}
	ix, err := NewIndex([]agentplane.ResolverItem{{Header: agentplane.EntityHeader{ID: "A", DisplayName: "Alpha centauri"}, Keywords: many[:MaxItemWords-2]}})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{strings.Repeat("a", 80_000), strings.Repeat("alpha ", 200), strings.Repeat("x", 100)} {
		if r := ix.Resolve(q, 5); len(r.Items) != 0 {
			t.Errorf("query of %d bytes matched %v", len(q), r.Items)
		}
	}
	if r := ix.Resolve("alpha centaury", 5); len(r.Items) != 1 {
		t.Fatalf("an ordinary typo: %+v", r)
	}
}

// TestClosenessAndLongTypos: among items matching a typo equally, the one
// whose name has as many words as the query comes first; two edits in a
// word of 8+ letters (two transpositions, two doubled letters) are found.
func TestClosenessAndLongTypos(t *testing.T) {
	t.Parallel()
	ix, err := NewIndex([]agentplane.ResolverItem{
		item("A1", "Ann Lindgren-Hay", nil, nil, 5),
		item("B2", "Ann Lindgren", nil, nil, 0),
		item("C3", "Catalonia Highlands", nil, nil, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := ix.Resolve("ann lindgen", 5); r.Tier != TierFuzzy || len(r.Items) != 2 || ix.Item(r.Items[0]).Header.ID != "B2" {
		t.Fatalf("closest first: %+v", r)
	}
	if r := ix.Resolve("ann lindgren", 5); !r.Strict() || ix.Item(r.Items[0]).Header.ID != "B2" {
		t.Fatalf("exact: %+v", r)
	}
	for _, q := range []string{"catlaonia hgihlands", "cattalonnia highlands", "catalonia hihglnads"} {
		if r := ix.Resolve(q, 5); len(r.Items) != 1 || ix.Item(r.Items[0]).Header.ID != "C3" {
			t.Errorf("%q: %+v", q, r)
		}
	}
}
