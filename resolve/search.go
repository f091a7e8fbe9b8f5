package resolve

import (
	"slices"
	"strings"
)

// Result is the outcome of resolving a query against an index.
type Result struct {
	Query     string  // the normalized query
	Tier      Tier    // the best tier any item matched at; TierNone when nothing matched
	Items     []int32 // matching items of that tier, best first, at most the limit asked for
	Truncated bool    // a work budget ran out: more items might match
}

// Strict reports whether the query identifies exactly one item at the exact
// tier: the only resolution the router may act on without asking.
func (r *Result) Strict() bool { return r.Tier == TierExact && len(r.Items) == 1 }

// Resolve matches query against the index, trying the tiers from exact to
// fuzzy and stopping at the first that matches anything. It returns at most
// limit items (limit ≥ 1), in rank order.
func (ix *Index) Resolve(query string, limit int) Result {
	return ix.resolveNormalized(Normalize(query), limit)
}

func (ix *Index) resolveNormalized(q string, limit int) Result {
	limit = max(limit, 1)
	res := Result{Query: q}
	if q == "" || len(ix.items) == 0 {
		return res
	}
	// exact
	if e, ok := ix.exact[q]; ok {
		res.Tier = TierExact
		for ; e >= 0 && len(res.Items) < limit; e = ix.exactNext[e] {
			res.Items = append(res.Items, ix.exactItem[e])
		}
		res.Truncated = e >= 0
		return res
	}
	var wordsBuf [maxWords]string
	words := Fields(wordsBuf[:0], q)
	if len(words) > maxWords || len(words) == 0 {
		return res
	}
	words = dedupWords(words)

	// token: every word is a known word of the item
	var idsBuf [maxWords]int32
	ids := idsBuf[:0]
	for _, w := range words {
		id, ok := ix.vocab[w]
		if !ok {
			break
		}
		ids = append(ids, id)
	}
	if len(ids) == len(words) {
		if ix.scanToken(ids, limit, &res); len(res.Items) > 0 {
			res.Tier = TierToken
			return res
		}
	}
	if ix.scanPrefix(words, limit, &res); len(res.Items) > 0 {
		res.Tier = TierPrefix
		return res
	}
	if ix.scanFuzzy(words, limit, &res); len(res.Items) > 0 {
		res.Tier = TierFuzzy
		return res
	}
	return res
}

func dedupWords(words []string) []string {
	out := words[:0]
	for i, w := range words {
		if !slices.Contains(words[:i], w) {
			out = append(out, w)
		}
	}
	return out
}

func (ix *Index) postings(word int32) []int32 {
	return ix.post[ix.postStart[word]:ix.postStart[word+1]]
}

func (ix *Index) wordsOf(item int32) []int32 {
	return ix.itemWords[ix.itemStart[item]:ix.itemStart[item+1]]
}

// scanToken walks the postings of the rarest word and keeps the items that
// hold every other word too.
func (ix *Index) scanToken(ids []int32, limit int, res *Result) {
	driver := 0
	for i := range ids {
		if len(ix.postings(ids[i])) < len(ix.postings(ids[driver])) {
			driver = i
		}
	}
	budget := scanBudget
	for _, item := range ix.postings(ids[driver]) {
		if budget--; budget < 0 {
			res.Truncated = true
			return
		}
		if ix.hasAll(item, ids, driver) {
			res.Items = append(res.Items, item)
			if len(res.Items) == limit {
				return
			}
		}
	}
}

func (ix *Index) hasAll(item int32, ids []int32, skip int) bool {
	iw := ix.wordsOf(item)
	for i, id := range ids {
		if i != skip && !slices.Contains(iw, id) {
			return false
		}
	}
	return true
}

// prefixRange returns the positions in ix.sorted of the words that start with p.
func (ix *Index) prefixRange(p string) (lo, hi int) {
	lo, _ = slices.BinarySearchFunc(ix.sorted, p, func(w int32, p string) int { return strings.Compare(ix.words[w], p) })
	hi = lo
	for hi < len(ix.sorted) && strings.HasPrefix(ix.words[ix.sorted[hi]], p) {
		hi++
		if hi-lo > prefixWidth {
			break
		}
	}
	return lo, hi
}

