// Package exemplar recognises which command an utterance asks for from
// whole example utterances: deterministic, explainable, CPU-only, no model
// download.
//
// Train builds, from labelled examples, a sparse TF-IDF space of words,
// word pairs and character n-grams, and a softmax (multinomial logistic)
// classifier over it, trained by stochastic gradient descent in a fixed
// order with a fixed seed. Classify returns the most likely label among
// those the caller allows, its probability, and the nearest examples of
// that label by cosine similarity — the explanation, and the second half of
// the evidence a caller thresholds on:
//
//	m, _ := exemplar.Train(examples, nil)
//	r := m.Classify(words, nil)
//	if r.Confidence() >= threshold { ... r.Label ... }
//
// The same examples and options always give the same model, and the same
// words the same result.
package exemplar

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/agentplane/agentplane/resolve"
)

// Example is one labelled utterance.
type Example struct {
	Label int    // the class, 0 ≤ Label < the number of labels
	Text  string // a whole utterance, as a user would type it
}

// Options tune training. The zero value gives the defaults.
type Options struct {
	Epochs       int     // passes over the examples; default 8
	LearningRate float64 // initial SGD step, decaying linearly to zero; default 4
	Seed         uint64  // shuffling seed; default 1
}

func (o *Options) withDefaults() Options {
	out := Options{Epochs: 8, LearningRate: 4, Seed: 1}
	if o == nil {
		return out
	}
	if o.Epochs > 0 {
		out.Epochs = o.Epochs
	}
	if o.LearningRate > 0 {
		out.LearningRate = o.LearningRate
	}
	if o.Seed != 0 {
		out.Seed = o.Seed
	}
	return out
}

// Model is a trained classifier. It is immutable and safe for concurrent use.
type Model struct {
	labels   int
	features map[uint64]int32 // feature hash -> id; ids ascend with hashes
	idf      []float32        // by feature id
	w        []float32        // feature-major: w[f*labels+c]
	bias     []float32        // by label
	examples []Example
	vecs     []vector           // by example
	byLabel  [][]int32          // example indices of each label
	vocab    map[uint64][]int32 // word hash -> labels whose examples use the word, ascending
	scratch  sync.Pool          // *scratch
}

type scratch struct {
	ext    extractor
	vec    vector
	scores []float32
	dense  []float32 // the query vector by feature id, zero elsewhere
}

// ErrNoExamples is returned by Train when there is nothing to learn from.
var ErrNoExamples = errors.New("exemplar: no examples")

// Train builds a model from examples of labels 0..n-1, where n is one more
// than the largest label. Examples whose text normalizes to nothing are
// skipped; an example with a negative label is an error.
func Train(examples []Example, opts *Options) (*Model, error) {
	o := opts.withDefaults()
	m := &Model{}
	var words [][]string
	var hashes [][]uint64
	var ext extractor
	df := map[uint64]int32{}
	for i, ex := range examples {
		if ex.Label < 0 {
			return nil, fmt.Errorf("exemplar: example %d (%q) has negative label %d", i, ex.Text, ex.Label)
		}
		w := resolve.Fields(nil, resolve.Normalize(ex.Text))
		if len(w) == 0 {
			continue
		}
		m.labels = max(m.labels, ex.Label+1)
		m.examples = append(m.examples, ex)
		words = append(words, w)
		h := slices.Compact(slices.Clone(ext.extract(w)))
		for _, x := range h {
			df[x]++
		}
		hashes = append(hashes, slices.Clone(ext.hashes))
	}
	if len(m.examples) == 0 {
		return nil, ErrNoExamples
	}
	keep := make([]uint64, 0, len(df))
	for h := range df {
		keep = append(keep, h)
	}
	slices.Sort(keep)
	m.features = make(map[uint64]int32, len(keep))
	m.idf = make([]float32, len(keep))
	n := float64(len(m.examples))
	for i, h := range keep {
		m.features[h] = int32(i)
		m.idf[i] = float32(math.Log((n+1)/(float64(df[h])+1)) + 1)
	}
	m.vocab = map[uint64][]int32{}
	for i, w := range words {
		l := int32(m.examples[i].Label)
		for _, x := range w {
			h := hashAdd(hashStart(kindWord), x)
			if ls := m.vocab[h]; len(ls) == 0 || ls[len(ls)-1] != l {
				// labels arrive in example order; keep each once, sorted later
				if !slices.Contains(ls, l) {
					m.vocab[h] = append(ls, l)
				}
			}
		}
	}
	for h, ls := range m.vocab {
		slices.Sort(ls)
		m.vocab[h] = slices.Clip(ls)
	}
	m.vecs = make([]vector, len(m.examples))
	m.byLabel = make([][]int32, m.labels)
	for i := range m.examples {
		m.weigh(hashes[i], &m.vecs[i])
		m.vecs[i].ids = slices.Clip(m.vecs[i].ids)
		m.vecs[i].vals = slices.Clip(m.vecs[i].vals)
		l := m.examples[i].Label
		m.byLabel[l] = append(m.byLabel[l], int32(i))
	}
	m.train(o)
	m.scratch.New = func() any {
		return &scratch{scores: make([]float32, m.labels), dense: make([]float32, len(m.idf))}
	}
	return m, nil
}

