package router_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/clinc150"
	"github.com/agentplane/agentplane/internal/opsdesk"
	"github.com/agentplane/agentplane/router"
)

func opsRegistry(tb testing.TB) *router.Router {
	tb.Helper()
	raw, err := opsdesk.Config()
	if err != nil {
		tb.Fatal(err)
	}
	return registryOf(tb, "opsdesk.yaml", raw)
}

// TestOpsdeskCLINC150 routes every CLINC150 test and out-of-scope test
// utterance in each mode of the operations desk, with UI: requests to some
// other assistant. At most 0.5 % may decide anything but continue_with_llm
// in any mode, and none may invoke a command.
func TestOpsdeskCLINC150(t *testing.T) {
	d := clincData(t)
	reg := opsRegistry(t)
	utterances := append(append([]clinc150.Utterance(nil), d.Test...), d.OOSTest...)
	for _, m := range []string{opsdesk.General, opsdesk.Ops, opsdesk.Triage} {
		fired := map[string]int{}
		var fires []string
		n := 0
		for _, u := range utterances {
			dec, err := reg.Route(context.Background(), sessionIn(m), agentplane.TurnInput{Text: u.Text, UI: true, Now: now})
			if err != nil {
				t.Fatalf("%q: %v", u.Text, err)
			}
			if dec.Action == agentplane.ActionContinueLLM {
				continue
			}
			n++
			fired[string(dec.Action)]++
			fires = append(fires, fmt.Sprintf("%q -> %s %s(%s)", u.Text, dec.Action, dec.CommandID, dec.ResolvedID))
			if dec.Action == agentplane.ActionInvokeCommand {
				t.Errorf("mode %s: invoked: %s", m, fires[len(fires)-1])
			}
		}
		rate := float64(n) / float64(len(utterances))
		t.Logf("mode %s: %d of %d (%.3f %%) decided something other than continue_with_llm: %v", m, n, len(utterances), 100*rate, fired)
		sort.Strings(fires)
		for _, f := range fires {
			t.Log("  ", f)
		}
		if rate > 0.005 {
			t.Errorf("mode %s: false trigger rate %.3f %% > 0.5 %%", m, 100*rate)
		}
	}
}

// TestLauncherGuards: in a mode where similarity alone opens a launcher's
// picker, negations, reports, statements and questions about what it lists
// open nothing, without UI ask nothing, and requests still open it.
func TestLauncherGuards(t *testing.T) {
	reg := opsRegistry(t)
	for _, text := range []string{
		"please don't open the dashboards, I've seen them",
		"no need to list the hosts",
		"the hosts screen crashed twice this morning",
		"someone removed a few runbooks yesterday",
		"our cron jobs page keeps timing out",
		"I think the backups are fine",
		"why are there so many alarms",
		"does anyone read the runbooks",
		"runbooks were rewritten last quarter",
	} {
		for _, ui := range []bool{true, false} {
			dec, err := reg.Route(context.Background(), sessionIn(opsdesk.Ops), agentplane.TurnInput{Text: text, UI: ui, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if dec.Action != agentplane.ActionContinueLLM {
				t.Errorf("%q (ui %v) -> %s %s\n%s", text, ui, dec.Action, dec.CommandID, strings.Join(dec.Trace, "\n"))
			}
		}
	}
	for text, cmd := range map[string]string{
		"could you bring up the runbooks": "work_on_runbook",
		"let me see the alarms please":    "work_on_alert",
		"browse the certs":                "work_on_certificate",
		"which scheduled jobs do we run":  "work_on_job",
		"take me to the squads":           "work_on_team",
	} {
		dec, err := reg.Route(context.Background(), sessionIn(opsdesk.Ops), agentplane.TurnInput{Text: text, UI: true, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if dec.Action != agentplane.ActionOpenPicker || dec.CommandID != cmd {
			t.Errorf("%q -> %s %s, want a picker for %s\n%s", text, dec.Action, dec.CommandID, cmd, strings.Join(dec.Trace, "\n"))
		}
	}
}
