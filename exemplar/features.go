package exemplar

import (
	"math"
	"slices"
)

// Feature kinds, mixed into each feature's hash so a word, a word pair and
// a character n-gram never share a key.
const (
	kindWord byte = iota + 1
	kindPair
	kindChar
)

const (
	minGram = 3 // shortest character n-gram, counting the word-boundary marks
	maxGram = 4 // longest (5-grams cost time and, measured on CLINC150 val, a little accuracy)
)

// fnv-1a, 64 bits.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashStart(kind byte) uint64 { return (fnvOffset ^ uint64(kind)) * fnvPrime }

func hashAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

func hashAddBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

// extractor turns normalized words into hashed features. It is scratch
// space for one goroutine.
type extractor struct {
	hashes []uint64
	word   []byte
}

// extract appends the features of words, sorted with repeats kept (so a
// run of equal hashes is a term frequency): each word, each adjacent pair of
// words, and the character n-grams of each word framed as "<word>".
func (e *extractor) extract(words []string) []uint64 {
	e.hashes = e.hashes[:0]
	for i, w := range words {
		e.hashes = append(e.hashes, hashAdd(hashStart(kindWord), w))
		if i > 0 {
			h := hashAdd(hashStart(kindPair), words[i-1])
			h = (h ^ ' ') * fnvPrime
			e.hashes = append(e.hashes, hashAdd(h, w))
		}
		e.word = append(append(append(e.word[:0], '<'), w...), '>')
		for n := minGram; n <= maxGram; n++ {
			for j := 0; j+n <= len(e.word); j++ {
				e.hashes = append(e.hashes, hashAddBytes(hashStart(kindChar), e.word[j:j+n]))
			}
		}
	}
	slices.Sort(e.hashes)
	return e.hashes
}

// vector is a sparse, L2-normalized feature vector with ids ascending.
type vector struct {
	ids  []int32
	vals []float32
}

// dotDense is the dot product with a vector held densely by feature id.
func (v *vector) dotDense(d []float32) float32 {
	var s float32
	for j, f := range v.ids {
		s += v.vals[j] * d[f]
	}
	return s
}

// weigh fills v from sorted feature hashes: sublinear term frequency times
// inverse document frequency, L2-normalized. Features the model does not
// know are dropped; known reports how many of the distinct features were
// known.
func (m *Model) weigh(hashes []uint64, v *vector) (known, total int) {
	v.ids, v.vals = v.ids[:0], v.vals[:0]
	for i := 0; i < len(hashes); {
		j := i + 1
		for j < len(hashes) && hashes[j] == hashes[i] {
			j++
		}
		total++
		if id, ok := m.features[hashes[i]]; ok {
			known++
			tf := 1 + float32(math.Log(float64(j-i)))
			v.ids = append(v.ids, id)
			v.vals = append(v.vals, tf*m.idf[id])
		}
		i = j
	}
	// ids follow hash order, which is id order: ids are assigned in hash order.
	var norm float64
	for _, x := range v.vals {
		norm += float64(x) * float64(x)
	}
	if norm > 0 {
		inv := float32(1 / math.Sqrt(norm))
		for k := range v.vals {
			v.vals[k] *= inv
		}
	}
	return known, total
}
