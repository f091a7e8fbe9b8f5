package resolve

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"Empty", "", ""},
		{"AlreadyNormal", "q1 cfo outreach", "q1 cfo outreach"},
		{"CaseAndSpaces", "  Q1   CFO Outreach ", "q1 cfo outreach"},
		{"Punctuation", "Switch to DDR mode!!!", "switch to ddr mode"},
		{"Hyphenated", "TPL-123", "tpl 123"},
		{"Apostrophe", "don't", "dont"},
		{"CurlyApostrophe", "don\u2019t", "dont"},
		{"Diacritics", "Café-Crème", "cafe creme"},
		{"FullWidth", "ＤＤＲ mode", "ddr mode"},
		{"Ligature", "ﬁle", "file"},
		{"SharpS", "Straße", "strasse"},
		{"Greek", "ΣΊΣΥΦΟΣ", "σισυφοσ"},
		{"Control", "a\x00b\tc\nd", "a b c d"},
		{"InvalidUTF8", "ab\xffcd é", "ab cd e"},
		{"EmDash", "Q1 — CFO", "q1 cfo"},
		{"OnlyPunct", "?!...", ""},
		{"Cherokee", "Ꮻ ꮻ", "ꮻ ꮻ"}, // found by FuzzNormalize: folding alone is not idempotent here
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Normalize(tt.in); got != tt.want {
				t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFields(t *testing.T) {
	t.Parallel()
	got := Fields(nil, "a bb ccc")
	if strings.Join(got, "|") != "a|bb|ccc" {
		t.Fatalf("Fields = %q", got)
	}
	if got := Fields(nil, ""); len(got) != 0 {
		t.Fatalf("Fields(\"\") = %q", got)
	}
}

func TestNormalizeCleanASCIIDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() { _ = Normalize("switch to ddr mode") })
	if allocs != 0 {
		t.Fatalf("Normalize of normal text allocated %v times", allocs)
	}
}

// FuzzNormalize checks that Normalize never panics, yields valid UTF-8 in
// normal form, and is idempotent.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"", "Switch to DDR mode", "Café-Crème", "ＤＤＲ", "a\x00b", "\xff\xfe", "ﬁ", "  x  ", "don't", "İstanbul", "ǅ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Normalize(s)
		if !utf8.ValidString(n) {
			t.Fatalf("Normalize(%q) = %q: invalid UTF-8", s, n)
		}
		if strings.HasPrefix(n, " ") || strings.HasSuffix(n, " ") || strings.Contains(n, "  ") {
			t.Fatalf("Normalize(%q) = %q: stray spaces", s, n)
		}
		if again := Normalize(n); again != n {
			t.Fatalf("Normalize not idempotent: %q -> %q -> %q", s, n, again)
		}
	})
}
