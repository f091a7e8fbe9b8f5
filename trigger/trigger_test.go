package trigger

import (
	"strings"
	"testing"
)

func words(s string) []string { return strings.Fields(s) }

func TestParseAndMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
		input   string
		ok      bool
		slot    string
	}{
		{"Simple", "switch to {item} mode", "switch to ddr mode", true, "ddr"},
		{"Alternative", "(switch|change|go) to {item} mode", "go to ddr mode", true, "ddr"},
		{"OptionalPresentPreferred", "switch to [the] {item} mode", "switch to the ddr mode", true, "ddr"},
		{"OptionalAbsent", "switch to [the] {item} mode", "switch to ddr mode", true, "ddr"},
		{"MultiWordSlot", "switch to {item} mode", "switch to sales ops mode", true, "sales ops"},
		{"SlotAtEnd", "change [the] mode to {item}", "change the mode to ddr", true, "ddr"},
		{"NoSlot", "[i want to] work on [the] email templates", "work on email templates", true, ""},
		{"NoSlotFull", "[i want to] work on [the] email templates", "i want to work on the email templates", true, ""},
		{"MultiWordAlternative", "(go over|move) to {item}", "go over to ddr", true, "ddr"},
		{"NormalizedLiteral", "Don't-Panic {item}", "dont panic now", true, "now"},
		{"NotWhole", "switch to {item} mode", "dont switch to ddr mode", false, ""},
		{"TrailingWords", "switch to {item} mode", "switch to ddr mode yesterday", false, ""},
		{"EmptySlot", "switch to {item} mode", "switch to mode", false, ""},
		{"Question", "switch to {item} mode", "should i switch to ddr mode", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Parse(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			w := words(tt.input)
			_, s, e, ok := p.Match(w)
			if ok != tt.ok || strings.Join(w[s:e], " ") != tt.slot {
				t.Fatalf("Match(%q) = %v %q; want %v %q", tt.input, ok, strings.Join(w[s:e], " "), tt.ok, tt.slot)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, pattern, want string }{
		{"Empty", "", "empty utterance"},
		{"OnlyOptional", "[please]", "empty utterance"},
		{"OnlySlot", "{item}", "only a slot"},
		{"OptionalThenSlot", "[go to] {item}", "only a slot"},
		{"Unclosed", "(switch|change to x", "unclosed"},
		{"UnclosedOptional", "switch [to x", "unclosed"},
		{"EmptyAlt", "(a||b) {item}", "empty alternative"},
		{"TwoSlots", "{a} and {b}", "second slot"},
		{"SlotInGroup", "(go to {item}|x)", "inside a group"},
		{"BadSlotName", "go to {it em}", "slot name"},
		{"AlternativesInOptional", "play [the|a] {item}", "alternatives inside '[ ]' need '( )'"},
		{"StrayClose", "go to ) {item}", "unexpected ')'"},
		{"StrayBrace", "go to } x", "unexpected '}'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.pattern)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) error = %v, want %q", tt.pattern, err, tt.want)
			}
		})
	}
}

func TestParseTooManyPhrasings(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.Repeat("[a] ", 11) + "b")
	if err == nil || !strings.Contains(err.Error(), "more than 1024") {
		t.Fatalf("err = %v", err)
	}
}

