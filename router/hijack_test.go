package router_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/clinc150"
)

// TestNoHijackOnCLINC150 routes every CLINC150 test and out-of-scope test
// utterance through the demo configuration in every mode, with and
// without UI: ordinary requests to some other assistant. Fewer than 0.5 %
// may decide anything but continue_with_llm, and none may invoke a
// side-effecting command.
func TestNoHijackOnCLINC150(t *testing.T) {
	d := clincData(t)
	reg := demoRegistry(t)
	utterances := append(append([]clinc150.Utterance(nil), d.Test...), d.OOSTest...)
	total, fired := 0, 0
	var fires []string
	for _, m := range reg.Registry().Config().Modes {
		for _, ui := range []bool{false, true} {
			for _, u := range utterances {
				dec, err := reg.Route(context.Background(), sessionIn(m.Key), agentplane.TurnInput{Text: u.Text, UI: ui, Now: now})
				if err != nil {
					t.Fatalf("%q: %v", u.Text, err)
				}
				total++
				if dec.Action == agentplane.ActionContinueLLM {
					continue
				}
				fired++
				fires = append(fires, fmt.Sprintf("mode %s ui %v: %q -> %s %s(%s)", m.Key, ui, u.Text, dec.Action, dec.CommandID, dec.ResolvedID))
				if cmd, _ := reg.Registry().Command(dec.CommandID); dec.Action == agentplane.ActionInvokeCommand && cmd.ProducesSideEffects {
					t.Errorf("side-effecting command invoked: %s", fires[len(fires)-1])
				}
			}
		}
	}
	rate := float64(fired) / float64(total)
	t.Logf("%d of %d turns (%.3f %%) decided something other than continue_with_llm", fired, total, 100*rate)
	for _, f := range fires[:min(len(fires), 20)] {
		t.Log(f)
	}
	if total != 2*len(reg.Registry().Config().Modes)*len(utterances) || total == 0 {
		t.Fatalf("routed %d turns", total)
	}
	if rate >= 0.005 {
		t.Errorf("hijack rate %.3f %% ≥ 0.5 %%:\n%s", 100*rate, strings.Join(fires, "\n"))
	}
}
