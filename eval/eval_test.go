package eval_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/eval"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/internal/testkit/opsdesk"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/tool"
)

func read(t *testing.T, s string) []eval.Case {
	t.Helper()
	cases, err := eval.Read(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

func run(t *testing.T, c *core.Core, cases []eval.Case, opts *eval.Options) eval.Report {
	t.Helper()
	rep, err := eval.Run(context.Background(), c, cases, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func load(t *testing.T, src core.Source, opts *core.Options) *core.Core {
	t.Helper()
	if opts == nil {
		opts = &core.Options{}
	}
	opts.SkipMCP = true
	c, err := core.New(context.Background(), src, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// misses lists the lines missed, as "line: got action command(id)".
func misses(rep eval.Report) []int {
	var out []int
	for _, m := range rep.Misses {
		out = append(out, m.Case.Line)
	}
	return out
}

// TestDemoFile: the demo's labelled file is decided as labelled.
func TestDemoFile(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../examples/routing.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases, err := eval.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, demotest.Core(t, nil), cases, nil)
	for _, m := range rep.Misses {
		t.Errorf("line %d %q: got %s %s(%s) %s\n%s", m.Case.Line, m.Case.Text, m.Decision.Action, m.Decision.CommandID, m.Decision.ResolvedID, m.Note, strings.Join(m.Decision.Trace, "\n"))
	}
	if rep.Cases < 30 || rep.MustNotAct < 10 || rep.Hijacked != 0 || rep.Accuracy != 1 {
		t.Errorf("%d cases, %d must not act, %d hijacked, accuracy %v", rep.Cases, rep.MustNotAct, rep.Hijacked, rep.Accuracy)
	}
	if len(rep.Untested) != 0 || len(rep.UntestedModes) != 0 {
		t.Errorf("not covered: commands %v, modes %v", rep.Untested, rep.UntestedModes)
	}
}

// TestScores: wrong labels show as misses, confusions and scores.
func TestScores(t *testing.T) {
	t.Parallel()
	cases := read(t, `
# a comment
{"text": "switch to ddr mode", "expect": {"action": "invoke_command", "command_id": "set_mode", "resolved_id": "ddr"}}
{"text": "switch to ddr mode", "expect": {"action": "invoke_command", "command_id": "set_mode", "resolved_id": "sales"}}
{"text": "load renewal reminder", "expect": {"action": "invoke_command", "command_id": "set_mode"}}
{"text": "what can you do", "expect": {"action": "invoke_command", "command_id": "set_mode"}}
{"text": "switch to sales mode", "expect": {"action": "continue_with_llm"}}
`)
	rep := run(t, demotest.Core(t, nil), cases, &eval.Options{NoAdvice: true})
	if rep.Cases != 5 || rep.Correct != 1 || len(rep.Misses) != 4 || rep.MustNotAct != 1 || rep.Hijacked != 1 {
		t.Fatalf("%+v", rep)
	}
	want := map[string][2]int{"set_mode": {4, 3}, "set_active_email_template": {0, 1}} // expected, predicted
	for _, s := range rep.Commands {
		if w, ok := want[s.CommandID]; !ok || w != [2]int{s.Expected, s.Predicted} {
			t.Errorf("%+v", s)
		}
	}
	if s := rep.Commands[1]; s.CommandID != "set_mode" || s.Correct != 2 || s.Recall != 0.5 || s.Precision != 2.0/3 {
		t.Errorf("set_mode %+v", s)
	}
	if len(rep.Confusions) != 3 {
		t.Errorf("confusions %+v", rep.Confusions)
	}
	if !slices.Contains(rep.Untested, "send_template_to_list") || !slices.Contains(rep.UntestedModes, "sales") || slices.Contains(rep.UntestedModes, "general") {
		t.Errorf("not covered: commands %v, modes %v", rep.Untested, rep.UntestedModes)
	}
	if rep.Advice != nil {
		t.Errorf("advice with NoAdvice: %+v", rep.Advice)
	}
}

// TestBadFiles: every malformed line is refused, naming its line.
func TestBadFiles(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		``:                   "no cases",
		"{\"text\": \"x\"}":  "line 1: expect.action is missing",
		"\n{\"txt\": \"x\"}": "line 2: json: unknown field",
		`{"text": "x", "expect": {"action": "run"}}`:                                      `expect.action "run" is not a decision`,
		`{"text": "x", "expect": {"action": "open_picker"}}`:                              "expect.command_id is missing",
		`{"text": "x", "expect": {"action": "continue_with_llm"}} {}`:                     "more than one JSON value",
		`{"text": "x", "active": {"id": "A"}, "expect": {"action": "continue_with_llm"}}`: "active needs entity_type and id",
		`not json`: "line 1: invalid character",
		`{"expect": {"action": "continue_with_llm"}}`:                                                       "text is missing",
		`{"selection": {"id": "A"}, "expect": {"action": "continue_with_llm"}}`:                             "selection.command_id is missing",
		`{"text": "x", "selection": {"command_id": "c"}, "expect": {"action": "continue_with_llm"}}`:        "selection.id is missing",
		`{"text": "x", "roles": ["a", " "], "expect": {"action": "continue_with_llm"}}`:                     "roles[1] is empty",
		`{"text": "x", "expect": {"action": "continue_with_llm", "command_id": "c"}}`:                       "continue_with_llm names no command",
		`{"text": "x", "expect": {"any_of": []}}`:                                                           "expect.any_of: empty",
		`{"text": "x", "expect": {"action": "continue_with_llm", "any_of": [{"action": "open_picker"}]}}`:   "either any_of or action",
		`{"text": "x", "expect": {"any_of": [{"action": "continue_with_llm"}, {"action": "open_picker"}]}}`: "expect.any_of[1].command_id is missing",
		`{"text": "x", "expect": {"any_of": [{"any_of": [{"action": "continue_with_llm"}]}]}}`:              "expect.any_of[0].any_of: alternatives cannot have alternatives",
		`{"text": "x", "principal": 7, "expect": {"action": "continue_with_llm"}}`:                          "cannot unmarshal number",
	} {
		_, err := eval.Read(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// FuzzRead: no input panics the reader, and what it accepts is a case
// that names what to route and what to expect.
func FuzzRead(f *testing.F) {
	f.Add(`{"text": "x", "expect": {"action": "continue_with_llm"}}`)
	f.Add(`{"text": "x", "principal": "dana", "roles": ["lead"], "selection": {"id": "T-1"}, "expect": {"any_of": [{"action": "invoke_command", "command_id": "c", "target_mode": "m"}, {"action": "continue_with_llm"}]}}`)
	f.Add(`{"selection": {"command_id": "c", "id": "I"}, "expect": {"action": "open_picker", "command_id": "c"}}`)
	f.Add("\xff{")
	f.Fuzz(func(t *testing.T, s string) {
		cases, err := eval.Read(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, c := range cases {
			if c.Text == "" && (c.Selection == nil || c.Selection.CommandID == "") || len(c.Expect.Alternatives()) == 0 || c.Line < 1 {
				t.Fatalf("accepted %+v", c)
			}
			for _, a := range c.Expect.Alternatives() {
				if a.Action == "" || len(a.AnyOf) > 0 {
					t.Fatalf("accepted alternative %+v", a)
				}
			}
		}
	})
}

// desk serves a per-person ticket catalog over HTTP: a lead sees every
// ticket, anyone else their own.
func desk(t *testing.T) *core.Core {
	tickets := map[string][]string{"dana": {"T-1", "Printer on fire"}, "fox": {"T-2", "VPN drops hourly"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ctx struct {
			Principal struct {
				UserID string   `json:"user_id"`
				Roles  []string `json:"roles"`
			} `json:"principal"`
		}
		json.Unmarshal([]byte(r.Header.Get(resolve.ContextHeader)), &ctx)
		items := []map[string]string{}
		for user, tk := range tickets {
			if user == ctx.Principal.UserID || slices.Contains(ctx.Principal.Roles, "lead") {
				items = append(items, map[string]string{"id": tk[0], "display_name": tk[1]})
			}
		}
		json.NewEncoder(w).Encode(items)
	}))
	t.Cleanup(srv.Close)
	return load(t, core.Source{Name: "desk.yaml", YAML: []byte(`version: 1
modes:
  - {key: desk, default: true, toolboxes: [tickets, leads, desk]}
  - {key: work, toolboxes: [tickets]}
toolboxes:
  - {id: tickets, catalogs: [tickets], commands: [open_ticket]}
  - {id: leads, catalogs: [tickets], commands: [close_ticket], required_roles: [lead]}
  - {id: desk, commands: [browse_tickets]}
catalogs:
  - {id: tickets, display_name: Tickets, entity_type: ticket, provider: {http: {url: "` + srv.URL + `"}}}
commands:
  - {id: open_ticket, tool: agent_set_active_entity, parameter: ticket, resolver: {catalog: tickets},
     sets_active_context: true, active_entity_type: ticket, triggers: ["open {item}"]}
  - {id: close_ticket, tool: agent_clear_active_entity, parameter: ticket, resolver: {catalog: tickets},
     clears_active_context: true, triggers: ["close {item}"]}
  - {id: browse_tickets, kind: launcher, target_catalog: tickets, target_mode: work, on_select: open_ticket,
     triggers: ["(show|browse) [my] tickets"]}
`)}, nil)
}

// TestPrincipalAndRoles: a line's principal is who the per-person
// provider answers, and its roles decide which commands are active; lines
// without them take the run's.
func TestPrincipalAndRoles(t *testing.T) {
	t.Parallel()
	c := desk(t)
	rep := run(t, c, read(t, `
{"text": "open printer on fire", "principal": "dana", "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-1"}}
{"text": "open printer on fire", "principal": "fox", "expect": {"action": "continue_with_llm"}}
{"text": "open vpn drops hourly", "principal": "fox", "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-2"}}
{"text": "close printer on fire", "principal": "dana", "expect": {"action": "continue_with_llm"}}
{"text": "close printer on fire", "principal": "dana", "roles": ["lead"], "expect": {"action": "invoke_command", "command_id": "close_ticket", "resolved_id": "T-1"}}
{"text": "close vpn drops hourly", "principal": "walter", "roles": ["lead"], "expect": {"action": "invoke_command", "command_id": "close_ticket", "resolved_id": "T-2"}}
`), &eval.Options{NoAdvice: true})
	if rep.Correct != 6 {
		for _, m := range rep.Misses {
			t.Errorf("line %d: %s %s(%s)\n%s", m.Case.Line, m.Decision.Action, m.Decision.CommandID, m.Decision.ResolvedID, strings.Join(m.Decision.Trace, "\n"))
		}
	}
	// the run's principal and roles, for lines that give none; [] is none
	lines := read(t, `
{"text": "open vpn drops hourly", "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-2"}}
{"text": "close vpn drops hourly", "expect": {"action": "invoke_command", "command_id": "close_ticket", "resolved_id": "T-2"}}
{"text": "close vpn drops hourly", "roles": [], "expect": {"action": "continue_with_llm"}}
`)
	if got := misses(run(t, c, lines, &eval.Options{Principal: "fox", Roles: []string{"lead"}, NoAdvice: true})); len(got) != 0 {
		t.Errorf("as fox, lead: misses on lines %v", got)
	}
	if got := misses(run(t, c, lines, &eval.Options{NoAdvice: true})); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("as the local principal: misses on lines %v, want 2 and 3", got)
	}
}

// TestAnyOf: a line is right when the decision is any of its
// alternatives; it is scored under the one that matched, or the first.
func TestAnyOf(t *testing.T) {
	t.Parallel()
	rep := run(t, demotest.Core(t, nil), read(t, `
{"text": "open the q1 outreach", "expect": {"any_of": [{"action": "open_picker", "command_id": "set_active_email_template"}, {"action": "ask_clarifying_question", "command_id": "set_active_email_template"}]}}
{"text": "switch to ddr mode", "expect": {"any_of": [{"action": "continue_with_llm"}, {"action": "invoke_command", "command_id": "set_mode", "resolved_id": "ddr"}]}}
{"text": "switch to ddr mode", "expect": {"any_of": [{"action": "invoke_command", "command_id": "set_mode", "resolved_id": "sales"}, {"action": "invoke_command", "command_id": "set_active_ddr"}]}}
{"text": "hello there", "expect": {"any_of": [{"action": "continue_with_llm"}, {"action": "open_picker", "command_id": "set_mode"}]}}
`), &eval.Options{NoAdvice: true})
	if got := misses(rep); !slices.Equal(got, []int{4}) {
		t.Fatalf("misses on lines %v, want 4", got)
	}
	if rep.MustNotAct != 0 {
		t.Errorf("%d must not act: no line has only continue_with_llm", rep.MustNotAct)
	}
	want := map[string][3]int{"set_active_email_template": {1, 1, 1}, "set_mode": {2, 2, 2}} // expected, predicted, correct
	for _, s := range rep.Commands {
		if w := want[s.CommandID]; w != [3]int{s.Expected, s.Predicted, s.Correct} {
			t.Errorf("%+v, want %v", s, w)
		}
	}
}

// TestSelection: a line's selection is the pick in what its text offered,
// made as the page makes it — a launcher's pick runs in its target mode;
// an item the picker does not hold, or a text that offers nothing, is a
// miss that says why; a selection alone is the turn.
func TestSelection(t *testing.T) {
	t.Parallel()
	c := desk(t)
	rep := run(t, c, read(t, `
{"text": "show my tickets", "ui": true, "principal": "dana", "selection": {"id": "T-1"}, "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-1", "target_mode": "work"}}
{"text": "show my tickets", "principal": "dana", "selection": {"id": "T-1"}, "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-1", "target_mode": "work"}}
{"text": "show my tickets", "ui": true, "principal": "dana", "selection": {"id": "T-2"}, "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-2"}}
{"text": "show my tickets", "principal": "walter", "roles": ["lead"], "selection": {"id": "T-9"}, "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-9"}}
{"text": "open printer on fire", "principal": "dana", "selection": {"id": "T-1"}, "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-1"}}
{"selection": {"command_id": "browse_tickets", "id": "T-2"}, "principal": "fox", "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-2", "target_mode": "work"}}
{"text": "show my tickets", "ui": true, "principal": "dana", "selection": {"id": "T-1"}, "expect": {"action": "invoke_command", "command_id": "open_ticket", "resolved_id": "T-1", "target_mode": "desk"}}
`), &eval.Options{NoAdvice: true})
	notes := map[int]string{}
	for _, m := range rep.Misses {
		notes[m.Case.Line] = m.Note
	}
	if got := misses(rep); !slices.Equal(got, []int{4, 5, 6, 8}) {
		for _, m := range rep.Misses {
			t.Logf("line %d: %s %s(%s) in %q: %s\n%s", m.Case.Line, m.Decision.Action, m.Decision.CommandID, m.Decision.ResolvedID, m.Decision.TargetMode, m.Note, strings.Join(m.Decision.Trace, "\n"))
		}
		t.Fatalf("misses on lines %v, want 4 (T-2 is fox's), 5 (no T-9), 6 (nothing offered) and 8 (the wrong mode)", got)
	}
	for line, want := range map[int]string{4: `refused: selecting T-2`, 5: "the question does not offer T-9", 6: "the text offers nothing to select T-1 from: invoke_command open_ticket"} {
		if !strings.Contains(notes[line], want) {
			t.Errorf("line %d: note %q, want %q", line, notes[line], want)
		}
	}
}

// TestLauncherCredit: a launcher's picker names its on_select command; a
// line that expects the launcher is credited with it — in its target
// mode, while it is active — and a line that expects the on_select
// command is right too.
func TestLauncherCredit(t *testing.T) {
	t.Parallel()
	c := desk(t)
	rep := run(t, c, read(t, `
{"text": "show my tickets", "ui": true, "principal": "dana", "expect": {"action": "open_picker", "command_id": "browse_tickets"}}
{"text": "show my tickets", "principal": "dana", "expect": {"action": "ask_clarifying_question", "command_id": "browse_tickets"}}
{"text": "show my tickets", "ui": true, "principal": "dana", "expect": {"action": "open_picker", "command_id": "open_ticket"}}
{"text": "open printer", "mode": "work", "ui": true, "principal": "dana", "expect": {"action": "open_picker", "command_id": "browse_tickets"}}
`), &eval.Options{NoAdvice: true})
	if got := misses(rep); !slices.Equal(got, []int{5}) {
		for _, m := range rep.Misses {
			t.Logf("line %d: %s %s in %q\n%s", m.Case.Line, m.Decision.Action, m.Decision.CommandID, m.Decision.TargetMode, strings.Join(m.Decision.Trace, "\n"))
		}
		t.Fatalf("misses on lines %v, want 5 (open_ticket's own picker, where the launcher is not active)", got)
	}
	for _, s := range rep.Commands {
		switch s.CommandID {
		case "browse_tickets":
			if s.Expected != 3 || s.Predicted != 2 || s.Correct != 2 {
				t.Errorf("%+v", s)
			}
		case "open_ticket":
			if s.Expected != 1 || s.Predicted != 2 || s.Correct != 1 {
				t.Errorf("%+v", s)
			}
		}
	}
}

// opsCore is the operations desk, where similarity alone opens launchers'
// pickers in the ops mode.
func opsCore(t *testing.T) *core.Core {
	raw, err := opsdesk.Config()
	if err != nil {
		t.Fatal(err)
	}
	progs := map[string]tool.Program{}
	for _, n := range opsdesk.Programs() {
		progs[n] = func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	}
	return load(t, core.Source{YAML: raw, Name: "opsdesk.yaml"}, &core.Options{Programs: progs})
}

// TestThresholdAdvice: with the threshold just above what a request needs
// to open its launcher by similarity, the advice is the threshold that
// lets it, measured by routing the file again, and it lists every line
// that threshold decides otherwise — the one it gets right and none it
// keeps as it was; where no threshold does better, it says so.
func TestThresholdAdvice(t *testing.T) {
	t.Parallel()
	ops := opsCore(t)
	const request = "show our squads"
	m, ok := ops.Router().MatchExamples(opsdesk.Ops, nil, request)
	if !ok || m.CommandID != "open_teams" || m.Declined != "" {
		t.Fatalf("%q: %+v", request, m)
	}
	cfg := *ops.Config()
	cfg.Router.ExampleThreshold = m.Confidence + 0.01
	high, err := ops.Rebuild(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer high.Close()
	lines := read(t, `
{"text": "show our squads", "mode": "ops", "ui": true, "expect": {"action": "open_picker", "command_id": "open_teams"}}
{"text": "switch to ops mode", "expect": {"action": "invoke_command", "command_id": "set_mode", "resolved_id": "ops"}}
{"text": "the weather is lovely", "mode": "ops", "ui": true, "expect": {"action": "continue_with_llm"}}
{"text": "could you give payments api a kick", "mode": "ops", "expect": {"action": "ask_clarifying_question", "command_id": "restart_service", "resolved_id": "SER-1"}}
`)
	rep := run(t, high, lines, nil)
	a := rep.Advice
	if a == nil || a.Current != cfg.Router.ExampleThreshold || a.Suggested > m.Confidence || a.CorrectThen <= a.CorrectNow || len(a.Tried) == 0 {
		t.Fatalf("advice %+v", a)
	}
	// the changes are exactly the lines routed otherwise at the suggested
	// threshold, and they account for the lines it gets right
	cfg.Router.ExampleThreshold = a.Suggested
	then, err := ops.Rebuild(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer then.Close()
	var changed []int
	for _, cs := range lines {
		s := &agentplane.Session{ID: "s", Mode: high.View().Registry().ModeOf(cs.Mode), Version: 1}
		d1, _ := high.Route(context.Background(), s, agentplane.TurnInput{Text: cs.Text, UI: cs.UI})
		d2, _ := then.Route(context.Background(), s, agentplane.TurnInput{Text: cs.Text, UI: cs.UI})
		if d1.Action != d2.Action || d1.CommandID != d2.CommandID || d1.ResolvedID != d2.ResolvedID {
			changed = append(changed, cs.Line)
		}
	}
	var listed []int
	gained := 0
	for _, ch := range a.Changes {
		listed = append(listed, ch.Case.Line)
		if ch.Right && !ch.WasRight {
			gained++
		} else if ch.WasRight && !ch.Right {
			gained--
		}
	}
	if !slices.Equal(listed, changed) || !slices.Contains(listed, 2) || slices.Contains(listed, 4) || a.CorrectThen != a.CorrectNow+gained {
		t.Fatalf("listed lines %v, routed otherwise %v; %d right now, %d then, gained %d", listed, changed, a.CorrectNow, a.CorrectThen, gained)
	}
	for _, ch := range a.Changes {
		if ch.Case.Line == 2 && (ch.WasRight || !ch.Right || ch.After.CommandID != "work_on_team") {
			t.Errorf("the squads line: %+v", ch)
		}
	}
	// at the shipped threshold every line is right: nothing to advise
	rep = run(t, ops, lines, nil)
	if a := rep.Advice; rep.Correct != 4 || a == nil || a.Suggested != a.Current || len(a.Changes) != 0 || a.CorrectThen != 4 {
		t.Fatalf("correct %d, advice %+v", rep.Correct, a)
	}
}

// TestSimilarityMatchesTheRouter walks both sides of each bound of the
// router's rule for similarity alone — examples per command, commands per
// mode, launcher or executable — and checks that what Similarity says is
// what the router does with a request that only similarity recognises:
// "show our squads" (open_teams, a launcher) and "could you give payments
// api a kick" (restart_service, an executable).
func TestSimilarityMatchesTheRouter(t *testing.T) {
	t.Parallel()
	ops := opsCore(t)
	cut := func(n int, ids ...string) func(*[]agentplane.CommandDefinition) {
		return func(cmds *[]agentplane.CommandDefinition) {
			for i := range *cmds {
				c := &(*cmds)[i]
				if len(ids) == 0 && c.Kind == agentplane.KindLauncher || slices.Contains(ids, c.ID) {
					c.Examples = c.Examples[:n]
				}
			}
		}
	}
	twenty := []string{"core", "teams", "services", "alerts", "runbooks", "dashboards", "hosts", "clusters", "tickets", "changes"}
	nineteen := []string{"core", "teams", "services", "incidents", "alerts", "runbooks", "dashboards", "hosts", "clusters"}
	for _, tc := range []struct {
		name      string
		cmds      func(*[]agentplane.CommandDefinition)
		boxes     []string
		commands  int // 0: not checked
		state     eval.SimilarityState
		squads    bool // open_teams among the launchers, and its picker opens
		restart   bool // restart_service among the executables, and asked about
		kickAsked bool
	}{
		{name: "as shipped", state: eval.SimilarityDecides, squads: true, restart: true},
		{name: "launcher 19 examples", cmds: cut(19, "open_teams"), state: eval.SimilarityDecides, restart: true},
		{name: "launcher 20 examples", cmds: cut(20, "open_teams"), state: eval.SimilarityDecides, squads: true, restart: true},
		{name: "executable 19 examples", cmds: cut(19, "restart_service"), state: eval.SimilarityDecides, squads: true},
		{name: "executable 20 examples", cmds: cut(20, "restart_service"), state: eval.SimilarityDecides, squads: true, restart: true},
		{name: "20 commands", boxes: twenty, commands: 20, state: eval.SimilarityDecides, squads: true, restart: true},
		{name: "19 commands", boxes: nineteen, commands: 19, state: eval.SimilarityOff},
		{name: "no launcher with 20", cmds: cut(19), state: eval.SimilarityAsks, restart: true},
		{name: "nothing with 20", cmds: func(c *[]agentplane.CommandDefinition) { cut(19)(c); cut(19, "restart_service")(c) }, state: eval.SimilarityOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := *ops.Config()
			cfg.Commands = slices.Clone(cfg.Commands)
			for i := range cfg.Commands {
				cfg.Commands[i].Examples = slices.Clone(cfg.Commands[i].Examples)
			}
			if tc.cmds != nil {
				tc.cmds(&cfg.Commands)
			}
			cfg.Modes = slices.Clone(cfg.Modes)
			for i := range cfg.Modes {
				if cfg.Modes[i].Key == opsdesk.Ops && tc.boxes != nil {
					cfg.Modes[i].Toolboxes = tc.boxes
				}
			}
			c, err := ops.Rebuild(context.Background(), &cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var ms eval.ModeSimilarity
			for _, s := range eval.Similarity(c.View().Registry(), nil) {
				if s.Mode == opsdesk.Ops {
					ms = s
				}
			}
			if ms.State != tc.state || tc.commands != 0 && ms.Commands != tc.commands {
				t.Fatalf("%s with %d commands, want %s with %d: %s", ms.State, ms.Commands, tc.state, tc.commands, ms.Why())
			}
			has := func(cs []eval.CommandExamples, id string) bool {
				return slices.ContainsFunc(cs, func(c eval.CommandExamples) bool { return c.ID == id })
			}
			route := func(text string, ui bool) agentplane.Decision {
				d, err := c.Route(context.Background(), &agentplane.Session{ID: "s", Mode: opsdesk.Ops, Version: 1}, agentplane.TurnInput{Text: text, UI: ui})
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			squads := ms.State == eval.SimilarityDecides && has(ms.Launchers, "open_teams")
			if d := route("show our squads", true); squads != tc.squads || (d.Action == agentplane.ActionOpenPicker && d.CommandID == "work_on_team") != tc.squads {
				t.Errorf("open_teams listed %v, picker %s %s, want %v: %s\n%s", squads, d.Action, d.CommandID, tc.squads, ms.Why(), strings.Join(d.Trace, "\n"))
			}
			restart := ms.State != eval.SimilarityOff && has(ms.Executables, "restart_service")
			if d := route("could you give payments api a kick", false); restart != tc.restart || d.IsConfirmationQuestion() != tc.restart {
				t.Errorf("restart_service listed %v, decision %s %s, want %v: %s\n%s", restart, d.Action, d.CommandID, tc.restart, ms.Why(), strings.Join(d.Trace, "\n"))
			}
		})
	}
}
