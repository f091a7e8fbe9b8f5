// Package catalogtest generates large, deterministic catalogs and routing
// workloads for benchmarks.
package catalogtest

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/agentplane/agentplane"
)

var syllables = []string{
	"ka", "lo", "mi", "ren", "tas", "vor", "qui", "del", "bra", "sto", "nex", "ul", "pha", "gri", "mon",
	"zel", "ta", "ri", "com", "vin", "ar", "ost", "pel", "dra", "ker", "sil", "fen", "ho", "lum", "tri",
}

// Vocabulary returns n distinct pseudo-words of 4 to 11 letters, the same
// for the same n.
func Vocabulary(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	seen := make(map[string]bool, n)
	words := make([]string, 0, n)
	for len(words) < n {
		var b strings.Builder
		for k := 2 + r.IntN(3); k > 0; k-- {
			b.WriteString(syllables[r.IntN(len(syllables))])
		}
		w := b.String()
		if len(w) < 4 || seen[w] {
			continue
		}
		seen[w] = true
		words = append(words, w)
	}
	return words
}

// Catalog is a generated catalog with the vocabulary it was built from.
type Catalog struct {
	Items []agentplane.ResolverItem
	Words []string
}

// Generate returns n items named with three words of a vocabulary that
// grows with n (word frequencies are skewed, like real names), with
// aliases on some and keywords on all. The same n gives the same catalog.
func Generate(n int) Catalog {
	vocab := Vocabulary(max(500, min(n/20, 40000)))
	r := rand.New(rand.NewPCG(uint64(n), 7))
	pick := func() string {
		// skewed: low indexes are common words
		i := int(float64(len(vocab)) * r.Float64() * r.Float64())
		return vocab[i]
	}
	items := make([]agentplane.ResolverItem, n)
	for i := range items {
		name := title(pick()) + " " + title(pick()) + " " + title(pick())
		it := agentplane.ResolverItem{
			Header:     agentplane.EntityHeader{ID: fmt.Sprintf("ITEM-%07d", i), DisplayName: name},
			Keywords:   []string{pick(), pick()},
			UsageCount: int64(r.IntN(100)),
		}
		if r.IntN(10) < 3 {
			it.Aliases = []string{pick() + " " + pick()}
		}
		items[i] = it
	}
	return Catalog{Items: items, Words: vocab}
}

// Workload returns n user turns against the catalog, mixed as 25% exact
// names, 20% names with a typo, 20% partial names, 15% misses and 20%
// ordinary chat that no trigger matches. Turns that name an item use the
// form "open the NAME".
func (c Catalog) Workload(n int) []string {
	r := rand.New(rand.NewPCG(uint64(n), 11))
	chat := []string{
		"what is the weather like in paris today",
		"can you summarise the last meeting for me",
		"rewrite this paragraph to sound friendlier",
		"i played dune yesterday and loved it",
		"should i open the quarterly report now?",
		"thanks, that was helpful",
	}
	out := make([]string, n)
	for i := range out {
		item := c.Items[r.IntN(len(c.Items))]
		words := strings.Fields(strings.ToLower(item.Header.DisplayName))
		switch k := r.IntN(100); {
		case k < 25:
			out[i] = "open the " + item.Header.DisplayName
		case k < 45:
			j := r.IntN(len(words))
			w := []byte(words[j])
			p := 1 + r.IntN(len(w)-1)
			w[p] = byte('a' + (int(w[p]-'a')+1+r.IntN(24))%26)
			words[j] = string(w)
			out[i] = "open the " + strings.Join(words, " ")
		case k < 65:
			out[i] = "open the " + words[0] + " " + words[1][:min(len(words[1]), 3)]
		case k < 80:
			out[i] = fmt.Sprintf("open the zyx%d qwv%d", r.IntN(1000), r.IntN(1000))
		default:
			out[i] = chat[r.IntN(len(chat))]
		}
	}
	return out
}

// title capitalizes an ASCII word.
func title(w string) string { return strings.ToUpper(w[:1]) + w[1:] }
