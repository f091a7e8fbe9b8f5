// Command clinc150 measures the router's example-based command
// recognition on CLINC150 (Larson et al., 2019; CC BY 3.0), the intent
// classification benchmark with out-of-scope utterances.
//
// It builds a configuration with one launcher command per in-scope intent
// whose examples are that intent's training utterances, picks the
// confidence threshold on the validation splits only (val + oos_val: the
// highest in-scope accuracy whose out-of-scope recall reaches -recall), and
// reports on the test splits (test + oos_test) what router.Route decides:
// in-scope accuracy (the intent's command recognised), out-of-scope recall
// (continue_with_llm), and routing latency on one core.
//
// It also reports AUROC: how well the confidence separates the in-scope
// test utterances from the out-of-scope ones, whatever the threshold. With
// -negatives, the out-of-scope training utterances (oos_train) are the
// configuration's negative examples (the published "oos-train" setting).
//
//	go run ./bench/clinc150 [-data PATH] [-recall 0.55] [-threshold T] [-intents N] [-negatives]
//
// The last line is machine-readable:
//
//	in_scope_accuracy=0.xxxx oos_recall=0.xxxx auroc=0.xxxx p50_us=N p99_us=N
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/internal/testkit/clinc150"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/router"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "clinc150:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("clinc150", flag.ContinueOnError)
	fs.SetOutput(out)
	path := fs.String("data", clinc150.Path(), "CLINC150 data_full.json")
	recall := fs.Float64("recall", 0.55, "out-of-scope recall the threshold must reach on the validation splits")
	fixed := fs.Float64("threshold", 0, "use this threshold instead of tuning one (0: tune)")
	intents := fs.Int("intents", 0, "use only the first N intents (0: all 150), for quick runs")
	negatives := fs.Bool("negatives", false, "use oos_train as the configuration's negative examples")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *recall <= 0 || *recall > 1 {
		return fmt.Errorf("-recall %v: must be greater than 0 and at most 1", *recall)
	}
	if *fixed < 0 || *fixed > 1 {
		return fmt.Errorf("-threshold %v: must be between 0 (tune) and 1", *fixed)
	}
	runtime.GOMAXPROCS(1) // latency on one core
	d, err := clinc150.Load(*path)
	if err != nil {
		return err
	}
	if *intents > 0 {
		d = d.Subset(*intents)
	}
	names := d.Intents()
	fmt.Fprintf(out, "CLINC150 (Larson et al., 2019, CC BY 3.0): %d intents, %d training examples\n", len(names), len(d.Train))

	threshold := *fixed
	if threshold <= 0 {
		reg, took, err := build(d, config.DefaultExampleThreshold, *negatives)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "configuration loaded and examples trained in %v\n", took.Round(time.Millisecond))
		if threshold, err = tune(reg, d, *recall, out); err != nil {
			return err
		}
		// The trade-off: thresholds tuned for other recall targets, and
		// what they give on the test splits (by MatchExamples, which is
		// what Route thresholds for this configuration).
		fmt.Fprintln(out, "trade-off (threshold tuned on val for a recall target -> test):")
		for _, want := range []float64{0.45, 0.55, 0.65, 0.75, 0.85} {
			th, err := tune(reg, d, want, io.Discard)
			if err != nil {
				continue
			}
			acc, rec := score(reg, d, th)
			fmt.Fprintf(out, "  val recall >= %.2f: threshold %.4f -> test in-scope accuracy %.2f %%, out-of-scope recall %.2f %%\n", want, th, 100*acc, 100*rec)
		}
	}
	reg, took, err := build(d, threshold, *negatives)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "configuration with example_threshold %.4f loaded and trained in %v\n", threshold, took.Round(time.Millisecond))

	var lat []time.Duration
	route := func(text string) agentplane.Decision {
		start := time.Now()
		dec, err := reg.Route(context.Background(), nil, agentplane.TurnInput{Text: text, UI: true, Now: start})
		lat = append(lat, time.Since(start))
		if err != nil {
			return agentplane.Decision{Action: agentplane.ActionContinueLLM}
		}
		return dec
	}
	for _, u := range d.Val[:min(len(d.Val), 500)] { // warm up
		route(u.Text)
	}
	lat = lat[:0]
	correct, rejected, falseReject := 0, 0, 0
	for _, u := range d.Test {
		dec := route(u.Text)
		switch {
		case dec.Action == agentplane.ActionOpenPicker && dec.CommandID == clinc150.Answer(u.Intent):
			correct++
		case dec.Action == agentplane.ActionContinueLLM:
			falseReject++
		}
	}
	for _, u := range d.OOSTest {
		if route(u.Text).Action == agentplane.ActionContinueLLM {
			rejected++
		}
	}
	acc := float64(correct) / float64(len(d.Test))
	rec := float64(rejected) / float64(len(d.OOSTest))
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	fmt.Fprintf(out, "test: %d in-scope, %d out-of-scope utterances\n", len(d.Test), len(d.OOSTest))
	fmt.Fprintf(out, "  in-scope accuracy  %.2f %% (%d wrong intent, %d handed to the LLM)\n", 100*acc, len(d.Test)-correct-falseReject, falseReject)
	fmt.Fprintf(out, "  out-of-scope recall %.2f %%\n", 100*rec)
	au := auroc(reg, d)
	fmt.Fprintf(out, "  AUROC (in-scope vs out-of-scope confidence) %.4f\n", au)
	fmt.Fprintf(out, "  route latency, one core: p50 %v, p99 %v, max %v\n", p50.Round(time.Microsecond/10), p99.Round(time.Microsecond/10), lat[len(lat)-1].Round(time.Microsecond))
	fmt.Fprintf(out, "in_scope_accuracy=%.4f oos_recall=%.4f auroc=%.4f p50_us=%d p99_us=%d\n", acc, rec, au, p50.Microseconds(), p99.Microseconds())
	return nil
}