// scanPrefix keeps the items where every query word is a prefix of one of
// the item's words. The query word with the fewest postings drives the scan.
func (ix *Index) scanPrefix(words []string, limit int, res *Result) {
	driver, best := -1, 0
	var lo, hi int
	for i, w := range words {
		if len(w) < minPrefixLen {
			continue
		}
		l, h := ix.prefixRange(w)
		if h == l {
			return // no item has a word starting with w
		}
		if h-l > prefixWidth {
			continue // too broad to drive
		}
		total := 0
		for _, wid := range ix.sorted[l:h] {
			total += len(ix.postings(wid))
		}
		if driver < 0 || total < best {
			driver, best, lo, hi = i, total, l, h
		}
	}
	if driver < 0 {
		return
	}
	verify := func(item int32) bool {
		iw := ix.wordsOf(item)
		for i, w := range words {
			if i != driver && !ix.anyPrefix(iw, w) {
				return false
			}
		}
		return true
	}
	ix.scanUnion(ix.sorted[lo:hi], limit, verify, res)
}

func (ix *Index) anyPrefix(itemWords []int32, p string) bool {
	for _, id := range itemWords {
		if strings.HasPrefix(ix.words[id], p) {
			return true
		}
	}
	return false
}

// scanUnion visits, in rank order, the items in the union of the postings of
// wordIDs and keeps those verify accepts, within the scan budget.
func (ix *Index) scanUnion(wordIDs []int32, limit int, verify func(int32) bool, res *Result) {
	if len(wordIDs) == 1 {
		budget := scanBudget
		for _, item := range ix.postings(wordIDs[0]) {
			if budget--; budget < 0 {
				res.Truncated = true
				return
			}
			if verify(item) {
				if res.Items = append(res.Items, item); len(res.Items) == limit {
					return
				}
			}
		}
		return
	}
	var cand []int32
	for _, wid := range wordIDs {
		p := ix.postings(wid)
		if len(cand)+len(p) > scanBudget {
			res.Truncated = true
			p = p[:scanBudget-len(cand)]
		}
		cand = append(cand, p...)
		if res.Truncated {
			break
		}
	}
	slices.Sort(cand)
	cand = slices.Compact(cand)
	for _, item := range cand {
		if verify(item) {
			if res.Items = append(res.Items, item); len(res.Items) == limit {
				return
			}
		}
	}
}

// scanFuzzy corrects each unknown query word to the vocabulary words within
// a small edit distance, then keeps the items that hold, for every query
// word, the word itself or one of its corrections.
func (ix *Index) scanFuzzy(words []string, limit int, res *Result) {
	alts := make([][]int32, len(words))
	corrected := false
	for i, w := range words {
		if id, ok := ix.vocab[w]; ok {
			alts[i] = []int32{id}
			continue
		}
		if !fuzzyWord(w) {
			return
		}
		alts[i] = ix.corrections(w)
		if len(alts[i]) == 0 {
			return
		}
		corrected = true
	}
	if !corrected {
		return
	}
	driver, best := 0, -1
	for i, a := range alts {
		total := 0
		for _, wid := range a {
			total += len(ix.postings(wid))
		}
		if best < 0 || total < best {
			driver, best = i, total
		}
	}
	verify := func(item int32) bool {
		iw := ix.wordsOf(item)
		for i, a := range alts {
			if i == driver {
				continue
			}
			found := false
			for _, id := range a {
				if slices.Contains(iw, id) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	ix.scanUnion(alts[driver], limit, verify, res)
}

// corrections returns the vocabulary words within the edit distance allowed
// for w, in word id order.
func (ix *Index) corrections(w string) []int32 {
	var out []int32
	var buf []byte
	d := maxDistance(len(w))
	forDeletes(w, d, &buf, func(key []byte) {
		for _, wid := range ix.deletes[string(key)] {
			if !slices.Contains(out, wid) && editDistance(w, ix.words[wid], d) <= d {
				out = append(out, wid)
			}
		}
	})
	slices.Sort(out)
	return out
}
