// Package resolve turns what a person typed into catalog items: the
// normalizer, the catalog index and its tiers (exact → token → prefix →
// fuzzy), and the sources that serve indexes — static catalogs from
// configuration, and providers (Go code or HTTP endpoints) cached for a TTL.
//
//	ix, _ := resolve.NewIndex(items)
//	r := ix.Resolve("q1 cfo outr", 5)
//	if r.Strict() { /* exactly one item at the exact tier: act on it */ }
//	for _, i := range r.Items { fmt.Println(ix.Item(i).Header.ID, r.Tier) }
//
// An index is built once and read concurrently. Every query does bounded
// work whatever the catalog, and the same query over the same items always
// gives the same answer.
package resolve
