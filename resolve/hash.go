package resolve

// FNV-1a, 64 bits: keys of the exact and deletion indexes. Matches found by
// hash are always confirmed, so collisions cost time, never correctness.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

var emptyHash = hashString("")

func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func hashBytes(b []byte) uint64 {
	h := uint64(fnvOffset)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// normalHash is hashString(Normalize(s)) without allocating for ASCII s.
func normalHash(s string) uint64 {
	var buf [256]byte
	if b, ok := appendASCII(buf[:0], s); ok {
		return hashBytes(b)
	}
	return hashString(Normalize(s))
}

// appendNormal appends Normalize(s) to dst, without allocating for ASCII s.
func appendNormal(dst []byte, s string) []byte {
	if b, ok := appendASCII(dst, s); ok {
		return b
	}
	return append(dst, Normalize(s)...)
}

// normalEqual reports whether Normalize(raw) == q without allocating for
// short ASCII raw.
func normalEqual(raw, q string) bool {
	var buf [256]byte
	if b, ok := appendASCII(buf[:0], raw); ok {
		return string(b) == q
	}
	return Normalize(raw) == q
}

// hashTable maps 64-bit hashes to int32 values with open addressing and
// linear probing: flat arrays, so a lookup costs one or two cache misses
// where a Go map on a table this size costs more. Not safe for concurrent
// writes; reads are safe once built.
type hashTable struct {
	keys []uint64 // 0 marks an empty slot; key 0 is stored as 1
	vals []int32
	mask uint64
}

func newHashTable(n int) hashTable {
	size := 16
	for size < n+n/2 {
		size *= 2
	}
	return hashTable{keys: make([]uint64, size), vals: make([]int32, size), mask: uint64(size - 1)}
}

func (t *hashTable) slot(key uint64) uint64 {
	// spread the bits: FNV's low bits are weak for short keys
	return (key * 0x9E3779B97F4A7C15) >> 17 & t.mask
}

func (t *hashTable) get(key uint64) (int32, bool) {
	if key == 0 {
		key = 1
	}
	for i := t.slot(key); ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case key:
			return t.vals[i], true
		case 0:
			return 0, false
		}
	}
}

// put sets key's value; the table must not be full (newHashTable sizes it
// for the number of keys it will hold, at most two thirds full).
func (t *hashTable) put(key uint64, val int32) {
	if key == 0 {
		key = 1
	}
	for i := t.slot(key); ; i = (i + 1) & t.mask {
		if t.keys[i] == key || t.keys[i] == 0 {
			t.keys[i], t.vals[i] = key, val
			return
		}
	}
}
