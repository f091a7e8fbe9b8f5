package resolve

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Normalize returns the canonical form of s used for all matching: Unicode
// NFKC, case folded, diacritics removed, apostrophes dropped inside words,
// every other run of punctuation, symbols, spaces, control characters and
// invalid UTF-8 collapsed to one space, no leading or trailing space.
//
//	Normalize("  Q1 — CFO Outreach! ") == "q1 cfo outreach"
//	Normalize("Café-Crème") == "cafe creme"
//	Normalize("don't") == "dont"
//
// Normalize is safe for concurrent use and never panics.
func Normalize(s string) string {
	if ascii, clean := asciiClean(s); ascii {
		if clean {
			return s
		}
		b, _ := appendASCII(make([]byte, 0, len(s)), s)
		return string(b)
	}
	return normalizeUnicode(s)
}

// asciiClean reports whether s is all ASCII, and whether it is already in
// normal form (so Normalize can return it without allocating).
func asciiClean(s string) (ascii, clean bool) {
	clean = true
	prevSpace := true // a leading space is not clean
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return false, false
		}
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			prevSpace = false
		case c == ' ':
			if prevSpace {
				clean = false
			}
			prevSpace = true
		default:
			clean = false
		}
	}
	if prevSpace && len(s) > 0 {
		clean = false
	}
	return true, clean
}

// appendASCII appends the normal form of s to dst when s is all ASCII. At
// the first non-ASCII byte it stops and returns ok false; what it appended
// must then be discarded.
func appendASCII(dst []byte, s string) (out []byte, ok bool) {
	start := len(dst)
	pendingSpace := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			return dst, false
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c == '\'' || c == '`':
			continue // apostrophes join: don't -> dont
		default:
			pendingSpace = true
			continue
		}
		if pendingSpace && len(dst) > start {
			dst = append(dst, ' ')
		}
		pendingSpace = false
		dst = append(dst, c)
	}
	return dst, true
}

// unicodeFold is NFKC, case folding, then removal of combining marks after
// canonical decomposition, recomposed.
func unicodeFold() transform.Transformer {
	return transform.Chain(norm.NFKC, cases.Fold(), norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
}

func normalizeUnicode(s string) string {
	s = strings.ToValidUTF8(s, " ")
	folded, _, err := transform.String(unicodeFold(), s)
	if err != nil {
		folded = strings.ToLower(s) // transformers over valid UTF-8 do not fail; stay safe anyway
	}
	var b strings.Builder
	b.Grow(len(folded))
	pendingSpace := false
	for _, r := range folded {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mc, r):
		case r == '\'' || r == '`' || r == '\u2019' || r == '\u02bc':
			continue
		default:
			pendingSpace = true
			continue
		}
		if pendingSpace && b.Len() > 0 {
			b.WriteByte(' ')
		}
		pendingSpace = false
		// Case folding is not a fixpoint for every script (Cherokee folds
		// to upper case, then back): settle on the lower-case form.
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Fields splits a normalized string into its words, appending them to dst.
// It does not allocate beyond growing dst: the words share s's memory.
func Fields(dst []string, normalized string) []string {
	for len(normalized) > 0 {
		i := strings.IndexByte(normalized, ' ')
		if i < 0 {
			return append(dst, normalized)
		}
		if i > 0 {
			dst = append(dst, normalized[:i])
		}
		normalized = normalized[i+1:]
	}
	return dst
}
