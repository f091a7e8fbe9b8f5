package resolve

import (
	"slices"
	"sort"
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

// ResolveExact matches query against the exact tier only: id, display name
// or alias. It is the cheap check for whether a text names an item.
func (ix *Index) ResolveExact(query string, limit int) Result {
	res := Result{Query: Normalize(query)}
	if len(res.Query) > MaxQueryBytes {
		return res
	}
	ix.exactTier(res.Query, max(limit, 1), &res)
	return res
}

func (ix *Index) exactTier(q string, limit int, res *Result) bool {
	if q == "" {
		return false
	}
	e, ok := ix.exact.get(hashString(q))
	if !ok {
		return false
	}
	for ; e >= 0; e = ix.exactNext[e] {
		if item := ix.exactItem[e]; ix.hasKey(item, q) { // else a hash collision
			res.Items = append(res.Items, item)
		}
	}
	if len(res.Items) == 0 {
		return false
	}
	slices.Sort(res.Items) // rank order
	if len(res.Items) > limit {
		res.Items, res.Truncated = res.Items[:limit], true
	}
	res.Tier = TierExact
	return true
}

// hasKey reports whether the item's id, display name or an alias
// normalizes to q.
func (ix *Index) hasKey(item int32, q string) bool {
	it := ix.Item(item)
	if normalEqual(it.Header.ID, q) || normalEqual(it.Header.DisplayName, q) {
		return true
	}
	for _, a := range it.Aliases {
		if normalEqual(a, q) {
			return true
		}
	}
	return false
}

// Resolve matches query against the index, trying the tiers from exact to
// fuzzy and stopping at the first that matches anything. It returns at most
// limit items (limit ≥ 1), in rank order.
func (ix *Index) Resolve(query string, limit int) Result {
	return ix.resolveNormalized(Normalize(query), limit)
}

func (ix *Index) resolveNormalized(q string, limit int) Result {
	limit = max(limit, 1)
	res := Result{Query: q}
	if q == "" || len(ix.items) == 0 || len(q) > MaxQueryBytes {
		return res
	}
	if ix.exactTier(q, limit, &res) {
		return res
	}
	var wordsBuf [maxWords]string
	words := Fields(wordsBuf[:0], q)
	if len(words) > maxWords || len(words) == 0 {
		return res
	}
	words = dedupWords(words)

	// Inside the token, prefix and fuzzy tiers, items are ranked by
	// closeness: a name with as many words as the query before one with
	// words the query lacks ("Ann Lindgren" before "Ann Lindgren-Hay"),
	// then by usage and id. More candidates than asked for are gathered so
	// the closest is among them.
	gather := min(max(2*limit, 8), 64)
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
		if ix.scanToken(ids, gather, &res); len(res.Items) > 0 {
			res.Tier = TierToken
			return ix.closest(res, len(words), limit)
		}
	}
	if ix.scanPrefix(words, gather, &res); len(res.Items) > 0 {
		res.Tier = TierPrefix
		return ix.closest(res, len(words), limit)
	}
	if ix.scanFuzzy(words, gather, &res); len(res.Items) > 0 {
		res.Tier = TierFuzzy
		return ix.closest(res, len(words), limit)
	}
	return res
}

