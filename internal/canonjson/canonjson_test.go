package canonjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"pgregory.net/rapid"

	"github.com/agentplane/agentplane/internal/canonjson"
)

func canon(t *testing.T, in string, opts *canonjson.Options) string {
	t.Helper()
	out, err := canonjson.Append(nil, []byte(in), opts)
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	return string(out)
}

func TestAppend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{`{"b": 1, "a": [true, 1.50, null]}`, `{"a":[true,1.5,null],"b":1}`},
		{`"\u00e9\u0041\/\n\u001f\u2028"`, "\"éA/\\n\\u001f\u2028\""},
		{`[-0, 0.0, 1e21, 1e-7, 123456789012345678, 1E2, -1.25e-3]`, `[0,0,1e+21,1e-7,123456789012345680,100,-0.00125]`},
		{`{"\ud83d\ude00":1,"\ue000":2,"a":3}`, "{\"a\":3,\"\U0001F600\":1,\"\ue000\":2}"}, // UTF-16 order: surrogates before U+E000
		{` { } `, `{}`},
		{`[]`, `[]`},
		// the RFC's own example, §3.2.3
		{`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
	} {
		if got := canon(t, c.in, nil); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.in, got, c.want)
		}
	}
	if got := canon(t, `{"hash":"x","a":{"hash":1}}`, &canonjson.Options{Omit: "hash"}); got != `{"a":{"hash":1}}` {
		t.Errorf("omit: %s", got)
	}
}

func TestStrict(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{``, "empty input"},
		{`{"a":1,"a":2}`, `duplicate member name "a"`},
		{`{"a":1,"\u0061":2}`, `duplicate member name "a"`},
		{`{"text":1,"Text":2}`, `differ only in letter case`},
		{`{"straße":1,"STRASSE":2,"Straße":3}`, `differ only in letter case`},
		{"\"\xff\"", "invalid UTF-8"},
		{`"\ud800"`, "lone surrogate"},
		{`"\udc00x"`, "lone surrogate"},
		{`[1] [2]`, "data after the JSON value"},
		{`[1e400]`, "out of range"},
		{`[01]`, "leading zero"},
		{"\"a\x01\"", "control character"},
		{`{"a" 1}`, "expected :"},
		{`[1,]`, "unexpected character"},
		{`nul`, "invalid literal"},
		{strings.Repeat("[", canonjson.MaxDepth+1), "nested deeper"},
	} {
		_, err := canonjson.Append(nil, []byte(c.in), &canonjson.Options{FoldedNames: true})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
		if canonjson.Check([]byte(c.in)) == nil {
			t.Errorf("Check(%q) accepted it", c.in)
		}
	}
	if err := canonjson.Check([]byte(`{"text":1,"Text":2}`)); err == nil {
		t.Error("Check allowed case-folded duplicates")
	}
	if _, err := canonjson.Append(nil, []byte(`{"text":1,"Text":2}`), nil); err != nil {
		t.Errorf("without FoldedNames, case-different names are distinct: %v", err)
	}
}

// jsonValue generates JSON values with awkward strings, numbers and names.
func jsonValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kind := rapid.IntRange(0, 6).Draw(t, "kind")
		if depth <= 0 && kind >= 5 {
			kind = 3
		}
		switch kind {
		case 0:
			return nil
		case 1:
			return rapid.Bool().Draw(t, "b")
		case 2:
			return rapid.Float64().Filter(func(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }).Draw(t, "f")
		case 3:
			return rapid.String().Draw(t, "s")
		case 4:
			return rapid.Int64().Draw(t, "i")
		case 5:
			return rapid.SliceOfN(jsonValue(depth-1), 0, 4).Draw(t, "a")
		default:
			return rapid.MapOfN(rapid.String(), jsonValue(depth-1), 0, 5).Draw(t, "o")
		}
	})
}

// TestMatchesLibrary checks the canonical form against an independent
// RFC 8785 implementation on generated values, encoded by encoding/json
// with and without HTML escaping and indentation.
func TestMatchesLibrary(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := jsonValue(3).Draw(t, "v")
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(rapid.Bool().Draw(t, "html"))
		if rapid.Bool().Draw(t, "indent") {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(v); err != nil {
			t.Skip(err)
		}
		want, err := jcs.Transform(buf.Bytes())
		if err != nil {
			t.Fatalf("library: %v on %s", err, buf.Bytes())
		}
		got, err := canonjson.Append(nil, buf.Bytes(), nil)
		if err != nil {
			t.Fatalf("%v on %s", err, buf.Bytes())
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("input %s\n got  %s\n want %s", buf.Bytes(), got, want)
		}
	})
}

func TestAppendNumber(t *testing.T) {
	t.Parallel()
	// ECMAScript's own outputs for these doubles
	a, b := 0.1, 0.2
	if got := string(canonjson.AppendNumber(nil, a+b)); got != "0.30000000000000004" {
		t.Errorf("0.1+0.2: got %s", got)
	}
	for f, want := range map[float64]string{
		1: "1", -1.5: "-1.5", 1e21: "1e+21", 1e20: "100000000000000000000", 1e-6: "0.000001", 1e-7: "1e-7",
		5e-324: "5e-324", math.MaxFloat64: "1.7976931348623157e+308", 123e-20: "1.23e-18",
	} {
		if got := string(canonjson.AppendNumber(nil, f)); got != want {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,1.5]}`, `"\u00e9"`, `[1e21,-0]`, `{"\ud83d\ude00":1,"\ue000":2}`, `{"a":{"b":[{}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := canonjson.Append(nil, b, nil)
		want, lerr := jcs.Transform(b)
		if err != nil {
			return // stricter than the library is allowed (lone surrogates, depth)
		}
		if lerr == nil && !bytes.Equal(got, want) {
			t.Fatalf("input %q\n got  %s\n want %s", b, got, want)
		}
		again, err := canonjson.Append(nil, got, nil)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("not idempotent: %s -> %s (%v)", got, again, err)
		}
		if !json.Valid(got) || !utf8.Valid(got) {
			t.Fatalf("output is not JSON in UTF-8: %q", got)
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	rec, err := os.ReadFile("../../audit/testdata/v0.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	line := bytes.SplitN(rec, []byte("\n"), 4)[2]
	b.Run("ours", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		var out []byte
		for i := 0; i < b.N; i++ {
			if out, err = canonjson.Append(out[:0], line, &canonjson.Options{FoldedNames: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gowebpki-jcs", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := jcs.Transform(line); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func Example() {
	out, _ := canonjson.Append(nil, []byte(`{"b": 1, "a": [true, 1.50]}`), nil)
	fmt.Println(string(out))
	// Output: {"a":[true,1.5],"b":1}
}

// TestAppendValueRefusesWhatCheckRefuses: embedded JSON and map keys whose
// member names differ only in letter case are refused when written, not
// stored for the reader to refuse. (A notification payload {"a":1,"A":2}
// made a session's audit chain unreadable for good.)
func TestAppendValueRefusesWhatCheckRefuses(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{
		"RawMessage": struct {
			P json.RawMessage `json:"p"`
		}{json.RawMessage(`{"x":{"a":1,"A":2}}`)},
		"MapKeys":    map[string]any{"text": 1, "Text": 2},
		"NestedMap":  map[string]any{"x": map[string]int{"é": 1, "É": 2}},
		"Marshaler":  struct{ T json.Marshaler }{rawMarshaler(`{"k":1,"K":2}`)},
		"Duplicates": struct{ P json.RawMessage }{json.RawMessage(`{"a":1,"a":2}`)},
	} {
		if out, err := canonjson.AppendValue(nil, v, nil); err == nil {
			t.Errorf("%s: written as %s", name, out)
		}
	}
}

type rawMarshaler string

func (r rawMarshaler) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// record is shaped like the values AppendValue writes: nested structs,
// pointers, omitempty, times, raw JSON, maps, slices, numbers.
type record struct {
	V       int             `json:"v,omitempty"`
	Session string          `json:"session"`
	Time    time.Time       `json:"time"`
	Zulu    *time.Time      `json:"zulu,omitempty"`
	Input   *inner          `json:"input,omitempty"`
	Out     json.RawMessage `json:"output,omitempty"`
	Roles   []string        `json:"roles,omitempty"`
	Tags    map[string]any  `json:"tags,omitempty"`
	Score   float64         `json:"score"`
	Big     int64           `json:"big"`
	Skip    string          `json:"-"`
	Plain   string
	Hash    string `json:"hash"`
	hidden  string
}

type inner struct {
	Text  string   `json:"text"`
	UI    bool     `json:"ui"`
	List  []inner  `json:"list,omitempty"`
	Ptr   *float64 `json:"ptr"`
	Bytes []byte   `json:"bytes,omitempty"`
}

// TestAppendValueMatchesMarshal: writing a value directly gives exactly
// the canonical form of its encoding/json encoding, held to the strict
// reader's rules; whatever it writes, Check accepts.
func TestAppendValueMatchesMarshal(t *testing.T) {
	t.Parallel()
	str := rapid.OneOf(rapid.String(), rapid.StringOf(rapid.RuneFrom(nil, &unicode.RangeTable{R16: []unicode.Range16{{Lo: 0, Hi: 0x7f, Stride: 1}}})),
		rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) })) // invalid UTF-8 too
	var innerGen func(depth int) *rapid.Generator[inner]
	innerGen = func(depth int) *rapid.Generator[inner] {
		return rapid.Custom(func(t *rapid.T) inner {
			in := inner{Text: str.Draw(t, "text"), UI: rapid.Bool().Draw(t, "ui")}
			if depth > 0 {
				in.List = rapid.SliceOfN(innerGen(depth-1), 0, 2).Draw(t, "list")
			}
			if rapid.Bool().Draw(t, "ptr") {
				f := rapid.Float64().Filter(func(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }).Draw(t, "f")
				in.Ptr = &f
			}
			if rapid.Bool().Draw(t, "b") {
				in.Bytes = []byte(str.Draw(t, "bytes"))
			}
			return in
		})
	}
	rapid.Check(t, func(t *rapid.T) {
		r := record{V: rapid.IntRange(0, 3).Draw(t, "v"), Session: str.Draw(t, "session"), Plain: str.Draw(t, "plain"),
			Time:  time.Unix(rapid.Int64Range(0, 1<<34).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "ns")).UTC(),
			Score: rapid.Float64().Filter(func(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }).Draw(t, "score"),
			Big:   rapid.Int64().Draw(t, "big"), Hash: "h", Skip: "s", hidden: "x"}
		if rapid.Bool().Draw(t, "zulu") {
			z := r.Time.Add(time.Hour).In(time.FixedZone("x", 3600))
			r.Zulu = &z
		}
		if rapid.Bool().Draw(t, "input") {
			in := innerGen(2).Draw(t, "inner")
			r.Input = &in
		}
		if rapid.Bool().Draw(t, "out") {
			v := jsonValue(2).Draw(t, "out")
			r.Out, _ = json.Marshal(v)
		}
		r.Roles = rapid.SliceOfN(str, 0, 3).Draw(t, "roles")
		if rapid.Bool().Draw(t, "tags") {
			r.Tags = map[string]any{str.Draw(t, "k1"): jsonValue(1).Draw(t, "v1"), str.Draw(t, "k2"): 2}
		}
		b, err := json.Marshal(&r)
		if err != nil {
			t.Skip(err)
		}
		want, werr := canonjson.Append(nil, b, &canonjson.Options{Omit: "hash", FoldedNames: true})
		got, err := canonjson.AppendValue(nil, &r, &canonjson.Options{Omit: "hash"})
		if werr != nil || err != nil {
			if werr == nil || err == nil { // map keys that are one name once coerced or folded: both refuse
				t.Fatalf("Append: %v, AppendValue: %v", werr, err)
			}
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("\n got  %s\n want %s", got, want)
		}
		if err := canonjson.Check(got); err != nil {
			t.Fatalf("the strict reader refuses what AppendValue wrote: %v\n%s", err, got)
		}
	})
}

// TestErrorsNameThePath: a refusal says which member or element it is
// about, so a client can find it in a large body.
func TestErrorsNameThePath(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, path string }{
		{`{"payload":{"a":1,"A":2}}`, "payload"},
		{`{"text":"hello","text":"switch"}`, ""},
		{`{"n":1e999}`, "n"},
		{`{"list":[1,{"x":"\ud800"}]}`, "list[1].x"},
		{`{"a":{"b":[true,[1,2,1e400]]}}`, "a.b[1][2]"},
		{`[[1,{"k":[{"a":1,"a":2}]}]]`, "[0][1].k[0]"},
		{`{"a":"x","b":"\ud800"}`, "b"},
	} {
		err := canonjson.Check([]byte(tt.in))
		var e *canonjson.Error
		if !errors.As(err, &e) {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if e.Path != tt.path {
			t.Errorf("%s: path %q, want %q (%v)", tt.in, e.Path, tt.path, err)
		}
	}
}
