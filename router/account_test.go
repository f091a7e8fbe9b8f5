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
	} {
		d := c.route(t, regs, true)
		if d.Action != agentplane.ActionInvokeCommand || d.CommandID != c.command || d.ResolvedID != c.resolved {
			t.Errorf("%s %q -> %s %s(%s); want %s(%s)\n%s", c.config, c.text, d.Action, d.CommandID, d.ResolvedID, c.command, c.resolved,
				strings.Join(d.Trace, "\n"))
		}
	}
}
