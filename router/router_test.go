package router_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/registry"
	"github.com/agentplane/agentplane/router"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// compile compiles a configuration for routing, as the runtime does.
func compile(cfg *config.Config, opts *registry.Options) (*router.Router, error) {
	reg, err := registry.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return router.New(reg)
}

func demoRegistry(tb testing.TB) *router.Router {
	tb.Helper()
	cfg, err := demo.Config(nil)
	if err != nil {
		tb.Fatal(err)
	}
	reg, err := compile(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

func sessionIn(mode string) *agentplane.Session {
	return &agentplane.Session{ID: "s1", Mode: mode, Version: 1}
}

// withTemplate is a sales session working on the Q1 CFO template.
func withTemplate() *agentplane.Session {
	s := sessionIn("sales")
	s.AWC = agentplane.ActiveWorkContext{EntityType: "email_template", Entity: &agentplane.EntityHeader{ID: "TPL-123", DisplayName: "Q1 CFO Outreach"}}
	return s
}

type want struct {
	action    agentplane.Action
	command   string
	resolved  string
	catalog   string
	highlight string
	prefilter string
	question  string
	options   string // joined with |
	reason    string
	confirmed bool
	traceHas  string
}

func check(t *testing.T, d agentplane.Decision, w want) {
	t.Helper()
	got := want{action: d.Action, command: d.CommandID, resolved: d.ResolvedID, catalog: d.CatalogID, highlight: d.HighlightID,
		prefilter: d.PrefilterText, question: d.QuestionText, options: strings.Join(d.Options, "|"), reason: d.ReasonCode, confirmed: d.Confirmed, traceHas: w.traceHas}
	if got != w {
		t.Errorf("decision mismatch\n got: %+v\nwant: %+v\ntrace:\n  %s", got, w, strings.Join(d.Trace, "\n  "))
	}
	if w.traceHas != "" && !strings.Contains(strings.Join(d.Trace, "\n"), w.traceHas) {
		t.Errorf("trace lacks %q:\n  %s", w.traceHas, strings.Join(d.Trace, "\n  "))
	}
	if len(d.Trace) == 0 {
		t.Error("empty trace")
	}
}

func TestRouteBranches(t *testing.T) {
	t.Parallel()
	reg := demoRegistry(t)
	confirmSend := &agentplane.Session{ID: "s1", Mode: "sales", Version: 3, PendingConfirmation: &agentplane.PendingConfirmation{
		CommandID: "send_template_to_list", ResolvedID: "LIST-9", Question: "Confirm send to 'Q1 pilot list'?", ExpiresAt: now.Add(time.Minute)}}
	expiredConfirm := confirmSend.Clone()
	expiredConfirm.PendingConfirmation.ExpiresAt = now.Add(-time.Second)
	picker := &agentplane.Session{ID: "s1", Mode: "general", Version: 2, PendingPicker: &agentplane.PendingPicker{
		CommandID: "set_active_email_template", Source: agentplane.ResolverSource{CatalogID: "email_templates"}, ExpiresAt: now.Add(time.Minute)}}
	question := picker.Clone()
	question.PendingPicker.OptionIDs = []string{"TPL-123", "TPL-124"}
	tests := []struct {
		name string
		sess *agentplane.Session
		in   agentplane.TurnInput
		want want
	}{
		// 1. selection
		{"SelectionInvokes", sessionIn("general"), agentplane.TurnInput{Selection: &agentplane.Selection{CommandID: "set_active_email_template", ID: "TPL-123"}},
			want{action: "invoke_command", command: "set_active_email_template", resolved: "TPL-123"}},
		{"SelectionOfLauncherGoesToOnSelect", sessionIn("general"), agentplane.TurnInput{Selection: &agentplane.Selection{CommandID: "open_email_templates", ID: "TPL-200"}},
			want{action: "invoke_command", command: "set_active_email_template", resolved: "TPL-200"}},
		{"SelectionNeedingConfirmationAsks", withTemplate(), agentplane.TurnInput{Selection: &agentplane.Selection{CommandID: "send_template_to_list", ID: "LIST-9"}},
			want{action: "ask_clarifying_question", command: "send_template_to_list", resolved: "LIST-9", question: "Confirm send to 'Q1 pilot list'?", options: "Yes|No"}},
		// 2. pending confirmation
		{"ConfirmYes", confirmSend, agentplane.TurnInput{Text: "Yes"},
			want{action: "invoke_command", command: "send_template_to_list", resolved: "LIST-9", confirmed: true}},
		{"ConfirmYesPolite", confirmSend, agentplane.TurnInput{Text: "yes please!"},
			want{action: "invoke_command", command: "send_template_to_list", resolved: "LIST-9", confirmed: true}},
		{"ConfirmNo", confirmSend, agentplane.TurnInput{Text: "no"},
			want{action: "continue_with_llm", reason: "confirmation_declined"}},
		{"ConfirmDroppedByOtherText", confirmSend, agentplane.TurnInput{Text: "switch to ddr mode"},
			want{action: "invoke_command", command: "set_mode", resolved: "ddr", traceHas: "dropped"}},
		{"ConfirmExpired", expiredConfirm, agentplane.TurnInput{Text: "yes"},
			want{action: "continue_with_llm", reason: "no_control_intent", traceHas: "expired"}},
		// 3. pending picker
		{"PickerStrictText", picker, agentplane.TurnInput{Text: "Renewal Reminder"},
			want{action: "invoke_command", command: "set_active_email_template", resolved: "TPL-200"}},
		{"PickerNotStrictFallsThrough", picker, agentplane.TurnInput{Text: "outreach"},
			want{action: "continue_with_llm", reason: "no_control_intent", traceHas: "does not resolve strictly"}},
		{"QuestionOptionNumber", question, agentplane.TurnInput{Text: "2"},
			want{action: "invoke_command", command: "set_active_email_template", resolved: "TPL-124"}},
		{"QuestionOptionOutOfRange", question, agentplane.TurnInput{Text: "3"},
			want{action: "continue_with_llm", reason: "no_control_intent"}},
		// 4. slash
		{"SlashAlias", sessionIn("general"), agentplane.TurnInput{Text: "/mode ddr"},
			want{action: "invoke_command", command: "set_mode", resolved: "ddr"}},
		{"SlashID", sessionIn("general"), agentplane.TurnInput{Text: "/set_mode sales"},
			want{action: "invoke_command", command: "set_mode", resolved: "sales"}},
		{"SlashNoArgUI", sessionIn("general"), agentplane.TurnInput{Text: "/mode", UI: true},
			want{action: "open_picker", command: "set_mode", catalog: "modes"}},
		{"SlashNoArgNoUI", sessionIn("general"), agentplane.TurnInput{Text: "/mode"},
			want{action: "ask_clarifying_question", command: "set_mode", question: "Which of the modes?", options: "DDR|General|Sales"}},
		{"SlashUnknown", sessionIn("general"), agentplane.TurnInput{Text: "/frobnicate x"},
			want{action: "continue_with_llm", reason: "unknown_command"}},
		{"SlashInactive", sessionIn("general"), agentplane.TurnInput{Text: "/send q1 pilot list"},
			want{action: "continue_with_llm", reason: "inactive_command"}},
		// 5. triggers and UI-first rules
		{"TriggerStrict", sessionIn("general"), agentplane.TurnInput{Text: "switch to DDR mode"},
			want{action: "invoke_command", command: "set_mode", resolved: "ddr"}},
		{"TriggerStrictNoUIOrUI", sessionIn("general"), agentplane.TurnInput{Text: "Could you please change the mode to sales?", UI: true},
			want{action: "invoke_command", command: "set_mode", resolved: "sales"}},
		{"TriggerCandidatesUI", sessionIn("general"), agentplane.TurnInput{Text: "open the outreach template", UI: true},
			want{action: "open_picker", command: "set_active_email_template", catalog: "email_templates", prefilter: "outreach", highlight: ""}}, // CFO and CTO outreach are as close: none is highlighted by id order
		{"TriggerCandidatesNoUI", sessionIn("general"), agentplane.TurnInput{Text: "open the outreach template"},
			want{action: "ask_clarifying_question", command: "set_active_email_template", question: "Which of the email templates did you mean?", options: "Q1 CFO Outreach|Q1 CTO Outreach"}},
		{"TriggerTypoOneCandidate", sessionIn("general"), agentplane.TurnInput{Text: "open the renewal remnder template"},
			want{action: "ask_clarifying_question", command: "set_active_email_template", question: "Did you mean 'Renewal Reminder'?", options: "Renewal Reminder"}},
		{"TriggerUnresolved", sessionIn("general"), agentplane.TurnInput{Text: "switch to banana mode"},
			want{action: "continue_with_llm", reason: "unresolved", traceHas: "set_mode matched"}},
		{"LauncherUI", sessionIn("general"), agentplane.TurnInput{Text: "I want to work on email templates", UI: true},
			want{action: "open_picker", command: "set_active_email_template", catalog: "email_templates"}},
		{"LauncherNoUI", sessionIn("general"), agentplane.TurnInput{Text: "I want to work on email templates"},
			want{action: "ask_clarifying_question", command: "set_active_email_template", question: "Which of the email templates?", options: "Q1 CFO Outreach|Q1 CTO Outreach|Renewal Reminder|Webinar Invite|Pilot Kickoff"}},
		{"ConfirmationFromTrigger", withTemplate(), agentplane.TurnInput{Text: "send this to the Q1 pilot list"},
			want{action: "ask_clarifying_question", command: "send_template_to_list", resolved: "LIST-9", question: "Confirm send to 'Q1 pilot list'?", options: "Yes|No"}},
		// a confirmation is not asked for what cannot run: the gate says why
		{"PreconditionsBeforeConfirmation", sessionIn("sales"), agentplane.TurnInput{Text: "send this to the Q1 pilot list"},
			want{action: "invoke_command", command: "send_template_to_list", resolved: "LIST-9", traceHas: "preconditions fail (needs an active email_template; open one first): not asking"}},
		{"InactiveTriggerIgnored", sessionIn("general"), agentplane.TurnInput{Text: "send this to the Q1 pilot list"},
			want{action: "continue_with_llm", reason: "no_control_intent"}},
		// 6. no hijacking
		{"Negation", sessionIn("general"), agentplane.TurnInput{Text: "don't switch to ddr mode"},
			want{action: "continue_with_llm", reason: "no_control_intent"}},
		{"Question", sessionIn("general"), agentplane.TurnInput{Text: "should I switch to ddr mode?"},
			want{action: "continue_with_llm", reason: "no_control_intent"}},
		{"Chat", sessionIn("general"), agentplane.TurnInput{Text: "I played dune yesterday"},
			want{action: "continue_with_llm", reason: "no_control_intent"}},
		{"Empty", sessionIn("general"), agentplane.TurnInput{Text: " ?! "},
			want{action: "continue_with_llm", reason: "empty_input"}},
		{"UnknownSessionMode", sessionIn("retired"), agentplane.TurnInput{Text: "switch to ddr mode"},
			want{action: "invoke_command", command: "set_mode", resolved: "ddr", traceHas: "not configured"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.in.Now = now
			d, err := reg.Route(context.Background(), tt.sess, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			check(t, d, tt.want)
		})
	}
}

func TestRouteBadInput(t *testing.T) {
	t.Parallel()
	reg := demoRegistry(t)
	tests := []struct {
		name string
		in   agentplane.TurnInput
		code string
	}{
		{"TooLong", agentplane.TurnInput{Text: strings.Repeat("a", agentplane.MaxInputBytes+1)}, agentplane.CodeInputTooLong},
		{"InvalidUTF8", agentplane.TurnInput{Text: "switch \xff"}, agentplane.CodeInvalidInput},
		{"ControlChar", agentplane.TurnInput{Text: "switch\x07to ddr mode"}, agentplane.CodeInvalidInput},
		{"SelectionUnknownCommand", agentplane.TurnInput{Selection: &agentplane.Selection{CommandID: "nope", ID: "x"}}, agentplane.CodeUnknownAction},
		{"SelectionInactiveCommand", agentplane.TurnInput{Selection: &agentplane.Selection{CommandID: "send_template_to_list", ID: "LIST-9"}}, agentplane.CodeInactiveAction},
		{"SelectionUnknownID", agentplane.TurnInput{Selection: &agentplane.Selection{CommandID: "set_mode", ID: "banana"}}, agentplane.CodeInvalidArgs},
		{"SelectionEmpty", agentplane.TurnInput{Selection: &agentplane.Selection{}}, agentplane.CodeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := reg.Route(context.Background(), sessionIn("general"), tt.in)
			if agentplane.ErrorCode(err) != tt.code {
				t.Fatalf("err = %v (code %q), want code %q", err, agentplane.ErrorCode(err), tt.code)
			}
		})
	}
	// newlines and tabs are ordinary whitespace
	d, err := reg.Route(context.Background(), sessionIn("general"), agentplane.TurnInput{Text: "switch to\tddr\nmode", Now: now})
	if err != nil || d.ResolvedID != "ddr" {
		t.Fatalf("whitespace: %+v %v", d, err)
	}
}

// FuzzRoute checks that no input makes the router panic or return anything
// but exactly one well-formed decision or an error with a code.
func FuzzRoute(f *testing.F) {
	reg := demoRegistry(f)
	for _, s := range []string{"switch to ddr mode", "/mode", "/send q1", "yes", "2", "I want to work on email templates", "\xff", "open the renewel remnder template", "/ ", "//", "send it to the the the list"} {
		f.Add(s, true, "general", "")
	}
	f.Fuzz(func(t *testing.T, text string, ui bool, mode, selID string) {
		sess := &agentplane.Session{ID: "f", Mode: mode, Version: 1,
			PendingPicker: &agentplane.PendingPicker{CommandID: "set_active_email_template", Source: agentplane.ResolverSource{CatalogID: "email_templates"},
				OptionIDs: []string{"TPL-123", selID}, ExpiresAt: now.Add(time.Minute)}}
		in := agentplane.TurnInput{Text: text, UI: ui, Now: now}
		if selID != "" && len(text)%2 == 0 {
			in.Selection = &agentplane.Selection{CommandID: "set_active_email_template", ID: selID}
		}
		d, err := reg.Route(context.Background(), sess, in)
		if err != nil {
			if agentplane.ErrorCode(err) == agentplane.CodeInternal {
				t.Fatalf("uncoded error: %v", err)
			}
			return
		}
		switch d.Action {
		case agentplane.ActionInvokeCommand, agentplane.ActionOpenPicker, agentplane.ActionAskQuestion, agentplane.ActionContinueLLM:
		default:
			t.Fatalf("action %q", d.Action)
		}
		if len(d.Trace) == 0 {
			t.Fatal("no trace")
		}
	})
}
