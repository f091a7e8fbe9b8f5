package router_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/router"
)

// shipped returns the router of each configuration in the repository:
// the embedded demo, examples/media, examples/helpdesk and
// examples/library.
func shipped(t *testing.T) map[string]*router.Router {
	t.Helper()
	out := map[string]*router.Router{"demo": demoRegistry(t)}
	for name, path := range map[string]string{"media": "../examples/media/agentplane.yaml", "helpdesk": "../examples/helpdesk/agentplane.yaml",
		"library": "../examples/library/agentplane.yaml"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = registryOf(t, path, raw)
	}
	return out
}

// turnCase is a turn in one of the shipped configurations.
type turnCase struct {
	config, mode, text string
	active             *agentplane.ActiveWorkContext
}

func (c turnCase) route(t *testing.T, regs map[string]*router.Router, ui bool) agentplane.Decision {
	t.Helper()
	s := sessionIn(c.mode)
	if c.active != nil {
		s.AWC = *c.active
	}
	d, err := regs[c.config].Route(context.Background(), s, agentplane.TurnInput{Text: c.text, UI: ui, Now: now})
	if err != nil {
		t.Fatalf("%s %q: %v", c.config, c.text, err)
	}
	return d
}

// TestWordsNotAccountedFor: a command's phrasing with an item and more
// words — a time, a condition, a second clause, a person the command
// does not take, a reason — is no command: the trigger does not match,
// the turn goes to the LLM, and the trace names the words. (The slot used
// to resolve by its longest run naming one item, the rest "left over".)
func TestWordsNotAccountedFor(t *testing.T) {
	regs := shipped(t)
	for _, c := range []struct {
		turnCase
		words string // the trace names them
	}{
		{turnCase{config: "demo", mode: "sales", text: "change the mode to sales after the call"}, `"after", "call"`},
		{turnCase{config: "demo", mode: "sales", text: "open the q1 cfo outreach template when legal signs off"}, `"when", "legal", "signs", "off"`},
		{turnCase{config: "demo", mode: "general", text: "move over to the ddr mode for a minute"}, ""},
		{turnCase{config: "media", mode: "home", text: "play abbey road for my brother tomorrow"}, `"brother", "tomorrow"`},
		{turnCase{config: "media", mode: "home", text: "watch heat with the sound off"}, `"sound"`},
		{turnCase{config: "media", mode: "home", text: "call ann lindgren about the invoice"}, `"about", "invoice"`},
		{turnCase{config: "library", mode: "circulation", text: "renew dune messiah for another week"}, `"week"`},
		{turnCase{config: "library", mode: "circulation", text: "open mira holm, she left her card at the desk"}, `"left"`},
		{turnCase{config: "library", mode: "cataloguing", text: "withdraw the copy of circe with the torn cover"}, `"torn"`},
		{turnCase{config: "helpdesk", mode: "desk", text: "assign it to fox mulder after the standup",
			active: &agentplane.ActiveWorkContext{EntityType: "ticket", Entity: &agentplane.EntityHeader{ID: "T-1", DisplayName: "Printer jam"}}}, `"standup"`},
	} {
		for _, ui := range []bool{true, false} {
			d := c.route(t, regs, ui)
			if d.Action != agentplane.ActionContinueLLM {
				t.Errorf("%s %q (ui %v) -> %s %s(%s) %q\n%s", c.config, c.text, ui, d.Action, d.CommandID, d.ResolvedID, d.QuestionText, strings.Join(d.Trace, "\n"))
				continue
			}
			if c.words != "" && !traceHas(d, c.words) {
				t.Errorf("%s %q: the trace does not name %s\n%s", c.config, c.text, c.words, strings.Join(d.Trace, "\n"))
			}
		}
	}
}

