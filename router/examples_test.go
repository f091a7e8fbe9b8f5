package router_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/internal/testkit/clinc150"
	"github.com/agentplane/agentplane/router"
)

// examplesConfig has a launcher with enough examples (20) to be
// recognised by similarity, an executable command recognised from its examples when its
// item is named, and a launcher with too few examples to go beyond its
// own words.
const examplesConfig = `version: 1
modes:
  - {key: general, default: true, toolboxes: [core, weather]}
  - {key: quiet, toolboxes: [core]}
toolboxes:
  - {id: core, catalogs: [modes], commands: [set_mode]}
  - {id: weather, catalogs: [cities], commands: [forecast, open_cities, open_alerts]}
catalogs:
  - id: cities
    entity_type: city
    items: [{id: PAR, display_name: Paris}, {id: OSL, display_name: Oslo}, {id: ROM, display_name: Rome}]
commands:
  - id: set_mode
    tool: agent_set_mode
    parameter: mode
    resolver: {catalog: modes}
    sets_session_mode: true
    triggers: ["switch to [the] {item} mode"]
  - id: forecast
    tool: agent_set_active_entity
    parameter: city
    resolver: {catalog: cities}
    sets_active_context: true
    active_entity_type: city
    examples:
      - what is the weather in paris
      - weather forecast for oslo
      - will it rain in oslo tomorrow
      - how warm is it in rome today
  - id: open_cities
    kind: launcher
    target_catalog: cities
    on_select: forecast
    examples:
      - which cities do you know
      - list the cities
      - show me all the cities
      - what places can you tell me about
      - cities you cover
      - browse the city list
      - where do you have forecasts for
      - give me the list of locations
      - what towns are there
      - show every city you know
      - what cities are supported
      - tell me which cities you cover
      - city list
      - all cities
      - cities please
      - do you know other cities
      - which locations can i pick
      - what are my city options
      - show the available places
      - list every location you support
  - id: open_alerts
    kind: launcher
    target_catalog: cities
    on_select: forecast
    examples: [show weather alerts, list the storm warnings]
`

func examplesRegistry(t *testing.T) *router.Router {
	return registryOf(t, "examples.yaml", []byte(examplesConfig))
}

// registryOf parses a configuration and builds its registry.
func registryOf(tb testing.TB, name string, yaml []byte) *router.Router {
	tb.Helper()
	return registryWith(tb, name, yaml, nil)
}

