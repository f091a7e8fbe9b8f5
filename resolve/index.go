package resolve

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentplane/agentplane"
)

// Tier is how well a query matched an item. Higher is better.
type Tier int8

// Match tiers, best last.
const (
	TierNone   Tier = iota // no match
	TierFuzzy              // every word matches a word of the item within a small edit distance
	TierPrefix             // every word but the last is a word of the item, the last starts one
	TierToken              // every word is a word (name, alias or keyword) of the item
	TierExact              // the whole query equals the item's id, display name or an alias
)

var tierNames = [...]string{"none", "fuzzy", "prefix", "token", "exact"}

// String returns the tier's name.
func (t Tier) String() string {
	if int(t) < len(tierNames) {
		return tierNames[t]
	}
	return fmt.Sprintf("tier(%d)", int8(t))
}

// Index is an immutable, searchable view of a catalog's items, built once
// when the catalog is loaded. All methods are safe for concurrent use.
//
// Items are kept in rank order (higher UsageCount first, then id), which is
// also the deterministic tie-break between items that match equally well.
type Index struct {
	items   []agentplane.ResolverItem // as given, not copied
	version string                    // a provider's answer: Version of the items; "" for a static catalog
	order   []int32                   // rank position -> position in items

	// exact keys: the hash of the normalized id, display name and aliases,
	// chained per hash; a hit is confirmed against the item's own fields
	exact     hashTable // key hash -> first entry
	exactItem []int32   // entry -> item
	exactNext []int32   // entry -> next entry with the same hash, or -1

	// words of display names, aliases and keywords
	vocab     map[string]int32 // word -> word id
	words     []string         // word id -> word
	sorted    []int32          // word ids in byte order of their words, for prefix ranges
	pos       []int32          // word id -> its position in sorted
	postStart []int32          // word id -> start in post; len(words)+1 entries
	post      []int32          // item ids per word, ascending (rank order)
	itemStart []int32          // item -> start in itemWords; len(items)+1 entries
	nameLen   []uint8          // item (rank order) -> words in its display name, at most 255
	itemWords []int32          // word ids per item, deduplicated

	// bitmaps over the items, one bit each, for intersecting wide prefix
	// ranges; taken clean, returned clean
	bitmaps sync.Pool

	lastItem []int32 // while building: word id -> mark of the last item that had it

	// SymSpell deletion index over alphabetic words, for the fuzzy tier:
	// the hash of each word and of each string one deletion away, chained
	deletes map[uint64]int32 // variant hash -> first entry
	delWord []int32          // entry -> word id
	delNext []int32          // entry -> next entry with the same hash, or -1
}

// Budgets bound the work of one query so that no query is slow, whatever
// the catalog. They are constants, so results stay deterministic.
const (
	scanBudget   = 1 << 15 // postings examined per tier
	prefixWidth  = 512     // words a prefix may expand to before it is too broad to drive a scan
	minPrefixLen = 2       // shortest word fragment that drives a prefix scan
	minFuzzyLen  = 3       // shortest word corrected by edit distance
	maxWords     = 16      // query words considered; more is not a name
	// MaxQueryBytes is the longest query resolved (normalized); a longer
	// one names no item and matches nothing.
	MaxQueryBytes = 512
	maxFuzzyWord  = 32 // longest word corrected by edit distance (its deletions grow with its length)
)

// MaxItemWords is the most distinct words (of its display name, aliases and
// keywords) an item may have: matching looks at an item's words, and an
// item with hundreds of thousands of keywords made every turn that touched
// it take seconds.
const MaxItemWords = 1024