// TestClausesAreNotCommands: a quoted line, a question followed by more
// text, sequencing, a condition, a report or plan, a joke never act, in
// any configuration; a bare command said as a question asks, never runs.
func TestClausesAreNotCommands(t *testing.T) {
	regs := shipped(t)
	for _, c := range []turnCase{
		{config: "demo", mode: "sales", text: "> change the mode to sales\nthoughts?"},
		{config: "demo", mode: "sales", text: "send it to the q1 pilot list? marketing has not approved it"},
		{config: "demo", mode: "sales", text: "open the q1 cfo outreach 😂"},
		{config: "media", mode: "home", text: "play help! and then skip to the last track"},
		{config: "media", mode: "home", text: "watch vertigo if the kids are asleep"},
		{config: "media", mode: "home", text: "  > play revolver"},
		{config: "media", mode: "home", text: "play rubber soul? or is that too loud for the neighbours"},
		{config: "library", mode: "circulation", text: "check in circe once the cart is sorted"},
		{config: "library", mode: "circulation", text: "open kate olsen unless she already went home"},
		{config: "library", mode: "circulation", text: "renew emma 🙃"},
		{config: "library", mode: "circulation", text: "i already renewed emma"},
		{config: "library", mode: "circulation", text: "renew emma is what she asked for"},
		{config: "library", mode: "rooms", text: "cancel the poetry night, then email the speakers"},
		{config: "helpdesk", mode: "desk", text: "> close it\nwhy would they write that?",
			active: &agentplane.ActiveWorkContext{EntityType: "ticket", Entity: &agentplane.EntityHeader{ID: "T-1", DisplayName: "Printer jam"}}},
	} {
		for _, ui := range []bool{true, false} {
			if d := c.route(t, regs, ui); d.Action != agentplane.ActionContinueLLM {
				t.Errorf("%s %q (ui %v) -> %s %s(%s) %q\n%s", c.config, c.text, ui, d.Action, d.CommandID, d.ResolvedID, d.QuestionText, strings.Join(d.Trace, "\n"))
			}
		}
	}
	for _, c := range []struct {
		turnCase
		command, resolved string
	}{
		{turnCase{config: "demo", mode: "general", text: "switch to sales mode?"}, "set_mode", "sales"},
		{turnCase{config: "media", mode: "home", text: "play abbey road?"}, "play_album", "AL-2"},
		{turnCase{config: "library", mode: "circulation", text: "check in circe?"}, "check_in_book", "BK-211"},
	} {
		d := c.route(t, regs, true)
		if d.Action != agentplane.ActionAskQuestion || !d.IsConfirmationQuestion() || d.CommandID != c.command || d.ResolvedID != c.resolved {
			t.Errorf("%s %q -> %s %s(%s) %q; want a confirmation question for %s(%s)\n%s", c.config, c.text, d.Action, d.CommandID, d.ResolvedID,
				d.QuestionText, c.command, c.resolved, strings.Join(d.Trace, "\n"))
		}
	}
}

// TestAccountedWordsAct: the words the rule accounts for — the trigger's,
// the item's name, the kind's words, pointing words, fillers at the edges
// — still act.
func TestAccountedWordsAct(t *testing.T) {
	regs := shipped(t)
	for _, c := range []struct {
		turnCase
		command, resolved string
	}{
		{turnCase{config: "demo", mode: "sales", text: "please open the q1 cfo outreach email template"}, "set_active_email_template", "TPL-123"},
		{turnCase{config: "demo", mode: "general", text: "can you change the mode to sales?"}, "set_mode", "sales"},
		{turnCase{config: "media", mode: "home", text: "play the album abbey road now thanks"}, "play_album", "AL-2"},
		{turnCase{config: "library", mode: "circulation", text: "check in the book circe"}, "check_in_book", "BK-211"},
		// {item}'s: "holm's" is normalized to "holms"; the item is Mira Holm
		{turnCase{config: "library", mode: "circulation", text: "pull up Mira Holm's account"}, "open_patron", "PAT-1001"},
	} {
		d := c.route(t, regs, true)
		if d.Action != agentplane.ActionInvokeCommand || d.CommandID != c.command || d.ResolvedID != c.resolved {
			t.Errorf("%s %q -> %s %s(%s); want %s(%s)\n%s", c.config, c.text, d.Action, d.CommandID, d.ResolvedID, c.command, c.resolved,
				strings.Join(d.Trace, "\n"))
		}
	}
}

