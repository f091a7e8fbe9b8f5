package exemplar_test

import (
	"testing"

	"github.com/agentplane/agentplane/exemplar"
	"github.com/agentplane/agentplane/internal/testkit/clinc150"
	"github.com/agentplane/agentplane/resolve"
)

func clincExamples(tb testing.TB) ([]exemplar.Example, *clinc150.Dataset, map[string]int) {
	tb.Helper()
	d, err := clinc150.Load(clinc150.Path())
	if err != nil {
		tb.Fatal(err)
	}
	labels := map[string]int{}
	for i, in := range d.Intents() {
		labels[in] = i
	}
	ex := make([]exemplar.Example, len(d.Train))
	for i, u := range d.Train {
		ex[i] = exemplar.Example{Label: labels[u.Intent], Text: u.Text}
	}
	return ex, d, labels
}

// BenchmarkTrain trains on CLINC150's 15,000 training utterances (150 labels).
func BenchmarkTrain(b *testing.B) {
	ex, _, _ := clincExamples(b)
	for b.Loop() {
		if _, err := exemplar.Train(ex, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClassify classifies CLINC150 validation utterances.
func BenchmarkClassify(b *testing.B) {
	ex, d, _ := clincExamples(b)
	m, err := exemplar.Train(ex, nil)
	if err != nil {
		b.Fatal(err)
	}
	words := make([][]string, len(d.Val))
	for i, u := range d.Val {
		words[i] = resolve.Fields(nil, resolve.Normalize(u.Text))
	}
	i := 0
	for b.Loop() {
		m.Classify(words[i%len(words)], nil)
		i++
	}
}