// NewIndex builds an index over items. It fails, naming the item, when an id
// is empty or appears twice. The index keeps items without copying them:
// the caller must not change them afterwards.
func NewIndex(items []agentplane.ResolverItem) (*Index, error) {
	n := len(items)
	order := rankOrder(items)
	ix := &Index{
		items:     items,
		order:     order,
		exact:     newHashTable(exactKeys(items)),
		exactItem: make([]int32, 0, 2*n),
		exactNext: make([]int32, 0, 2*n),
		vocab:     make(map[string]int32),
		itemStart: make([]int32, n+1),
		nameLen:   make([]uint8, n),
	}
	rank := make([]int32, n) // input position -> rank position
	for r, o := range order {
		rank[o] = int32(r)
	}
	// Read the items in input order, which is the order their strings sit
	// in memory, collecting each one's words; then lay the words out in
	// rank order.
	words := make([]int32, 0, 8*n)
	start := make([]int32, n+1)
	var buf []byte
	ix.lastItem = make([]int32, 0, 8*n)
	for j := range items {
		it := &items[j]
		r := rank[j]
		id := it.Header.ID
		if id == "" {
			return nil, fmt.Errorf("item %d (%q): empty id", j, it.Header.DisplayName)
		}
		idHash := normalHash(id)
		if _, dup := ix.lookup(idHash, id); dup {
			return nil, fmt.Errorf("item %d: duplicate id %q", j, id)
		}
		ix.addExact(idHash, r)
		mark := int32(j + 1) // lastItem marks a word seen in this item
		buf = appendNormal(buf[:0], it.Header.DisplayName)
		ix.addExact(hashBytes(buf), r)
		if len(buf) > 0 {
			ix.nameLen[r] = uint8(min(bytes.Count(buf, []byte{' '})+1, 255))
		}
		words = ix.addWords(buf, words, mark)
		for _, a := range it.Aliases {
			buf = appendNormal(buf[:0], a)
			ix.addExact(hashBytes(buf), r)
			words = ix.addWords(buf, words, mark)
		}
		for _, k := range it.Keywords {
			words = ix.addWords(appendNormal(buf[:0], k), words, mark)
		}
		if n := len(words) - int(start[j]); n > MaxItemWords {
			return nil, fmt.Errorf("item %d (%q): %d distinct words in its name, aliases and keywords; the limit is %d", j, id, n, MaxItemWords)
		}
		start[j+1] = int32(len(words))
	}
	ix.itemWords = make([]int32, 0, len(words))
	for r, o := range order {
		ix.itemWords = append(ix.itemWords, words[start[o]:start[o+1]]...)
		ix.itemStart[r+1] = int32(len(ix.itemWords))
	}
	words64 := (n + 63) / 64
	ix.bitmaps.New = func() any { b := make([]uint64, words64); return &b }
	ix.lastItem = nil
	ix.buildPostings()
	ix.buildSorted()
	ix.buildDeletes()
	return ix, nil
}

// addWords adds the words of normalized text b to the vocabulary and
// appends their ids to words, once each per item: mark is the item's
// mark, and lastItem[word] the mark of the last item it was added for.
func (ix *Index) addWords(b []byte, words []int32, mark int32) []int32 {
	for len(b) > 0 {
		j := bytes.IndexByte(b, ' ')
		if j < 0 {
			j = len(b)
		}
		if j > 0 {
			wid, ok := ix.vocab[string(b[:j])] // no allocation for the lookup
			if !ok {
				w := string(b[:j])
				wid = int32(len(ix.words))
				ix.vocab[w] = wid
				ix.words = append(ix.words, w)
				ix.lastItem = append(ix.lastItem, 0)
			}
			if ix.lastItem[wid] != mark {
				ix.lastItem[wid] = mark
				words = append(words, wid)
			}
		}
		b = b[min(j+1, len(b)):]
	}
	return words
}

// exactKeys counts the exact keys of items: id, display name, aliases.
func exactKeys(items []agentplane.ResolverItem) int {
	n := 2 * len(items)
	for i := range items {
		n += len(items[i].Aliases)
	}
	return n
}

// rankOrder returns the item positions in rank order: more used first,
// then by id.
func rankOrder(items []agentplane.ResolverItem) []int32 {
	order := make([]int32, len(items))
	byID := slices.IsSortedFunc(items, func(a, b agentplane.ResolverItem) int { return strings.Compare(a.Header.ID, b.Header.ID) })
	if byID {
		// Catalogs often come in id order: then position breaks usage ties,
		// and the sort moves no strings.
		type key struct {
			usage int64
			idx   int32
		}
		keys := make([]key, len(items))
		for i := range items {
			keys[i] = key{items[i].UsageCount, int32(i)}
		}
		slices.SortFunc(keys, func(a, b key) int {
			if c := cmp.Compare(b.usage, a.usage); c != 0 {
				return c
			}
			return cmp.Compare(a.idx, b.idx)
		})
		for i := range keys {
			order[i] = keys[i].idx
		}
		return order
	}
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(items[b].UsageCount, items[a].UsageCount); c != 0 {
			return c
		}
		return strings.Compare(items[a].Header.ID, items[b].Header.ID)
	})
	return order
}

