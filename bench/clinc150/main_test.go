package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestRun runs the benchmark on 25 intents and checks the report's last
// line, which scripts read. The in-scope floor is 0.7: the router's closed
// vocabulary (a content word none of a command's examples use sends the
// utterance to the LLM) recognises 0.77 of this subset, against 0.97 before.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-intents", "25"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var acc, rec, au float64
	var p50, p99 int
	if _, err := fmt.Sscanf(lines[len(lines)-1], "in_scope_accuracy=%f oos_recall=%f auroc=%f p50_us=%d p99_us=%d", &acc, &rec, &au, &p50, &p99); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if acc < 0.7 || rec <= 0 || au < 0.8 || au > 1 || p50 <= 0 || p99 < p50 {
		t.Errorf("implausible report: %q", lines[len(lines)-1])
	}
	if !strings.Contains(out.String(), "tuned on val + oos_val: threshold") {
		t.Errorf("no tuning line:\n%s", out.String())
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{{"-data", "/nonexistent/data_full.json"}, {"extra"}, {"-recall", "1.5"}} {
		var out bytes.Buffer
		if err := run(args, &out); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
