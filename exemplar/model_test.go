package exemplar

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/resolve"
)

var weather = []Example{
	{0, "what is the weather in paris"}, {0, "weather forecast for oslo"}, {0, "will it rain in oslo tomorrow"},
	{0, "how warm is it in rome"}, {0, "do i need an umbrella today"},
	{1, "play some jazz"}, {1, "put on my running playlist"}, {1, "play the next song"},
	{1, "i want to hear music"}, {1, "start the music"},
	{2, "set an alarm for seven"}, {2, "wake me up at six tomorrow"}, {2, "alarm at 7 am please"},
	{2, "cancel my morning alarm"}, {2, "set a wake up call"},
}

func words(s string) []string { return resolve.Fields(nil, resolve.Normalize(s)) }

func train(t *testing.T, ex []Example) *Model {
	t.Helper()
	m, err := Train(ex, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestClassify(t *testing.T) {
	m := train(t, weather)
	for _, c := range []struct {
		text  string
		label int
	}{
		{"what's the weather like in oslo", 0},
		{"play jazz music", 1},
		{"set my alarm for six", 2},
	} {
		r := m.Classify(words(c.text), nil)
		if r.Label != c.label {
			t.Errorf("%q: label %d, want %d (%+v)", c.text, r.Label, c.label, r)
		}
		if r.Probability <= 0 || r.Probability > 1 || r.Confidence() <= 0 || r.Confidence() > 1 {
			t.Errorf("%q: probability %v, confidence %v out of (0, 1]", c.text, r.Probability, r.Confidence())
		}
		if len(r.Nearest) != 3 || r.Similarity != r.Nearest[0].Similarity {
			t.Fatalf("%q: nearest %+v, similarity %v", c.text, r.Nearest, r.Similarity)
		}
		for i, n := range r.Nearest {
			if weather[n.Example].Label != c.label || weather[n.Example].Text != n.Text {
				t.Errorf("%q: neighbour %+v is not an example of label %d", c.text, n, c.label)
			}
			if i > 0 && n.Similarity > r.Nearest[i-1].Similarity {
				t.Errorf("%q: neighbours not in descending similarity: %+v", c.text, r.Nearest)
			}
		}
	}
	// An utterance that is an example is its own nearest example.
	r := m.Classify(words("wake me up at six tomorrow"), nil)
	if r.Nearest[0].Text != "wake me up at six tomorrow" || r.Similarity < 0.999 || r.Coverage != 1 || r.Known != 1 {
		t.Errorf("example itself: %+v", r)
	}
}

func TestConfidenceSeparatesStrangers(t *testing.T) {
	m := train(t, weather)
	in := m.Classify(words("will it rain in rome tomorrow"), nil).Confidence()
	for _, s := range []string{"who wrote hamlet", "zzz qqq", "the quarterly revenue of acme corp"} {
		if out := m.Classify(words(s), nil).Confidence(); out >= in/2 {
			t.Errorf("%q: confidence %.3f is not well below an in-domain %.3f", s, out, in)
		}
	}
}

func TestAllowedRestrictsLabels(t *testing.T) {
	m := train(t, weather)
	w := words("what is the weather in paris")
	r := m.Classify(w, []bool{false, true, true})
	if r.Label == 0 || r.Label < 0 {
		t.Fatalf("label %d with label 0 disallowed", r.Label)
	}
	if r.Allowed != 2 {
		t.Errorf("%d labels allowed, want 2", r.Allowed)
	}
	if r = m.Classify(w, make([]bool, 3)); r.Label != -1 || r.Confidence() != 0 || r.Nearest != nil {
		t.Errorf("nothing allowed: %+v", r)
	}
}

func TestEmptyAndUnknownWords(t *testing.T) {
	m := train(t, weather)
	for _, w := range [][]string{nil, {}, {"xyzzy"}} {
		r := m.Classify(w, nil)
		if r.Confidence() != 0 || r.Known != 0 || r.Coverage != 0 {
			t.Errorf("%q: %+v, confidence %v", w, r, r.Confidence())
		}
	}
}

func TestTrainIsDeterministic(t *testing.T) {
	a, b := train(t, weather), train(t, weather)
	if !reflect.DeepEqual(a.w, b.w) || !reflect.DeepEqual(a.bias, b.bias) || !reflect.DeepEqual(a.features, b.features) {
		t.Fatal("two trainings on the same examples differ")
	}
	other, err := Train(weather, &Options{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.w, other.w) {
		t.Error("the seed changes nothing")
	}
	for _, s := range []string{"play jazz", "umbrella in oslo", "alarm"} {
		if ra, rb := a.Classify(words(s), nil), b.Classify(words(s), nil); !reflect.DeepEqual(ra, rb) {
			t.Errorf("%q: %+v != %+v", s, ra, rb)
		}
	}
}

func TestTrainRejects(t *testing.T) {
	if _, err := Train(nil, nil); !errors.Is(err, ErrNoExamples) {
		t.Errorf("no examples: %v", err)
	}
	if _, err := Train([]Example{{0, "  ?! "}, {1, ""}}, nil); !errors.Is(err, ErrNoExamples) {
		t.Errorf("examples without words: %v", err)
	}
	_, err := Train([]Example{{0, "fine"}, {-1, "bad label"}}, nil)
	if err == nil || !strings.Contains(err.Error(), `example 1 ("bad label") has negative label -1`) {
		t.Errorf("negative label: %v", err)
	}
}

func TestClassifyConcurrently(t *testing.T) {
	m := train(t, weather)
	texts := []string{"play jazz", "weather in rome", "alarm at six", "hello there"}
	want := make([]Result, len(texts))
	for i, s := range texts {
		want[i] = m.Classify(words(s), nil)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for n := 0; n < 200; n++ {
				i := (g + n) % len(texts)
				if got := m.Classify(words(texts[i]), nil); !reflect.DeepEqual(got, want[i]) {
					t.Errorf("%q: concurrent result differs", texts[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzClassify checks that any text classifies without panicking, with
// probabilities and similarities in range and the same result twice.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"play jazz", "", "🙂 émoji", "a a a a a a a a", "<>", "x\x00y"} {
		f.Add(s)
	}
	m, err := Train(weather, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w := words(s)
		r := m.Classify(w, nil)
		c := r.Confidence()
		if c < 0 || c > 1.0001 || r.Probability < 0 || r.Probability > 1.0001 || r.Similarity < -0.0001 || r.Similarity > 1.0001 {
			t.Fatalf("%q: out of range: %+v", s, r)
		}
		if len(w) > 0 && r.Label < 0 {
			t.Fatalf("%q: no label with every label allowed", s)
		}
		if again := m.Classify(w, nil); !reflect.DeepEqual(r, again) {
			t.Fatalf("%q: not deterministic", s)
		}
	})
}