// train fits the softmax weights by SGD over the examples in an order
// shuffled with the seed, the step decaying linearly to zero.
func (m *Model) train(o Options) {
	c := m.labels
	m.w = make([]float32, len(m.idf)*c)
	m.bias = make([]float32, c)
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	order := make([]int, len(m.examples))
	for i := range order {
		order[i] = i
	}
	scores := make([]float32, c)
	grads := make([]float32, 0, c)
	touched := make([]int32, 0, c)
	steps := float64(o.Epochs * len(order))
	step := 0.0
	for e := 0; e < o.Epochs; e++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			lr := float32(o.LearningRate * (1 - step/steps))
			step++
			v := &m.vecs[i]
			m.scores(v, scores)
			softmax(scores, nil)
			y := m.examples[i].Label
			grads, touched = grads[:0], touched[:0]
			for k, p := range scores {
				g := p
				if k == y {
					g -= 1
				}
				if g > 1e-4 || g < -1e-4 {
					grads = append(grads, lr*g)
					touched = append(touched, int32(k))
				}
			}
			for j, f := range v.ids {
				row := m.w[int(f)*c : int(f)*c+c]
				x := v.vals[j]
				for t, k := range touched {
					row[k] -= x * grads[t]
				}
			}
			for t, k := range touched {
				m.bias[k] -= grads[t]
			}
		}
	}
}

// scores computes every label's raw score for v.
func (m *Model) scores(v *vector, out []float32) {
	c := m.labels
	out = out[:c]
	copy(out, m.bias)
	for j, f := range v.ids {
		axpy(v.vals[j], m.w[int(f)*c:][:len(out)], out)
	}
}

func isAllowed(allowed []bool, label int) bool {
	return allowed == nil || label < len(allowed) && allowed[label]
}

// softmax turns scores into probabilities over the labels allowed (all
// when allowed is nil); the others get zero.
func softmax(s []float32, allowed []bool) {
	top := float32(math.Inf(-1))
	for k, x := range s {
		if isAllowed(allowed, k) && x > top {
			top = x
		}
	}
	var sum float64
	for k, x := range s {
		if !isAllowed(allowed, k) {
			s[k] = 0
			continue
		}
		e := math.Exp(float64(x - top))
		s[k] = float32(e)
		sum += e
	}
	if sum > 0 {
		inv := float32(1 / sum)
		for k := range s {
			s[k] *= inv
		}
	}
}

// Features returns the number of distinct features the model knows.
func (m *Model) Features() int { return len(m.idf) }

// Neighbor is an example near the classified utterance.
type Neighbor struct {
	Example    int     // index among the model's examples
	Text       string  // the example's text
	Similarity float64 // cosine similarity, 0..1
}

