package router_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
)

// shapesConfig has an example that is little more than its item, two
// executable commands whose examples share a shape over catalogs that
// share an item, two launchers whose examples share a shape, and
// negative examples.
const shapesConfig = `version: 1
modes:
  - {key: home, default: true, toolboxes: [all]}
toolboxes:
  - {id: all, catalogs: [pizzas, songs], commands: [order_pizza, buy_song, play_song, open_menu, open_songs]}
catalogs:
  - id: pizzas
    entity_type: pizza
    items: [{id: PZ-1, display_name: Margherita}, {id: PZ-2, display_name: Hawaiian}]
  - id: songs
    entity_type: song
    items: [{id: S-1, display_name: Hawaiian}, {id: S-2, display_name: Yesterday}]
commands:
  - id: order_pizza
    tool: agent_set_active_entity
    parameter: pizza
    resolver: {catalog: pizzas}
    sets_active_context: true
    active_entity_type: pizza
    examples: [i want a margherita, get me a hawaiian]
  - id: buy_song
    tool: agent_set_active_entity
    parameter: song
    resolver: {catalog: songs}
    sets_active_context: true
    active_entity_type: song
    examples: [get me yesterday]
  - id: play_song
    tool: agent_set_active_entity
    parameter: song
    resolver: {catalog: songs}
    sets_active_context: true
    active_entity_type: song
    examples: [put on yesterday]
  - id: open_menu
    kind: launcher
    target_catalog: pizzas
    on_select: order_pizza
    examples: [show me the list]
  - id: open_songs
    kind: launcher
    target_catalog: songs
    on_select: play_song
    examples: [show me the list please, which songs do you have]
router:
  negative_examples: [which pizza is the best, do you have songs about pizza]
`

func TestShapeRules(t *testing.T) {
	t.Parallel()
	rt := registryOf(t, "shapes.yaml", []byte(shapesConfig))
	tests := []struct {
		text   string
		action agentplane.Action
		cmd    string
		id     string
		trace  string
	}{
		// the examples' own shapes act
		{"get me a margherita", agentplane.ActionInvokeCommand, "order_pizza", "PZ-1", `the shape of "get me a hawaiian"`},
		{"put on hawaiian", agentplane.ActionInvokeCommand, "play_song", "S-1", `the shape of "put on yesterday"`},
		// "i want a margherita" is, fillers and preamble aside, its item:
		// a bare item asks for nothing
		{"margherita", agentplane.ActionContinueLLM, "", "", ""},
		{"the hawaiian", agentplane.ActionContinueLLM, "", "", ""},
		// two commands take "hawaiian" in the shape "get me {item}"
		{"get me the hawaiian", agentplane.ActionContinueLLM, "", "", "not guessing which"},
		// "yesterday" is only a song
		{"get me yesterday", agentplane.ActionInvokeCommand, "buy_song", "S-2", ""},
		// two launchers' examples have the shape "show me list": the shape
		// does not decide, similarity does (a launcher runs nothing)
		{"show me the list", agentplane.ActionOpenPicker, "order_pizza", "", "the shape does not decide"},
		{"which songs do you have", agentplane.ActionOpenPicker, "play_song", "", `the shape of "which songs do you have" of open_songs`},
	}
	for _, tt := range tests {
		d, err := rt.Route(context.Background(), nil, agentplane.TurnInput{Text: tt.text, UI: true, Now: now})
		if err != nil {
			t.Fatalf("%q: %v", tt.text, err)
		}
		trace := strings.Join(d.Trace, "\n")
		if d.Action != tt.action || d.CommandID != tt.cmd || d.ResolvedID != tt.id || !strings.Contains(trace, tt.trace) {
			t.Errorf("%q: %s %s(%s), want %s %s(%s) with %q in the trace\n%s", tt.text, d.Action, d.CommandID, d.ResolvedID,
				tt.action, tt.cmd, tt.id, tt.trace, trace)
		}
	}
}

// TestNegativeExamples: a turn nearest to the negative examples goes to
// the LLM, and the trace names them.
func TestNegativeExamples(t *testing.T) {
	t.Parallel()
	rt := registryOf(t, "shapes.yaml", []byte(shapesConfig))
	d, err := rt.Route(context.Background(), nil, agentplane.TurnInput{Text: "which pizza is the very best", UI: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	trace := strings.Join(d.Trace, "\n")
	if d.Action != agentplane.ActionContinueLLM || !strings.Contains(trace, "nearest are the negative examples") ||
		!strings.Contains(trace, `negative example "which pizza is the best"`) {
		t.Fatalf("%s\n%s", d.Action, trace)
	}
	m, ok := rt.MatchExamples("home", nil, "which pizza is the very best")
	if ok || !m.Negative || m.CommandID != "" {
		t.Fatalf("MatchExamples = %+v, %v", m, ok)
	}
	// without the negative examples, the same turn is a command's nearest
	plain := registryOf(t, "plain.yaml", []byte(strings.Replace(shapesConfig,
		"  negative_examples: [which pizza is the best, do you have songs about pizza]\n", "", 1)))
	if m, ok := plain.MatchExamples("home", nil, "which pizza is the very best"); !ok || m.Negative {
		t.Fatalf("without negative examples: %+v, %v", m, ok)
	}
}

func TestNegativeExamplesValidated(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ from, to, want string }{
		{"[which pizza is the best, do you have songs about pizza]", "[which pizza is the best, '  ']", "router.negative_examples[1]: empty"},
		{"[which pizza is the best, do you have songs about pizza]", "[Get me Yesterday!]", `router.negative_examples[0]: "Get me Yesterday!" is also an example of command "buy_song"`},
	} {
		_, err := config.Parse([]byte(strings.Replace(shapesConfig, tt.from, tt.to, 1)), "x.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.to, err, tt.want)
		}
	}
}