func (ix *Index) addExact(key uint64, item int32) {
	if key == emptyHash {
		return
	}
	e := int32(len(ix.exactItem))
	head, ok := ix.exact.get(key)
	if !ok {
		ix.exact.put(key, e)
		ix.exactItem = append(ix.exactItem, item)
		ix.exactNext = append(ix.exactNext, -1)
		return
	}
	// append at the tail (chains are short); lookups sort what they find
	last := head
	for ix.exactNext[last] >= 0 {
		last = ix.exactNext[last]
	}
	if ix.exactItem[last] == item {
		return // same item under the same key twice (id equals name)
	}
	ix.exactItem = append(ix.exactItem, item)
	ix.exactNext = append(ix.exactNext, -1)
	ix.exactNext[last] = e
}

func (ix *Index) buildPostings() {
	counts := make([]int32, len(ix.words)+1)
	for _, w := range ix.itemWords {
		counts[w+1]++
	}
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	ix.postStart = counts
	ix.post = make([]int32, len(ix.itemWords))
	fill := slices.Clone(counts[:len(ix.words)])
	for item := range ix.items {
		for _, w := range ix.itemWords[ix.itemStart[item]:ix.itemStart[item+1]] {
			ix.post[fill[w]] = int32(item)
			fill[w]++
		}
	}
}

func (ix *Index) buildSorted() {
	ix.sorted = make([]int32, len(ix.words))
	for i := range ix.sorted {
		ix.sorted[i] = int32(i)
	}
	slices.SortFunc(ix.sorted, func(a, b int32) int { return strings.Compare(ix.words[a], ix.words[b]) })
	ix.pos = make([]int32, len(ix.words))
	for p, w := range ix.sorted {
		ix.pos[w] = int32(p)
	}
}

func (ix *Index) buildDeletes() {
	ix.deletes = make(map[uint64]int32, len(ix.words)*8)
	for wid, w := range ix.words {
		if !fuzzyWord(w) {
			continue
		}
		forDeletes(w, deleteDepth(w), func(key []byte) {
			h := hashBytes(key)
			e := int32(len(ix.delWord))
			head, ok := ix.deletes[h]
			if ok && ix.delWord[head] == int32(wid) {
				return // the same variant twice from one word ("aab")
			}
			ix.delWord = append(ix.delWord, int32(wid))
			if ok {
				ix.delNext = append(ix.delNext, head)
			} else {
				ix.delNext = append(ix.delNext, -1)
			}
			ix.deletes[h] = e
		})
	}
}

// lookup finds the item whose id is exactly id; idHash is normalHash(id).
func (ix *Index) lookup(idHash uint64, id string) (int32, bool) {
	e, ok := ix.exact.get(idHash)
	for ; ok && e >= 0; e = ix.exactNext[e] {
		if it := ix.exactItem[e]; ix.Item(it).Header.ID == id {
			return it, true
		}
	}
	return 0, false
}

// HasWord reports whether the normalized word is a word of some item's
// display name, aliases or keywords.
func (ix *Index) HasWord(w string) bool {
	_, ok := ix.vocab[w]
	return ok
}

// Len returns the number of items.
func (ix *Index) Len() int { return len(ix.items) }

// Item returns the item at position i (0 ≤ i < Len) in rank order.
func (ix *Index) Item(i int32) *agentplane.ResolverItem { return &ix.items[ix.order[i]] }

// Lookup returns the item with exactly this id.
func (ix *Index) Lookup(id string) (*agentplane.ResolverItem, bool) {
	i, ok := ix.lookup(normalHash(id), id)
	if !ok {
		return nil, false
	}
	return ix.Item(i), true
}

// Items returns up to limit items in rank order, for pickers and questions
// that list a catalog without a query.
func (ix *Index) Items(limit int) []int32 {
	n := min(limit, len(ix.items))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}
