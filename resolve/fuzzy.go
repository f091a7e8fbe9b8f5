package resolve

import "unicode/utf8"

// fuzzyWord reports whether w takes part in edit-distance matching: long
// enough, not too long (its deletion variants grow with its length), and
// made of letters only (typos in codes and numbers are not corrected, they
// are different items).
func fuzzyWord(w string) bool {
	if len(w) > maxFuzzyWord || utf8.RuneCountInString(w) < minFuzzyLen {
		return false
	}
	for _, r := range w {
		if r >= '0' && r <= '9' {
			return false
		}
	}
	return true
}

// deleteDepth is how many runes are deleted from w to make its deletion
// variants: two for words of 8+ letters, so that every word within two
// edits of a long query word shares a variant with it (SymSpell: a
// correction within distance d needs variants of up to d deletions on both
// sides), one for shorter words.
func deleteDepth(w string) int {
	if utf8.RuneCountInString(w) >= 8 {
		return 2
	}
	return 1
}

// maxDistance is the largest edit distance tolerated for a word of n bytes.
func maxDistance(n int) int {
	if n >= 8 {
		return 2
	}
	return 1
}

// forDeletes calls fn with w and every string made by deleting up to d
// (at most 2) runes from w. The slice passed to fn is reused; fn must copy
// it to keep it. Variants may repeat.
func forDeletes(w string, d int, fn func([]byte)) {
	var b0, b1 [64]byte
	fn(append(b0[:0], w...))
	if d == 0 {
		return
	}
	for i, r := range w {
		size := utf8.RuneLen(r)
		if size < 0 {
			size = 1
		}
		if len(w) == size {
			return
		}
		v := append(append(b0[:0], w[:i]...), w[i+size:]...)
		fn(v)
		if d < 2 {
			continue
		}
		for j := 0; j < len(v); {
			_, s2 := utf8.DecodeRune(v[j:])
			if len(v) > s2 {
				fn(append(append(b1[:0], v[:j]...), v[j+s2:]...))
			}
			j += s2
		}
	}
}

// editDistance is the optimal string alignment distance between a and b in
// runes (insertions, deletions, substitutions, adjacent transpositions),
// computed up to max: any larger distance is reported as max+1.
func editDistance(a, b string, max int) int {
	var raBuf, rbBuf [32]rune
	ra, rb := appendRunes(raBuf[:0], a), appendRunes(rbBuf[:0], b)
	if d := len(ra) - len(rb); d > max || -d > max {
		return max + 1
	}
	var rows [3][33]int
	var prev2, prev, cur []int
	if len(rb) < 33 {
		prev2, prev, cur = rows[0][:len(rb)+1], rows[1][:len(rb)+1], rows[2][:len(rb)+1]
	} else {
		prev2, prev, cur = make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)
	}
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if rowMin > max {
			return max + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(rb)], max+1)
}

func appendRunes(dst []rune, s string) []rune {
	for _, r := range s {
		dst = append(dst, r)
	}
	return dst
}
