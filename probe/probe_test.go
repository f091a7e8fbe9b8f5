package probe_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/opsdesk"
	"github.com/agentplane/agentplane/probe"
	"github.com/agentplane/agentplane/tool"
)

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

// TestShippedConfigurationsAreClean: the demo and the example
// configurations act on none of their probe utterances.
func TestShippedConfigurationsAreClean(t *testing.T) {
	t.Setenv("DESK_TOKEN", "probe")
	ops, err := opsdesk.Config()
	if err != nil {
		t.Fatal(err)
	}
	opsPrograms := map[string]tool.Program{}
	for _, n := range opsdesk.Programs() {
		opsPrograms[n] = func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	}
	for name, c := range map[string]*core.Core{
		"demo":     load(t, core.Source{YAML: demo.YAML, Name: demo.Name}, &core.Options{Programs: demo.Programs(nil)}),
		"media":    load(t, core.Source{Path: "../examples/media/agentplane.yaml"}, nil),
		"helpdesk": load(t, core.Source{Path: "../examples/helpdesk/agentplane.yaml"}, nil),
		"opsdesk":  load(t, core.Source{YAML: ops, Name: "opsdesk.yaml"}, &core.Options{Programs: opsPrograms}),
	} {
		rep, err := probe.Run(context.Background(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Utterances < 200 || rep.Turns < rep.Utterances {
			t.Errorf("%s: only %d utterances, %d turns", name, rep.Utterances, rep.Turns)
		}
		for _, h := range rep.Sorted() {
			t.Errorf("%s: %q in mode %s (ui %v, active %q) %s: %s(%s)\n%s", name, h.Text, h.Mode, h.UI, h.Active, h.Kind,
				h.Decision.CommandID, h.Decision.ResolvedID, strings.Join(h.Decision.Trace, "\n"))
		}
	}
}

// TestProbeFindsAHijack: a trigger that fires on a statement is reported.
func TestProbeFindsAHijack(t *testing.T) {
	t.Parallel()
	yaml, err := os.ReadFile("../examples/media/agentplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(yaml), "    examples: [put on abbey road]", "    examples: [put on abbey road]\n    # a careless trigger\n", 1)
	bad = strings.Replace(bad, `triggers: ["play [the] [album] {item}"]`, `triggers: ["play [the] [album] {item}", "i like {item}"]`, 1)
	// and a careless launcher trigger: a picker on a statement is a hijack too
	bad = strings.Replace(bad, `triggers: ["browse [the] albums"]`, `triggers: ["browse [the] albums", "(dont|do not) browse [the] albums"]`, 1)
	c := load(t, core.Source{YAML: []byte(bad), Name: "bad.yaml"}, nil)
	rep, err := probe.Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	found, picker := false, false
	for _, h := range rep.Hijacks {
		if h.Text == "i like Abbey Road" && h.Decision.CommandID == "play_album" && h.Kind == probe.Invokes {
			found = true
		}
		if h.Kind == probe.Picker && h.Decision.CommandID == "play_album" && strings.Contains(h.Text, "albums") {
			picker = true
		}
	}
	if !found || !picker {
		t.Fatalf("the careless triggers were not reported (invocation %v, picker %v); %d hijacks: %v", found, picker, len(rep.Hijacks), rep.Count())
	}
}

// TestBareItemsNeverAct: an example that is little more than its item
// ("i want a hawaiian") does not make a bare name act; the probe routes
// bare names and finds nothing.
func TestBareItemsNeverAct(t *testing.T) {
	t.Parallel()
	yaml, err := os.ReadFile("../examples/media/agentplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(yaml), "      - get me a quattro formaggi\n", "      - get me a quattro formaggi\n      - i want a hawaiian\n", 1)
	if src == string(yaml) {
		t.Fatal("the media configuration's pizza examples were not found")
	}
	c := load(t, core.Source{YAML: []byte(src), Name: "bare.yaml"}, nil)
	rep, err := probe.Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range rep.Sorted() {
		t.Errorf("%q in mode %s acts: %s(%s)", h.Text, h.Mode, h.Decision.CommandID, h.Decision.ResolvedID)
	}
}
