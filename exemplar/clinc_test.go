package exemplar_test

import (
	"testing"

	"github.com/agentplane/agentplane/exemplar"
	"github.com/agentplane/agentplane/resolve"
)

// TestCLINC150Subset trains on the first 30 CLINC150 intents and checks
// validation accuracy, so a change that breaks the features or the
// training shows here and not only in the benchmark.
func TestCLINC150Subset(t *testing.T) {
	ex, d, labels := clincExamples(t)
	var sub []exemplar.Example
	for _, e := range ex {
		if e.Label < 30 {
			sub = append(sub, e)
		}
	}
	m, err := exemplar.Train(sub, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := 0, 0
	for _, u := range d.Val {
		if labels[u.Intent] >= 30 {
			continue
		}
		n++
		if m.Classify(resolve.Fields(nil, resolve.Normalize(u.Text)), nil).Label == labels[u.Intent] {
			ok++
		}
	}
	acc := float64(ok) / float64(n)
	t.Logf("30 intents, %d examples, %d features: validation accuracy %.4f", len(sub), m.Features(), acc)
	if n != 600 || acc < 0.93 {
		t.Errorf("validation accuracy %.4f over %d utterances; want ≥ 0.93 over 600", acc, n)
	}
}