// registryWith is registryOf with the configuration's parse options.
func registryWith(tb testing.TB, name string, yaml []byte, opts *config.Options) *router.Router {
	tb.Helper()
	cfg, err := config.Parse(yaml, name, opts)
	if err != nil {
		tb.Fatal(err)
	}
	reg, err := compile(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// clincData loads the CLINC150 copy in the repository.
func clincData(tb testing.TB) *clinc150.Dataset {
	tb.Helper()
	d, err := clinc150.Load(clinc150.Path())
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func TestRouteExamples(t *testing.T) {
	reg := examplesRegistry(t)
	for _, c := range []struct {
		name, text, mode string
		want             want
	}{
		{"launcher recognised by similarity", "which towns do you know about", "general",
			want{action: agentplane.ActionOpenPicker, command: "forecast", catalog: "cities", traceHas: "examples: nearest command open_cities"}},
		{"executable with its item named", "will it rain in paris tomorrow", "general",
			want{action: agentplane.ActionInvokeCommand, command: "forecast", resolved: "PAR", traceHas: `the utterance has the shape of "will it rain in oslo tomorrow" of forecast, with "paris" as its item: PAR`}},
		{"executable with a word none of its examples has", "will it snow in paris tomorrow", "general",
			want{action: agentplane.ActionContinueLLM, reason: agentplane.ReasonNoControlIntent, traceHas: `not accounted for: "snow"`}},
		{"executable with the words of its examples, another shape", "in paris will it rain tomorrow", "general",
			want{action: agentplane.ActionContinueLLM, reason: agentplane.ReasonNoControlIntent}},
		{"executable without an item", "will it rain tomorrow", "general",
			want{action: agentplane.ActionContinueLLM, reason: agentplane.ReasonNoControlIntent}},
		{"an utterance too long for a command", strings.Repeat("will it rain in paris tomorrow ", 7), "general",
			want{action: agentplane.ActionContinueLLM, reason: agentplane.ReasonNoControlIntent, traceHas: "42 words are too many for a command"}},
		{"the item alone asks for nothing", "paris", "general",
			want{action: agentplane.ActionContinueLLM, reason: agentplane.ReasonNoControlIntent}},
		{"launcher with few examples and a word they lack", "show weather alerts for my region", "general",
			want{action: agentplane.ActionContinueLLM, reason: agentplane.ReasonNoControlIntent, traceHas: `not accounted for: "region"`}},
		{"launcher with few examples, its own words", "list the weather alerts", "general",
			want{action: agentplane.ActionOpenPicker, command: "forecast", catalog: "cities", traceHas: "examples: nearest command open_alerts"}},
		{"below the threshold", "i had pasta for lunch", "general",
			want{action: agentplane.ActionContinueLLM, reason: agentplane.ReasonNoControlIntent, traceHas: "< threshold"}},
		{"inactive commands are not recognised", "will it rain in paris tomorrow", "quiet",
			want{action: agentplane.ActionContinueLLM, reason: agentplane.ReasonNoControlIntent}},
		{"a trigger wins over examples", "switch to quiet mode", "general",
			want{action: agentplane.ActionInvokeCommand, command: "set_mode", resolved: "quiet", traceHas: "trigger of set_mode matched"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := agentplane.TurnInput{Text: c.text, UI: true, Now: now}
			d, err := reg.Route(context.Background(), sessionIn(c.mode), in)
			if err != nil {
				t.Fatal(err)
			}
			check(t, d, c.want)
			if c.mode == "quiet" && strings.Contains(strings.Join(d.Trace, "\n"), "forecast") {
				t.Errorf("an inactive command appears in the trace:\n%s", strings.Join(d.Trace, "\n"))
			}
			again, _ := reg.Route(context.Background(), sessionIn(c.mode), in)
			if !reflect.DeepEqual(d, again) {
				t.Errorf("same turn, different decision:\n%+v\n%+v", d, again)
			}
		})
	}
}

func TestRouteExamplesWithoutUI(t *testing.T) {
	reg := examplesRegistry(t)
	d, err := reg.Route(context.Background(), sessionIn("general"), agentplane.TurnInput{Text: "which towns do you know about", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != agentplane.ActionAskQuestion || d.CommandID != "forecast" || len(d.OptionIDs) != 3 {
		t.Errorf("without UI a recognised launcher asks one question listing the items: %+v", d)
	}
}

func TestRouteExamplesTraceNamesNearest(t *testing.T) {
	reg := examplesRegistry(t)
	d, _ := reg.Route(context.Background(), sessionIn("general"), agentplane.TurnInput{Text: "what is the weather like in rome", UI: true, Now: now})
	trace := strings.Join(d.Trace, "\n")
	for _, s := range []string{"confidence ", "probability ", "similarity ", `example "what is the weather in paris" similarity`} {
		if !strings.Contains(trace, s) {
			t.Errorf("trace lacks %q:\n%s", s, trace)
		}
	}
	if d.Action != agentplane.ActionContinueLLM {
		t.Errorf("another shape than the examples' acted: %+v", d)
	}
	d, _ = reg.Route(context.Background(), sessionIn("general"), agentplane.TurnInput{Text: "what is the weather in rome", UI: true, Now: now})
	if d.Action != agentplane.ActionInvokeCommand || d.ResolvedID != "ROM" ||
		!strings.Contains(strings.Join(d.Trace, "\n"), `the utterance has the shape of "what is the weather in paris" of forecast`) {
		t.Errorf("decision %+v", d)
	}
}

func TestMatchExamples(t *testing.T) {
	reg := examplesRegistry(t)
	m, ok := reg.MatchExamples("general", nil, "list all the cities please")
	if !ok || m.CommandID != "open_cities" || m.Confidence <= 0 || m.Confidence > 1 || len(m.Nearest) == 0 {
		t.Errorf("match %+v, %v", m, ok)
	}
	if _, ok := reg.MatchExamples("general", nil, " ?! "); ok {
		t.Error("text without words matched")
	}
	if m, ok := reg.MatchExamples("quiet", nil, "list all the cities please"); !ok || m.CommandID != "set_mode" {
		t.Errorf("in mode quiet only set_mode (its trigger phrasings) is active, yet matched %+v", m)
	}
}
