package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	labelled "github.com/agentplane/agentplane/eval"
	"github.com/agentplane/agentplane/plane"
)

// eval runs `agentplane eval [--config FILE] [--min-accuracy F] [--trace]
// FILE.jsonl`: labelled utterances routed, measured and reported; exit 1
// when the accuracy is under --min-accuracy.
func (m *Main) eval(ctx context.Context, args []string) error {
	fs := m.flags("eval", "[--config FILE] [--min-accuracy F] [--trace] FILE.jsonl")
	c := m.commonFlags(fs, false)
	minAcc := fs.Float64("min-accuracy", 0, "exit 1 when the share of cases decided as expected is under this (0..1)")
	trace := fs.Bool("trace", false, "print the router's trace of each miss")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	if *minAcc < 0 || *minAcc > 1 {
		return fmt.Errorf("--min-accuracy %v: must be between 0 and 1", *minAcc)
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	cases, err := labelled.Read(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	rt, err := m.open(ctx, c, plane.Options{Core: m.routing()})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	rep := labelled.Run(ctx, rt.Core.Router(), cases, rt.Core.Now())
	w := m.Stdout
	fmt.Fprintf(w, "%s: %d cases, %d decided as expected (%.2f %%)\n", fs.Arg(0), rep.Cases, rep.Correct, 100*rep.Accuracy)
	fmt.Fprintf(w, "must not act: %d cases, %d kept from the LLM (%.2f %%)\n", rep.MustNotAct, rep.Hijacked, 100*rep.HijackRate())
	fmt.Fprintf(w, "\n%-32s %8s %9s %9s %9s\n", "command", "expected", "predicted", "precision", "recall")
	for _, s := range rep.Commands {
		fmt.Fprintf(w, "%-32s %8d %9d %9s %9s\n", s.CommandID, s.Expected, s.Predicted, pct(s.Precision, s.Predicted), pct(s.Recall, s.Expected))
	}
	if len(rep.Confusions) > 0 {
		fmt.Fprintln(w, "\nconfused (expected -> got, times):")
		for _, c := range rep.Confusions {
			fmt.Fprintf(w, "  %s -> %s  %d\n", orLLM(c.Expected), orLLM(c.Got), c.Count)
		}
	}
	if len(rep.Misses) > 0 {
		fmt.Fprintln(w, "\nmisses:")
		for _, ms := range rep.Misses {
			d := ms.Decision
			fmt.Fprintf(w, "  line %d %q (mode %q, ui %v): want %s %s(%s), got %s %s(%s)\n", ms.Case.Line, ms.Case.Text, ms.Case.Mode, ms.Case.UI,
				ms.Case.Expect.Action, ms.Case.Expect.CommandID, ms.Case.Expect.ResolvedID, d.Action, d.CommandID, d.ResolvedID)
			if *trace {
				fmt.Fprintf(w, "    · %s\n", strings.Join(d.Trace, "\n    · "))
			}
		}
	}
	if len(rep.Suggestions) > 0 {
		fmt.Fprintln(w, "\nexample thresholds (router.example_threshold, over the matches the router would act on at some threshold):")
		for _, s := range rep.Suggestions {
			if s.Threshold == s.Current {
				fmt.Fprintf(w, "  %-32s %.3f serves this file best as it is\n", s.CommandID, s.Current)
				continue
			}
			fmt.Fprintf(w, "  %-32s %.3f instead of %.3f: +%d of its cases, -%d of its cases, +%d and -%d of others\n",
				s.CommandID, s.Threshold, s.Current, s.Gained, s.Lost, s.FalseAdded, s.FalseGone)
		}
	}
	if rep.Accuracy < *minAcc {
		fmt.Fprintf(m.Stderr, "agentplane: accuracy %.4f is under --min-accuracy %.4f\n", rep.Accuracy, *minAcc)
		return exitCode(1)
	}
	return nil
}

func pct(x float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*x)
}

func orLLM(id string) string {
	if id == "" {
		return "continue_with_llm"
	}
	return id
}
