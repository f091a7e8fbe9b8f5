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

	"go.yaml.in/yaml/v3"
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

// Subset keeps the first n intents of every split and a proportional share
// of the out-of-scope utterances, for quick runs.
func (d *Dataset) Subset(n int) *Dataset {
	intents := d.Intents()
	keep := map[string]bool{}
	for _, in := range intents[:min(n, len(intents))] {
		keep[in] = true
	}
	f := func(us []Utterance) []Utterance {
		var out []Utterance
		for _, u := range us {
			if keep[u.Intent] {
				out = append(out, u)
			}
		}
		return out
	}
	share := func(us []Utterance) []Utterance { return us[:max(1, len(us)*len(keep)/len(intents))] }
	return &Dataset{Train: f(d.Train), Val: f(d.Val), Test: f(d.Test),
		OOSTrain: share(d.OOSTrain), OOSVal: share(d.OOSVal), OOSTest: share(d.OOSTest)}
}

// Mode is the one mode of the configuration Config writes.
const Mode = "assistant"

// Answer is the id of the command an intent's picker selection invokes;
// an open_picker decision for the intent carries it.
func Answer(intent string) string { return "answer_" + intent }

// Config writes, as YAML a user could have written, a configuration with
// one launcher command per in-scope intent whose examples are its
// training utterances, and the example threshold. A launcher's picker
// offers one answer item, taken by the intent's own answer command (which
// clears the active context), so the decision names the intent. With
// negatives, the out-of-scope training utterances (oos_train) are the
// configuration's negative examples: the published "oos-train" setting.
func (d *Dataset) Config(threshold float64, negatives bool) ([]byte, error) {
	examples := map[string][]string{}
	for _, u := range d.Train {
		examples[u.Intent] = append(examples[u.Intent], u.Text)
	}
	type m = map[string]any
	var cmds []any
	var ids []string
	for _, n := range d.Intents() {
		cmds = append(cmds,
			m{"id": n, "display_name": n, "kind": "launcher", "target_catalog": "answers",
				"on_select": Answer(n), "examples": examples[n]},
			m{"id": Answer(n), "display_name": "Answer " + n, "tool": "agent_clear_active_entity",
				"parameter": "answer", "resolver": m{"catalog": "answers"}, "clears_active_context": true})
		ids = append(ids, n, Answer(n))
	}
	router := m{"example_threshold": threshold}
	if negatives {
		var neg []string
		for _, u := range d.OOSTrain {
			neg = append(neg, u.Text)
		}
		router["negative_examples"] = neg
	}
	return yaml.Marshal(m{
		"version":   1,
		"modes":     []any{m{"key": Mode, "display_name": "Assistant", "default": true, "toolboxes": []string{"intents"}}},
		"toolboxes": []any{m{"id": "intents", "display_name": "Intents", "catalogs": []string{"answers"}, "commands": ids}},
		"catalogs": []any{m{"id": "answers", "display_name": "Answers", "entity_type": "answer",
			"items": []any{m{"id": "answer", "display_name": "Answer"}}}},
		"commands": cmds,
		"router":   router,
	})
}
