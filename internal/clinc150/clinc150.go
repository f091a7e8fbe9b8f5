// Package clinc150 loads the CLINC150 intent-classification dataset
// (Larson et al., 2019; CC BY 3.0; see testdata/README.md), which the
// example-based router is measured on.
package clinc150

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// OutOfScope is the intent of every out-of-scope utterance.
const OutOfScope = "oos"

// Utterance is one labelled sentence.
type Utterance struct {
	Text   string
	Intent string // OutOfScope for out-of-scope utterances
}

// Dataset is the "full" split: 150 in-scope intents with 100 training, 20
// validation and 30 test utterances each, and out-of-scope utterances for
// each split.
type Dataset struct {
	Train, Val, Test          []Utterance
	OOSTrain, OOSVal, OOSTest []Utterance
}

// Path is the dataset copy in this repository, for tests and for running
// the benchmark from a checkout.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "data_full.json")
}

// Load reads data_full.json.
func Load(path string) (*Dataset, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f map[string][][2]string
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d := &Dataset{}
	for _, s := range []struct {
		key string
		dst *[]Utterance
	}{
		{"train", &d.Train}, {"val", &d.Val}, {"test", &d.Test},
		{"oos_train", &d.OOSTrain}, {"oos_val", &d.OOSVal}, {"oos_test", &d.OOSTest},
	} {
		rows, ok := f[s.key]
		if !ok || len(rows) == 0 {
			return nil, fmt.Errorf("%s: no %q split: is this CLINC150's data_full.json?", path, s.key)
		}
		for _, r := range rows {
			*s.dst = append(*s.dst, Utterance{Text: r[0], Intent: r[1]})
		}
	}
	return d, nil
}

// Intents returns the in-scope intents in order of first appearance in
// the training split.
func (d *Dataset) Intents() []string {
	var out []string
	seen := map[string]bool{}
	for _, u := range d.Train {
		if !seen[u.Intent] {
			seen[u.Intent] = true
			out = append(out, u.Intent)
		}
	}
	return out
}