// Result is what Classify found.
type Result struct {
	Label       int        // the most likely allowed label; -1 when none
	Probability float64    // its softmax probability among the allowed labels
	Allowed     int        // how many labels were allowed
	Similarity  float64    // cosine similarity to Label's nearest example
	Known       float64    // share of the utterance's distinct features the model knows
	Coverage    float64    // share of the utterance's words that occur in Label's examples
	Nearest     []Neighbor // Label's nearest examples sharing anything with the utterance, most similar first (at most 3)
}

// Confidence is the evidence a caller thresholds on, 0..1: the geometric
// mean of the label's probability and its similarity to its nearest
// example, scaled by the share of the utterance's features the model
// knows. Probability alone is not enough: among few labels any text gets
// a confident label; similarity keeps out what resembles no example, and
// unknown words mark what no example speaks of.
func (r Result) Confidence() float64 {
	if r.Label < 0 {
		return 0
	}
	return math.Sqrt(r.Probability*r.Similarity) * r.Known
}

// coverage is the share of the words that occur in the label's examples.
func (m *Model) coverage(label int, words []string) float64 {
	if len(words) == 0 {
		return 0
	}
	in := 0
	for _, w := range words {
		if m.Knows(label, w) {
			in++
		}
	}
	return float64(in) / float64(len(words))
}

// Knows reports whether some example of the label has the (normalized) word.
func (m *Model) Knows(label int, word string) bool {
	_, ok := slices.BinarySearch(m.vocab[hashAdd(hashStart(kindWord), word)], int32(label))
	return ok
}

// Spread returns how many labels have an example with the (normalized)
// word: 1 for a word only one label's examples use, the number of labels
// for one every label's do.
func (m *Model) Spread(word string) int {
	return len(m.vocab[hashAdd(hashStart(kindWord), word)])
}

// Labels returns the number of labels the model was trained on.
func (m *Model) Labels() int { return m.labels }

// Classify finds the most likely label for the normalized words among the
// labels allowed (allowed[label]; all when allowed is nil, none beyond
// len(allowed) otherwise) and its nearest examples.
func (m *Model) Classify(words []string, allowed []bool) Result {
	r := Result{Label: -1}
	s := m.scratch.Get().(*scratch)
	defer m.scratch.Put(s)
	known, total := m.weigh(s.ext.extract(words), &s.vec)
	if total > 0 {
		r.Known = float64(known) / float64(total)
	}
	m.scores(&s.vec, s.scores)
	softmax(s.scores, allowed)
	for k, p := range s.scores {
		if !isAllowed(allowed, k) {
			continue
		}
		r.Allowed++
		if r.Label < 0 || p > s.scores[r.Label] {
			r.Label = k
		}
	}
	if r.Label < 0 {
		return r
	}
	r.Probability = float64(s.scores[r.Label])
	r.Coverage = m.coverage(r.Label, words)
	for j, f := range s.vec.ids {
		s.dense[f] = s.vec.vals[j]
	}
	defer func() {
		for _, f := range s.vec.ids {
			s.dense[f] = 0
		}
	}()
	var near [3]Neighbor
	n := 0
	for _, i := range m.byLabel[r.Label] {
		sim := float64(m.vecs[i].dotDense(s.dense))
		if sim <= 0 {
			continue // shares nothing: no explanation
		}
		// insertion into the top 3; earlier examples win ties
		j := n
		for j > 0 && near[j-1].Similarity < sim {
			j--
		}
		if j >= len(near) {
			continue
		}
		if n < len(near) {
			n++
		}
		copy(near[j+1:n], near[j:n-1])
		near[j] = Neighbor{Example: int(i), Text: m.examples[i].Text, Similarity: sim}
	}
	r.Nearest = slices.Clone(near[:n])
	if n > 0 {
		r.Similarity = near[0].Similarity
	}
	return r
}

// axpy adds x·row to out (len(row) == len(out)), four lanes at a time.
func axpy(x float32, row, out []float32) {
	k := 0
	for ; k+4 <= len(out); k += 4 {
		o, r := out[k:k+4:k+4], row[k:k+4:k+4]
		o[0] += x * r[0]
		o[1] += x * r[1]
		o[2] += x * r[2]
		o[3] += x * r[3]
	}
	for ; k < len(out); k++ {
		out[k] += x * row[k]
	}
}
