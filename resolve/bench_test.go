package resolve_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/catalogtest"
	"github.com/agentplane/agentplane/resolve"
)

// BenchmarkNewIndex measures indexing a catalog at load time.
func BenchmarkNewIndex(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			cat := catalogtest.Generate(n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := resolve.NewIndex(cat.Items); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoadJSON measures loading a provider's JSON body of 1M items:
// decoding, checking and indexing, as an HTTP provider refresh does.
func BenchmarkLoadJSON(b *testing.B) {
	cat := catalogtest.Generate(1_000_000)
	wire := make([]resolve.WireItem, len(cat.Items))
	for i, it := range cat.Items {
		wire[i] = resolve.WireItem{ID: it.Header.ID, DisplayName: it.Header.DisplayName, Aliases: it.Aliases, Keywords: it.Keywords, UsageCount: it.UsageCount}
	}
	body, err := json.Marshal(wire)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		items, err := resolve.DecodeItems(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := resolve.NewIndex(items); err != nil {
			b.Fatal(err)
		}
	}
}
