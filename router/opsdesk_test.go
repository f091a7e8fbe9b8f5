package router_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/internal/testkit/opsdesk"
	"github.com/agentplane/agentplane/router"
)

func opsRegistry(tb testing.TB) *router.Router {
	tb.Helper()
	raw, err := opsdesk.Config()
	if err != nil {
		tb.Fatal(err)
	}
	return registryWith(tb, "opsdesk.yaml", raw, &config.Options{Programs: opsdesk.Programs()})
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
		"which scheduled jobs do we have": "work_on_job",
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

// routeOps routes text in the ops mode of the operations desk.
func routeOps(t *testing.T, reg *router.Router, sess *agentplane.Session, text string, ui bool) agentplane.Decision {
	t.Helper()
	dec, err := reg.Route(context.Background(), sess, agentplane.TurnInput{Text: text, UI: ui, Now: now})
	if err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	return dec
}

func opsWith(entityType, id, name string) *agentplane.Session {
	s := sessionIn(opsdesk.Ops)
	s.AWC = agentplane.ActiveWorkContext{EntityType: entityType, Entity: &agentplane.EntityHeader{ID: id, DisplayName: name}}
	return s
}

// TestCommandWithoutItem: a trigger whose item is only a determiner, a
// deictic or the kind's name asks for the item (a picker, one question
// without UI); a deictic with an item of the command's catalog active is
// that item; a determiner never resolves by itself.
func TestCommandWithoutItem(t *testing.T) {
	reg := opsRegistry(t)
	for _, text := range []string{"acknowledge an incident", "bounce the service", "page someone", "restart it", "wake up a responder"} {
		d := routeOps(t, reg, sessionIn(opsdesk.Ops), text, true)
		if text == "page someone" { // "someone" is no determiner: it may name an item; nothing is guessed
			if d.Action == agentplane.ActionInvokeCommand {
				t.Errorf("%q invoked %s(%s)", text, d.CommandID, d.ResolvedID)
			}
			continue
		}
		if d.Action != agentplane.ActionOpenPicker || d.PrefilterText != "" || d.HighlightID != "" {
			t.Errorf("%q -> %s %s prefilter %q highlight %q; want an unfiltered picker\n%s", text, d.Action, d.CommandID, d.PrefilterText, d.HighlightID, strings.Join(d.Trace, "\n"))
		}
		d = routeOps(t, reg, sessionIn(opsdesk.Ops), text, false)
		if d.Action != agentplane.ActionAskQuestion || d.ResolvedID != "" || len(d.OptionIDs) == 0 {
			t.Errorf("%q without UI -> %s %q %v; want one question listing items", text, d.Action, d.QuestionText, d.OptionIDs)
		}
	}
	// "an" is a token of "Minh An": a determiner alone resolves to nobody.
	if d := routeOps(t, reg, sessionIn(opsdesk.Ops), "page an", true); d.HighlightID != "" || d.ResolvedID != "" {
		t.Errorf("page an -> %s highlight %q resolved %q", d.Action, d.HighlightID, d.ResolvedID)
	}
	// the active deployment is "this deployment"
	d := routeOps(t, reg, opsWith("deployment", "DEP-2", "checkout-web v7.2"), "revert this deployment", true)
	if d.Action != agentplane.ActionAskQuestion || d.CommandID != "rollback_deployment" || d.ResolvedID != "DEP-2" {
		t.Errorf("revert this deployment with DEP-2 active -> %s %s(%s) %q", d.Action, d.CommandID, d.ResolvedID, d.QuestionText)
	}
	d = routeOps(t, reg, opsWith("incident", "INC-2", "INC-4412 login failures"), "ack it", true)
	if d.Action != agentplane.ActionAskQuestion || d.CommandID != "ack_incident" || d.ResolvedID != "INC-2" {
		t.Errorf("ack it with INC-2 active -> %s %s(%s)", d.Action, d.CommandID, d.ResolvedID)
	}
	// an item of another catalog active is not "this deployment"
	d = routeOps(t, reg, opsWith("service", "SER-1", "Payments API"), "revert this deployment", true)
	if d.Action != agentplane.ActionOpenPicker || d.CommandID != "rollback_deployment" {
		t.Errorf("revert this deployment with a service active -> %s %s(%s)", d.Action, d.CommandID, d.ResolvedID)
	}
}

// TestEveryWordAccounted: a slot that does not name an item as a whole
// acts only when its other words point at it or name its kind ("the
// search indexer service"); a run naming an item with other words around
// it ("the containers behind search indexer") is no match, and the trace
// names the words not accounted for. A slot that names nothing does not
// end routing.
func TestEveryWordAccounted(t *testing.T) {
	reg := opsRegistry(t)
	d := routeOps(t, reg, sessionIn(opsdesk.Ops), "restart the containers behind search indexer", true)
	if d.Action != agentplane.ActionContinueLLM || !traceHas(d, `not accounted for: "containers", "behind"`) {
		t.Errorf("-> %s %s(%s)\n%s", d.Action, d.CommandID, d.ResolvedID, strings.Join(d.Trace, "\n"))
	}
	d = routeOps(t, reg, sessionIn(opsdesk.Ops), "restart the search indexer service", true)
	if d.Action != agentplane.ActionAskQuestion || d.ResolvedID != "SER-4" {
		t.Errorf("restart the search indexer service -> %s %s(%s)\n%s", d.Action, d.CommandID, d.ResolvedID, strings.Join(d.Trace, "\n"))
	}
	for _, text := range []string{"restart search indexer and auth gateway", "restart everything except search indexer but not auth gateway",
		"restart anything but not search indexer", "restart search indexer once the deploy finishes", "restart search indexer at midnight",
		"bounce search indexer, then page the oncall"} {
		d := routeOps(t, reg, sessionIn(opsdesk.Ops), text, true)
		if d.ResolvedID != "" || d.Action != agentplane.ActionContinueLLM {
			t.Errorf("%q -> %s %s(%s)\n%s", text, d.Action, d.CommandID, d.ResolvedID, strings.Join(d.Trace, "\n"))
		}
	}
	// a typo of "Payments API Gateway" is not "Payments API": the slot
	// names an item by a typo, so its runs are not searched
	d = routeOps(t, reg, sessionIn(opsdesk.Ops), "restart payments api gatway", true)
	if d.ResolvedID != "" || d.Action != agentplane.ActionOpenPicker || d.HighlightID != "SER-9" {
		t.Errorf("restart payments api gatway -> %s %s(%s) highlight %s\n%s", d.Action, d.CommandID, d.ResolvedID, d.HighlightID, strings.Join(d.Trace, "\n"))
	}
	// "pull up {item}" is a trigger of work_on_dashboard; "the metrics"
	// names no dashboard, and the metrics launcher's examples fit.
	d = routeOps(t, reg, sessionIn(opsdesk.Ops), "pull up all the metrics", true)
	if d.Action != agentplane.ActionOpenPicker || d.CommandID != "work_on_metric" || !traceHas(d, "trying the examples") {
		t.Errorf("pull up all the metrics -> %s %s\n%s", d.Action, d.CommandID, strings.Join(d.Trace, "\n"))
	}
}

func traceHas(d agentplane.Decision, s string) bool {
	for _, l := range d.Trace {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// TestParaphraseAsks: an executable recognised by similarity (many
// examples among many commands) with its item named is asked about, never
// run; one that confirms anyway asks its own question, once. A statement,
// a negation or a mode with few commands asks nothing.
func TestParaphraseAsks(t *testing.T) {
	reg := opsRegistry(t)
	for _, ui := range []bool{true, false} {
		d := routeOps(t, reg, sessionIn(opsdesk.Ops), "would you mind giving checkout web a restart", ui)
		if d.Action != agentplane.ActionAskQuestion || d.CommandID != "restart_service" || d.ResolvedID != "SER-3" ||
			!slices.Equal(d.Options, []string{"Yes", "No"}) || !d.IsConfirmationQuestion() {
			t.Errorf("ui %v -> %s %s(%s) %q %v\n%s", ui, d.Action, d.CommandID, d.ResolvedID, d.QuestionText, d.Options, strings.Join(d.Trace, "\n"))
		}
	}
	for _, text := range []string{"we gave checkout web a restart an hour ago", "no restart for checkout web today",
		"how often does checkout web get restarted", "would you mind giving a fresh restart"} {
		if d := routeOps(t, reg, sessionIn(opsdesk.Ops), text, true); d.Action != agentplane.ActionContinueLLM {
			t.Errorf("%q -> %s %s(%s)\n%s", text, d.Action, d.CommandID, d.ResolvedID, strings.Join(d.Trace, "\n"))
		}
	}
	s := sessionIn(opsdesk.General) // 7 commands with examples: similarity decides nothing
	if d := routeOps(t, reg, s, "would you mind giving checkout web a fresh restart", true); d.Action != agentplane.ActionContinueLLM {
		t.Errorf("general -> %s %s(%s)", d.Action, d.CommandID, d.ResolvedID)
	}
}

// FuzzRouteOps: no input makes the router panic on the operations desk,
// where similarity decides and slots are searched, with an item active or
// not; an invocation always names an item of its command's catalog.
func FuzzRouteOps(f *testing.F) {
	reg := opsRegistry(f)
	for _, s := range []string{"restart the pods of payments api", "ack it", "page an", "would you mind giving checkout web a fresh restart",
		"don't show me the runbooks", "revert this deployment", "restart payments api gatway", "the the the", "李伟", "page José Álvarez now"} {
		f.Add(s, true, true)
	}
	f.Fuzz(func(t *testing.T, text string, ui, active bool) {
		sess := sessionIn(opsdesk.Ops)
		if active {
			sess = opsWith("service", "SER-3", "Checkout Web")
		}
		d, err := reg.Route(context.Background(), sess, agentplane.TurnInput{Text: text, UI: ui, Now: now})
		if err != nil {
			if agentplane.ErrorCode(err) == agentplane.CodeInternal {
				t.Fatalf("uncoded error: %v", err)
			}
			return
		}
		if len(d.Trace) == 0 {
			t.Fatal("no trace")
		}
		if d.Action == agentplane.ActionInvokeCommand && d.ResolvedID == "" {
			t.Fatalf("invocation without an item: %+v", d)
		}
	})
}