// clinicYAML is a clinic whose patients and invoices are both opened by
// "open {item}"; order puts one command or the other first in the file.
func clinicYAML(patientsFirst bool) string {
	patient := `  - {id: open_patient, display_name: Open a patient record, tool: agent_set_active_entity, parameter: patient, resolver: {catalog: patients}, sets_active_context: true, active_entity_type: patient, triggers: ["open [the] {item}", "open [the] record (of|for) {item}"]}
`
	invoice := `  - {id: open_invoice, display_name: Open an invoice, tool: agent_set_active_entity, parameter: invoice, resolver: {catalog: invoices}, sets_active_context: true, active_entity_type: invoice, triggers: ["open [the] {item}", "open [the] invoice (of|for) {item}"]}
`
	cmds := invoice + patient
	if patientsFirst {
		cmds = patient + invoice
	}
	return `version: 1
modes: [{key: desk, default: true, toolboxes: [t]}]
toolboxes: [{id: t, catalogs: [patients, invoices], commands: [open_patient, open_invoice]}]
entity_types: {patient: {display_name: Patient}, invoice: {display_name: Invoice}}
catalogs:
  - id: patients
    entity_type: patient
    items: [{id: PT-1, display_name: Will Hart}, {id: PT-2, display_name: Ann Lee}, {id: PT-3, display_name: Annie Lee}, {id: PT-4, display_name: Maria Garcia, description: "born 1961"}, {id: PT-5, display_name: Maria Garcia, description: "born 2004"}, {id: PT-6, display_name: Tom Berg}, {id: PT-7, display_name: Tim Berg}, {id: PT-8, display_name: Anne Moss}]
  - id: invoices
    entity_type: invoice
    items: [{id: INV-77, display_name: Invoice 77 for Will Hart, aliases: [will hart]}, {id: INV-78, display_name: Invoice 78}]
commands:
` + cmds
}

