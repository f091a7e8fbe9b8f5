package router_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/testkit/clinc150"
	"github.com/agentplane/agentplane/router"
)

// TestNoHijackOnCLINC150 routes every CLINC150 test and out-of-scope test
// utterance — ordinary requests to some other assistant — through each
// of the repository's configurations in every mode, with and without UI.
// In no mode may more than 0.5 % decide anything but continue_with_llm,
// and none may invoke a command.
func TestNoHijackOnCLINC150(t *testing.T) {
	d := clincData(t)
	utterances := append(append([]clinc150.Utterance(nil), d.Test...), d.OOSTest...)
	configs := map[string]*router.Router{"demo": demoRegistry(t), "opsdesk": opsRegistry(t)}
	for name, path := range map[string]string{"media": "../examples/media/agentplane.yaml", "helpdesk": "../examples/helpdesk/agentplane.yaml",
		"library": "../examples/library/agentplane.yaml"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		configs[name] = registryOf(t, path, raw)
	}
	for name, reg := range configs {
		for _, m := range reg.Registry().Config().Modes {
			for _, ui := range []bool{true, false} {
				kinds := map[agentplane.Action]int{}
				var fires []string
				for _, u := range utterances {
					dec, err := reg.Route(context.Background(), sessionIn(m.Key), agentplane.TurnInput{Text: u.Text, UI: ui, Now: now})
					if err != nil {
						t.Fatalf("%q: %v", u.Text, err)
					}
					if dec.Action == agentplane.ActionContinueLLM {
						continue
					}
					kinds[dec.Action]++
					fires = append(fires, fmt.Sprintf("%q -> %s %s(%s)", u.Text, dec.Action, dec.CommandID, dec.ResolvedID))
					if dec.Action == agentplane.ActionInvokeCommand {
						t.Errorf("%s mode %s: invoked: %s", name, m.Key, fires[len(fires)-1])
					}
				}
				rate := float64(len(fires)) / float64(len(utterances))
				t.Logf("%s, mode %s, ui %v: %d of %d (%.3f %%) not handed to the LLM %v", name, m.Key, ui, len(fires), len(utterances), 100*rate, kinds)
				if rate > 0.005 {
					sort.Strings(fires)
					t.Errorf("%s mode %s ui %v: false trigger rate %.3f %% > 0.5 %%:\n%v", name, m.Key, ui, 100*rate, fires)
				}
			}
		}
	}
}