func TestSetOrderAndFillers(t *testing.T) {
	t.Parallel()
	s := NewSet()
	for i, p := range []string{"open {item}", "open the {item}", "{item} please open"} {
		s.Add(i*10, MustParse(t, p))
	}
	hits := s.Match(words("open the book"), nil)
	if len(hits) != 2 || hits[0].Owner != 0 || hits[1].Owner != 10 {
		t.Fatalf("hits = %+v", hits)
	}
	if hits[0].Start != 1 || hits[1].Start != 2 {
		t.Fatalf("slot spans = %+v", hits)
	}
	s2 := NewSet()
	s2.Add(0, MustParse(t, "send (this|it) to [the] {item} [list]"))
	hits = s2.Match(words("send it to the q1 pilot list"), nil)
	var spans []string
	for _, h := range hits {
		spans = append(spans, strings.Join(words("send it to the q1 pilot list")[h.Start:h.End], " "))
	}
	if strings.Join(spans, "|") != "q1 pilot|the q1 pilot|q1 pilot list|the q1 pilot list" {
		t.Fatalf("want every distinct slot span, preferred first; got %+v", hits)
	}
	f := NewFillers(DefaultFillers)
	got := strings.Join(f.Strip(words("can you please open the book now thanks")), " ")
	if got != "open the book" {
		t.Fatalf("Strip = %q", got)
	}
	if got := f.Strip(words("please")); len(got) != 1 {
		t.Fatalf("Strip must leave a lone filler alone, got %q", got)
	}
}

func MustParse(tb testing.TB, s string) *Pattern {
	tb.Helper()
	p, err := Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// FuzzParse checks that Parse never panics, and that every phrasing of a
// parsed pattern matches an utterance built from it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"(switch|change|go|move) [over] to [the] {item} mode", "[i want to] work on [the] email templates", "{x}", "((a|b)|[c d]) {i} e", "[[a]] b", "a (b|[c]) {s}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			return
		}
		for _, ph := range p.Phrasings {
			w := append(append([]string(nil), ph.Prefix...), ph.Suffix...)
			if ph.Slot {
				w = append(append(append([]string(nil), ph.Prefix...), "zzslot"), ph.Suffix...)
			}
			if _, _, _, ok := p.Match(w); !ok {
				t.Fatalf("pattern %q does not match its own phrasing %q", s, w)
			}
		}
	})
}

// TestLongPatternsRefused: a pattern of thousands of words once took
// seconds to expand (quadratic); it is refused, saying why.
func TestLongPatternsRefused(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		strings.Repeat("word ", 20000):   "bytes; the limit is 512",
		strings.Repeat("a ", 60) + "{x}": "words; the limit is 48",
	} {
		_, err := Parse(src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
	if _, err := Parse(strings.Repeat("a ", 40) + "{x}"); err != nil {
		t.Fatalf("a pattern within the limits: %v", err)
	}
}

func TestFillerVariants(t *testing.T) {
	t.Parallel()
	f := NewFillers(DefaultFillers)
	var got []string
	for _, v := range f.Variants(words("please play apocalypse now now please"), nil) {
		got = append(got, strings.Join(v, " "))
	}
	want := []string{
		"please play apocalypse now now please",
		"please play apocalypse now now", "play apocalypse now now please",
		"please play apocalypse now", "play apocalypse now now",
		"please play apocalypse", "play apocalypse now",
		"play apocalypse",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("variants\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if v := f.Variants(words("please"), nil); len(v) != 1 || v[0][0] != "please" {
		t.Fatalf("a lone filler: %q", v)
	}
}

func TestFillersRemove(t *testing.T) {
	f := NewFillers(DefaultFillers)
	for in, want := range map[string]string{
		"put milk on my list please":         "put milk on my list",
		"can you please show me the alerts":  "show me the alerts",
		"thank you":                          "",
		"show the runbooks for me right now": "show the runbooks",
		"pleased to meet you":                "pleased to meet you",
	} {
		got := strings.Join(f.Remove(strings.Fields(in), nil), " ")
		if got != want {
			t.Errorf("Remove(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPossessiveSlot: {item}'s matches the name with the s normalization
// joins to it ("mira holm's" is "mira holms"), and only such a word.
func TestPossessiveSlot(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"open {item}'s account", "open {item}’s account"} {
		p, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		ph, s, e, ok := p.Match(strings.Fields("open mira holms account"))
		if !ok || !ph.Possessive || s != 1 || e != 3 {
			t.Errorf("%q: %v %d %d %v", src, ok, s, e, ph)
		}
		if _, _, _, ok := p.Match(strings.Fields("open mira holm account")); ok {
			t.Errorf("%q matched a name without the possessive s", src)
		}
	}
}