// TestBetweenTwoCommands: when two commands' triggers account for every
// word equally well, one question names both — whichever comes first in
// the file; when one accounts for the words exactly, it wins.
func TestBetweenTwoCommands(t *testing.T) {
	var questions []string
	for _, first := range []bool{true, false} {
		reg := registryOf(t, "clinic.yaml", []byte(clinicYAML(first)))
		d, err := reg.Route(context.Background(), sessionIn("desk"), agentplane.TurnInput{Text: "open will hart", UI: true, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if d.Action != agentplane.ActionAskQuestion || d.CommandID != "" || len(d.Options) != 2 ||
			!strings.Contains(d.QuestionText, "Open a patient record") || !strings.Contains(d.QuestionText, "Open an invoice") {
			t.Errorf("patients first %v: %s %s(%s) %q %v\n%s", first, d.Action, d.CommandID, d.ResolvedID, d.QuestionText, d.Options, strings.Join(d.Trace, "\n"))
		}
		questions = append(questions, d.QuestionText)
		// the invoice's kind word is accounted for by the invoice command only
		d, _ = reg.Route(context.Background(), sessionIn("desk"), agentplane.TurnInput{Text: "open the invoice for will hart", UI: true, Now: now})
		if d.Action != agentplane.ActionInvokeCommand || d.CommandID != "open_invoice" || d.ResolvedID != "INV-77" {
			t.Errorf("patients first %v: open the invoice for will hart -> %s %s(%s)\n%s", first, d.Action, d.CommandID, d.ResolvedID, strings.Join(d.Trace, "\n"))
		}
	}
	if questions[0] != questions[1] {
		t.Errorf("the file's order changed the question: %q, %q", questions[0], questions[1])
	}
}

// TestPossessivesPoint: "my", "his", "her", "their", "our", "its" with the
// kind's word is the active item of that kind, or the question when none
// is active.
func TestPossessivesPoint(t *testing.T) {
	regs := shipped(t)
	ticket := &agentplane.ActiveWorkContext{EntityType: "ticket", Entity: &agentplane.EntityHeader{ID: "T-12", DisplayName: "Export is slow"}}
	for _, text := range []string{"close her ticket", "close our ticket", "close my ticket"} {
		d := turnCase{config: "media", mode: "support", text: text, active: ticket}.route(t, regs, true)
		if d.Action != agentplane.ActionInvokeCommand || d.ResolvedID != "T-12" {
			t.Errorf("%q with T-12 active -> %s %s(%s)\n%s", text, d.Action, d.CommandID, d.ResolvedID, strings.Join(d.Trace, "\n"))
		}
		d = turnCase{config: "media", mode: "support", text: text}.route(t, regs, false)
		if d.Action != agentplane.ActionAskQuestion || d.ResolvedID != "" || len(d.OptionIDs) == 0 {
			t.Errorf("%q with nothing active -> %s %s(%s) %q; want the question which\n%s", text, d.Action, d.CommandID, d.ResolvedID, d.QuestionText, strings.Join(d.Trace, "\n"))
		}
	}
	tpl := &agentplane.ActiveWorkContext{EntityType: "email_template", Entity: &agentplane.EntityHeader{ID: "TPL-124", DisplayName: "Q1 CTO Outreach"}}
	if d := (turnCase{config: "demo", mode: "sales", text: "close our template", active: tpl}).route(t, regs, true); d.ResolvedID != "TPL-124" {
		t.Errorf("close our template with TPL-124 active -> %s %s(%s)\n%s", d.Action, d.CommandID, d.ResolvedID, strings.Join(d.Trace, "\n"))
	}
}

// TestLookAlikeNames: a name one edit from two items is a question
// between them (even when one of its words names a third: Anne Moss); options with the same display name say what tells them
// apart; nothing is highlighted by id order.
func TestLookAlikeNames(t *testing.T) {
	reg := registryOf(t, "clinic.yaml", []byte(clinicYAML(true)))
	route := func(text string, ui bool) agentplane.Decision {
		d, err := reg.Route(context.Background(), sessionIn("desk"), agentplane.TurnInput{Text: text, UI: ui, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := route("open the record of anne lee", false)
	if d.Action != agentplane.ActionAskQuestion || strings.Join(d.OptionIDs, ",") != "PT-2,PT-3" {
		t.Errorf("anne lee -> %s %q %v %v\n%s", d.Action, d.QuestionText, d.Options, d.OptionIDs, strings.Join(d.Trace, "\n"))
	}
	d = route("open the record of maria garcia", false)
	if d.Action != agentplane.ActionAskQuestion || strings.Join(d.Options, "|") != "Maria Garcia — born 1961|Maria Garcia — born 2004" {
		t.Errorf("maria garcia -> %s %q %q", d.Action, d.QuestionText, d.Options)
	}
	for _, text := range []string{"open the record of maria garcia", "open the record of tam berg"} {
		if d := route(text, true); d.Action != agentplane.ActionOpenPicker || d.HighlightID != "" {
			t.Errorf("%q with UI -> %s highlight %q; want a picker with nothing highlighted\n%s", text, d.Action, d.HighlightID, strings.Join(d.Trace, "\n"))
		}
	}
	// a clear best is still highlighted: "ann lee" is exact, "annie lee" is not
	if d := route("open the record of will har", true); d.Action != agentplane.ActionOpenPicker || d.HighlightID != "PT-1" {
		t.Errorf("will har -> %s highlight %q\n%s", d.Action, d.HighlightID, strings.Join(d.Trace, "\n"))
	}
}