// closest orders a tier's items by closeness to a query of n words (how
// many words their names have beyond or short of it), keeping rank order
// among equals, and keeps limit of them.
func (ix *Index) closest(res Result, n, limit int) Result {
	dist := func(item int32) int {
		d := int(ix.nameLen[item]) - n
		if d < 0 {
			d = -d
		}
		return d
	}
	slices.SortStableFunc(res.Items, func(a, b int32) int { return dist(a) - dist(b) })
	if len(res.Items) > limit {
		res.Items, res.Truncated = res.Items[:limit], true
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

// wordSet is the vocabulary words one query word may stand for: itself,
// its corrections, or (isRange) the words ix.sorted[lo:hi] it starts.
type wordSet struct {
	ids     []int32
	isRange bool
	lo, hi  int
}

func (ix *Index) exactSet(id int32, buf *[maxWords]int32, i int) wordSet {
	buf[i] = id
	return wordSet{ids: buf[i : i+1]}
}

func (ix *Index) rangeSet(lo, hi int) wordSet {
	return wordSet{ids: ix.sorted[lo:hi], isRange: true, lo: lo, hi: hi}
}

// holds reports whether the item has a word of the set, by looking at the
// item's words (random access: the fallback for sets with many words).
func (ix *Index) holds(item int32, s *wordSet) bool {
	for _, w := range ix.wordsOf(item) {
		if s.isRange {
			if p := int(ix.pos[w]); p >= s.lo && p < s.hi {
				return true
			}
		} else if slices.Contains(s.ids, w) {
			return true
		}
	}
	return false
}

// intersect appends to res, in rank order, up to limit items that hold a
// word of every set. The set with the fewest postings drives; the others
// are checked by walking their (sorted) posting lists forward alongside the
// driver, which reads memory in order, or, for sets of many words, by
// looking at the candidate's own words.
func (ix *Index) intersect(sets []wordSet, limit int, res *Result) {
	driver, best := 0, -1
	for i := range sets {
		total := 0
		for _, w := range sets[i].ids {
			total += len(ix.postings(w))
		}
		if best < 0 || total < best {
			driver, best = i, total
		}
	}
	var cand []int32
	if d := sets[driver].ids; len(d) == 1 {
		cand = ix.postings(d[0])
	} else {
		for _, w := range d {
			p := ix.postings(w)
			if len(cand)+len(p) > scanBudget {
				p = p[:scanBudget-len(cand)]
				res.Truncated = true
			}
			cand = append(cand, p...)
		}
		slices.Sort(cand)
		cand = slices.Compact(cand)
	}
	if len(cand) > scanBudget {
		cand, res.Truncated = cand[:scanBudget], true
	}
	// Each other set of few words is checked by walking its words' posting
	// lists forward alongside the candidates (memory read in order); a set
	// of many words (a short prefix) by looking at the candidate's words.
	var listBuf [maxCursors][]int32
	var curBuf [maxCursors]int
	var first, count [maxWords]int
	n := 0
	for i := range sets {
		if i == driver || len(sets[i].ids) > maxListsPerSet || n+len(sets[i].ids) > maxCursors {
			continue
		}
		first[i], count[i] = n, len(sets[i].ids)
		for _, w := range sets[i].ids {
			listBuf[n] = ix.postings(w)
			n++
		}
	}
	// A set of many words whose postings are few next to the candidates is
	// turned into a bitmap (pooled, cleared after) for constant-time checks.
	var bits [maxWords]*[]uint64
	for i := range sets {
		if i == driver || count[i] != 0 {
			continue
		}
		total := 0
		for _, w := range sets[i].ids {
			total += len(ix.postings(w))
		}
		if total > 4*len(cand)+1024 {
			continue
		}
		bm := ix.bitmaps.Get().(*[]uint64)
		for _, w := range sets[i].ids {
			for _, it := range ix.postings(w) {
				(*bm)[it>>6] |= 1 << (uint(it) & 63)
			}
		}
		bits[i] = bm
	}
	defer func() {
		for i, bm := range bits {
			if bm == nil {
				continue
			}
			for _, w := range sets[i].ids {
				for _, it := range ix.postings(w) {
					(*bm)[it>>6] = 0
				}
			}
			ix.bitmaps.Put(bm)
		}
	}()
	for _, item := range cand {
		ok := true
		for i := range sets {
			if i == driver {
				continue
			}
			if bm := bits[i]; bm != nil {
				if (*bm)[item>>6]&(1<<(uint(item)&63)) == 0 {
					ok = false
					break
				}
				continue
			}
			if count[i] == 0 {
				if !ix.holds(item, &sets[i]) {
					ok = false
					break
				}
				continue
			}
			found := false
			for c := first[i]; c < first[i]+count[i]; c++ {
				l := listBuf[c]
				k := gallop(l, curBuf[c], item)
				curBuf[c] = k
				found = found || k < len(l) && l[k] == item
			}
			if !found {
				ok = false
				break
			}
		}
		if ok {
			if res.Items = append(res.Items, item); len(res.Items) == limit {
				return
			}
		}
	}
}

// Cursor limits of intersect: a set of more words than maxListsPerSet is
// checked against each candidate's own words instead.
const (
	maxListsPerSet = 8
	maxCursors     = 32
)

// gallop returns the first index ≥ from where l[index] ≥ x (l ascending).
func gallop(l []int32, from int, x int32) int {
	if from >= len(l) || l[from] >= x {
		return from
	}
	step := 1
	lo := from
	for lo+step < len(l) && l[lo+step] < x {
		lo += step
		step *= 2
	}
	hi := min(lo+step, len(l))
	// l[lo] < x; the answer is in (lo, hi]
	k, _ := slices.BinarySearch(l[lo+1:hi], x)
	return lo + 1 + k
}

// prefixRange returns the positions in ix.sorted of the words that start
// with p: ix.sorted[lo:hi].
func (ix *Index) prefixRange(p string) (lo, hi int) {
	lo, _ = slices.BinarySearchFunc(ix.sorted, p, func(w int32, p string) int { return strings.Compare(ix.words[w], p) })
	hi = lo + sort.Search(len(ix.sorted)-lo, func(i int) bool { return !strings.HasPrefix(ix.words[ix.sorted[lo+i]], p) })
	return lo, hi
}

// scanToken keeps the items that hold every query word.
func (ix *Index) scanToken(ids []int32, limit int, res *Result) {
	var setsBuf [maxWords]wordSet
	sets := setsBuf[:len(ids)]
	for i := range ids {
		sets[i] = wordSet{ids: ids[i : i+1]}
	}
	ix.intersect(sets, limit, res)
}

// scanPrefix keeps the items that hold every query word but the last, and
// a word that starts with the last: how people type a name they have not
// finished ("q1 cfo outr").
func (ix *Index) scanPrefix(words []string, limit int, res *Result) {
	last := words[len(words)-1]
	if len(last) < minPrefixLen {
		return
	}
	var idsBuf [maxWords]int32
	var setsBuf [maxWords]wordSet
	sets := setsBuf[:0]
	for i, w := range words[:len(words)-1] {
		id, ok := ix.vocab[w]
		if !ok {
			return
		}
		sets = append(sets, ix.exactSet(id, &idsBuf, i))
	}
	lo, hi := ix.prefixRange(last)
	if lo == hi {
		return
	}
	if hi-lo > prefixWidth && len(sets) == 0 {
		return // a lone short fragment: too broad to be a name
	}
	ix.intersect(append(sets, ix.rangeSet(lo, hi)), limit, res)
}

// scanFuzzy corrects each unknown query word to the vocabulary words within
// a small edit distance, then keeps the items that hold, for every query
// word, the word itself or one of its corrections.
func (ix *Index) scanFuzzy(words []string, limit int, res *Result) {
	var idsBuf [maxWords]int32
	var setsBuf [maxWords]wordSet
	sets := setsBuf[:0]
	corrected, known := false, false
	for i, w := range words {
		if id, ok := ix.vocab[w]; ok {
			sets = append(sets, ix.exactSet(id, &idsBuf, i))
			known = true
			continue
		}
		if !fuzzyWord(w) {
			return
		}
		c := ix.corrections(w, -1)
		if len(c) == 0 {
			return
		}
		sets = append(sets, wordSet{ids: c})
		corrected = true
	}
	if corrected {
		if ix.intersect(sets, limit, res); len(res.Items) > 0 {
			return
		}
	}
	if !known {
		return
	}
	// A word of one name may be a typo of another's ("anne lindgren"
	// with Anne Lind and Ann Lindgren): when the words as they are name
	// nothing, each known word stands for itself and the words one edit
	// away.
	corrected = false
	for i, w := range words {
		id, ok := ix.vocab[w]
		if !ok || !fuzzyWord(w) {
			continue
		}
		if c := ix.corrections(w, id); len(c) > 0 {
			c = append(c, id)
			slices.Sort(c)
			sets[i] = wordSet{ids: c}
			corrected = true
		}
	}
	if corrected {
		ix.intersect(sets, limit, res)
	}
}

// corrections returns the vocabulary words closest to w, in word id order:
// those one edit away when there are any, else those two edits away (words
// of 8+ letters only). Candidates are the words that share a deletion
// variant with w (SymSpell: variants of up to two deletions on both sides
// for long words, one for short ones), confirmed by edit distance
// (insertions, deletions, substitutions and adjacent transpositions).
// The word skip (a word of the vocabulary that w is, or -1) is not one.
func (ix *Index) corrections(w string, skip int32) []int32 {
	var out []int32
	var dist []int
	maxD := maxDistance(len(w))
	look := func(key []byte) {
		e, ok := ix.deletes[hashBytes(key)]
		for ; ok && e >= 0; e = ix.delNext[e] {
			wid := ix.delWord[e]
			if wid == skip || slices.Contains(out, wid) {
				continue
			}
			if d := editDistance(w, ix.words[wid], maxD); d <= maxD {
				out, dist = append(out, wid), append(dist, d)
			}
		}
	}
	// One deletion first: it finds every word one edit away, the common
	// typo. Only without one are the two-deletion variants of a long word
	// looked up.
	forDeletes(w, 1, look)
	if slices.Min(append(dist, 2)) > 1 && deleteDepth(w) == 2 {
		forDeletes(w, 2, look)
	}
	best := slices.Min(append(dist, maxD))
	kept := out[:0]
	for i, wid := range out {
		if dist[i] == best {
			kept = append(kept, wid)
		}
	}
	slices.Sort(kept)
	return kept
}
