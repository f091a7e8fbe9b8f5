package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/agentplane/agentplane"
	labelled "github.com/agentplane/agentplane/eval"
	"github.com/agentplane/agentplane/plane"
)

// eval runs `agentplane eval [--config FILE] [--principal ID] [--roles
// R,...] [--min-accuracy F] [--no-advice] [--trace] FILE.jsonl`: labelled
// utterances routed, measured and reported; exit 1 when the accuracy is
// under --min-accuracy.
func (m *Main) eval(ctx context.Context, args []string) error {
	fs := m.flags("eval", "[--config FILE] [--principal ID] [--roles R,...] [--min-accuracy F] [--no-advice] [--trace] FILE.jsonl")
	c := m.commonFlags(fs, false)
	minAcc := fs.Float64("min-accuracy", 0, "exit 1 when the share of cases decided as expected is under this (0..1)")
	trace := fs.Bool("trace", false, "print the router's trace of each miss and each change the advised threshold makes")
	principal := fs.String("principal", "", "who speaks on lines that name nobody (default: the local principal)")
	roles := fs.String("roles", "", "the roles of lines that give none, comma-separated")
	noAdvice := fs.Bool("no-advice", false, "give no example-threshold advice (it routes the file again at the thresholds it tries)")
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
	rep, err := labelled.Run(ctx, rt.Core, cases, &labelled.Options{Principal: *principal, Roles: splitList(*roles), NoAdvice: *noAdvice})
	if err != nil {
		return err
	}
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
			fmt.Fprintf(w, "  line %d %s: want %s, got %s\n", ms.Case.Line, caseName(ms.Case), wantText(ms.Case.Expect), decisionText(d))
			if ms.Note != "" {
				fmt.Fprintf(w, "    %s\n", ms.Note)
			}
			if *trace {
				fmt.Fprintf(w, "    · %s\n", strings.Join(d.Trace, "\n    · "))
			}
		}
	}
	if len(rep.Untested) > 0 || len(rep.UntestedModes) > 0 {
		fmt.Fprintln(w)
	}
	if len(rep.Untested) > 0 {
		fmt.Fprintf(w, "not covered: no line expects %s\n", strings.Join(rep.Untested, ", "))
	}
	if len(rep.UntestedModes) > 0 {
		fmt.Fprintf(w, "not covered: no line is in mode %s\n", strings.Join(rep.UntestedModes, ", "))
	}
	if a := rep.Advice; a != nil {
		fmt.Fprintf(w, "\nexample threshold (router.example_threshold, one for every command and mode; %d lines the example model matches):\n", a.Matched)
		var tried []string
		for _, th := range a.Tried {
			tried = append(tried, fmt.Sprintf("%.4g", th))
		}
		if a.Suggested == a.Current {
			note := "no other threshold was worth routing the file with"
			if len(tried) > 0 {
				note = "routed again at " + strings.Join(tried, ", ") + ": none decides more lines as labelled"
			}
			fmt.Fprintf(w, "  %.4g serves this file best (%d lines decided as labelled; %s)\n", a.Current, a.CorrectNow, note)
		} else {
			fmt.Fprintf(w, "  %.4g instead of %.4g decides %d lines as labelled instead of %d; the lines it decides otherwise:\n",
				a.Suggested, a.Current, a.CorrectThen, a.CorrectNow)
			for _, ch := range a.Changes {
				fmt.Fprintf(w, "  line %d %s: %s -> %s (%s)\n", ch.Case.Line, caseName(ch.Case), decisionText(ch.Before), decisionText(ch.After), rightWrong(ch.WasRight, ch.Right))
				if *trace {
					fmt.Fprintf(w, "    · %s\n", strings.Join(ch.After.Trace, "\n    · "))
				}
			}
		}
	}
	if rep.Accuracy < *minAcc {
		fmt.Fprintf(m.Stderr, "agentplane: accuracy %.4f is under --min-accuracy %.4f\n", rep.Accuracy, *minAcc)
		return exitCode(1)
	}
	return nil
}

// caseName is a line as a miss names it: its text or selection, and who
// says it where.
func caseName(c labelled.Case) string {
	s := fmt.Sprintf("%q", c.Text)
	if sel := c.Selection; sel != nil {
		if c.Text == "" {
			s = fmt.Sprintf("selection %s(%s)", sel.CommandID, sel.ID)
		} else {
			s += fmt.Sprintf(" then selection %s", sel.ID)
		}
	}
	s += fmt.Sprintf(" (mode %q, ui %v", c.Mode, c.UI)
	if c.Principal != "" {
		s += ", principal " + c.Principal
	}
	if c.Roles != nil {
		s += ", roles [" + strings.Join(c.Roles, ", ") + "]"
	}
	return s + ")"
}

// wantText is what a line expects, alternatives joined by "or".
func wantText(e labelled.Expect) string {
	var s []string
	for _, a := range e.Alternatives() {
		t := string(a.Action)
		if a.CommandID != "" {
			t += " " + a.CommandID + "(" + a.ResolvedID + ")"
		}
		if a.TargetMode != "" {
			t += " in " + a.TargetMode
		}
		s = append(s, t)
	}
	return strings.Join(s, " or ")
}

func decisionText(d agentplane.Decision) string {
	t := string(d.Action)
	if d.CommandID != "" {
		t += " " + d.CommandID + "(" + d.ResolvedID + ")"
	}
	if d.TargetMode != "" {
		t += " in " + d.TargetMode
	}
	return t
}

func rightWrong(was, is bool) string {
	w := func(b bool) string {
		if b {
			return "right"
		}
		return "wrong"
	}
	return "was " + w(was) + ", now " + w(is)
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