// build loads the benchmark configuration and compiles it.
func build(d *clinc150.Dataset, threshold float64, negatives bool) (*router.Router, time.Duration, error) {
	raw, err := d.Config(threshold, negatives)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	cfg, err := config.Parse(raw, "clinc150.yaml", nil)
	if err != nil {
		return nil, 0, err
	}
	reg, err := registry.New(cfg, nil)
	if err != nil {
		return nil, 0, err
	}
	rt, err := router.New(reg)
	return rt, time.Since(start), err
}

// tune picks the threshold on the validation splits: among the
// confidences seen there, the one with the highest in-scope accuracy
// whose out-of-scope recall reaches want.
func tune(reg *router.Router, d *clinc150.Dataset, want float64, out io.Writer) (float64, error) {
	type obs struct {
		conf float64
		ok   bool // in scope and the right command
		in   bool
	}
	var all []obs
	for _, u := range d.Val {
		m, found := reg.MatchExamples(clinc150.Mode, nil, u.Text)
		all = append(all, obs{conf: acted(m), ok: found && m.CommandID == u.Intent, in: true})
	}
	for _, u := range d.OOSVal {
		m, _ := reg.MatchExamples(clinc150.Mode, nil, u.Text)
		all = append(all, obs{conf: acted(m)})
	}
	slices.SortFunc(all, func(a, b obs) int { return cmp.Compare(a.conf, b.conf) })
	nin, nout := len(d.Val), len(d.OOSVal)
	okAbove := 0 // in-scope correct with confidence ≥ the candidate
	for _, o := range all {
		if o.ok {
			okAbove++
		}
	}
	best, bestAcc, bestRec, oosBelow := -1.0, -1.0, 0.0, 0
	for i := 0; i < len(all); {
		// candidate threshold all[i].conf: everything from i on is accepted
		th := all[i].conf
		acc, rec := float64(okAbove)/float64(nin), float64(oosBelow)/float64(nout)
		if rec >= want && acc > bestAcc {
			best, bestAcc, bestRec = th, acc, rec
		}
		for j := i; j < len(all) && all[j].conf == th; j++ {
			if all[j].ok {
				okAbove--
			}
			if !all[j].in {
				oosBelow++
			}
			i = j + 1
		}
	}
	if best <= 0 {
		return 0, fmt.Errorf("no threshold reaches out-of-scope recall %.2f on the validation splits", want)
	}
	fmt.Fprintf(out, "tuned on val + oos_val: threshold %.4f, in-scope accuracy %.2f %%, out-of-scope recall %.2f %%\n", best, 100*bestAcc, 100*bestRec)
	return best, nil
}

// acted is the confidence a threshold is compared with for a match: 0
// when the router declines it whatever the threshold (not a request of a
// kind the command's examples have), so tuning sees what Route decides.
func acted(m router.ExampleMatch) float64 {
	if m.Declined != "" {
		return 0
	}
	return m.Confidence
}

// score is in-scope accuracy and out-of-scope recall on the test splits
// at a threshold, from the example matches.
func score(reg *router.Router, d *clinc150.Dataset, th float64) (acc, rec float64) {
	ok, rej := 0, 0
	for _, u := range d.Test {
		if m, found := reg.MatchExamples(clinc150.Mode, nil, u.Text); found && m.Confidence >= th && m.CommandID == u.Intent {
			ok++
		}
	}
	for _, u := range d.OOSTest {
		if m, found := reg.MatchExamples(clinc150.Mode, nil, u.Text); !found || m.Confidence < th {
			rej++
		}
	}
	return float64(ok) / float64(len(d.Test)), float64(rej) / float64(len(d.OOSTest))
}

// confidence is what the threshold is compared with for text: the
// nearest command's confidence, 0 when there is none (no words, or the
// negative examples are nearest).
func confidence(reg *router.Router, text string) float64 {
	if m, ok := reg.MatchExamples(clinc150.Mode, nil, text); ok {
		return m.Confidence
	}
	return 0
}

// auroc is the area under the ROC curve of the confidence as a detector
// of in-scope test utterances against out-of-scope ones: the chance that
// an in-scope utterance gets a higher confidence than an out-of-scope one,
// ties counting half.
func auroc(reg *router.Router, d *clinc150.Dataset) float64 {
	type obs struct {
		conf float64
		in   bool
	}
	var all []obs
	for _, u := range d.Test {
		all = append(all, obs{confidence(reg, u.Text), true})
	}
	for _, u := range d.OOSTest {
		all = append(all, obs{confidence(reg, u.Text), false})
	}
	slices.SortFunc(all, func(a, b obs) int { return cmp.Compare(a.conf, b.conf) })
	var rankSum float64 // of the in-scope utterances, ranks from 1, ties averaged
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].conf == all[i].conf {
			j++
		}
		rank := float64(i+j+1) / 2
		for k := i; k < j; k++ {
			if all[k].in {
				rankSum += rank
			}
		}
		i = j
	}
	p, n := float64(len(d.Test)), float64(len(d.OOSTest))
	return (rankSum - p*(p+1)/2) / (p * n)
}
