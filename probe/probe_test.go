package probe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/opsdesk"
	"github.com/agentplane/agentplane/probe"
	"github.com/agentplane/agentplane/resolve"
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

func run(t *testing.T, c *core.Core, opts *probe.Options) probe.Report {
	t.Helper()
	rep, err := probe.Run(context.Background(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// clean returns the frames kept at 0 on the named configuration: every
// frame, since the router accounts for every word of an utterance (issue
// 34) — a ratchet, never a frame taken back.
func clean(string) []probe.Frame { return probe.AllFrames() }

// TestShippedConfigurations: the demo and the example configurations act
// on none of the probe utterances of the frames kept clean, and every
// frame is probed with utterances of its own.
func TestShippedConfigurations(t *testing.T) {
	t.Setenv("DESK_TOKEN", "probe")
	ops, err := opsdesk.Config()
	if err != nil {
		t.Fatal(err)
	}
	opsPrograms := map[string]tool.Program{}
	for _, n := range opsdesk.Programs() {
		opsPrograms[n] = func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	}
	var opts *probe.Options
	if raceEnabled {
		opts = &probe.Options{PhrasingsPerTrigger: 1, ItemsPerSource: 1}
	}
	for name, c := range map[string]*core.Core{
		"demo":     load(t, core.Source{YAML: demo.YAML, Name: demo.Name}, &core.Options{Programs: demo.Programs(nil)}),
		"media":    load(t, core.Source{Path: "../examples/media/agentplane.yaml"}, nil),
		"helpdesk": load(t, core.Source{Path: "../examples/helpdesk/agentplane.yaml"}, nil),
		"opsdesk":  load(t, core.Source{YAML: ops, Name: "opsdesk.yaml"}, &core.Options{Programs: opsPrograms}),
	} {
		rep := run(t, c, opts)
		if rep.Utterances < 50 || rep.Turns < rep.Utterances {
			t.Errorf("%s: only %d utterances, %d turns", name, rep.Utterances, rep.Turns)
		}
		for _, f := range rep.Frames {
			if f.Utterances == 0 || f.Turns < f.Utterances {
				t.Errorf("%s: frame %s: %d utterances, %d turns", name, f.Frame, f.Utterances, f.Turns)
			}
			if !slices.Contains(clean(name), f.Frame) {
				t.Logf("%s: frame %s: %d of %d turns not handed to the LLM %v", name, f.Frame, f.Acted(), f.Turns, f.Kinds)
			}
		}
		for _, h := range rep.Sorted() {
			if slices.Contains(clean(name), h.Frame) {
				t.Errorf("%s: %s %q in mode %s (ui %v, active %q) %s: %s(%s)\n%s", name, h.Frame, h.Text, h.Mode, h.UI, h.Active, h.Kind,
					h.Decision.CommandID, h.Decision.ResolvedID, strings.Join(h.Decision.Trace, "\n"))
			}
		}
	}
}

// music is a hand-built configuration: albums, a command that plays one,
// and a second command whose trigger is extra.
func music(extra string) string {
	return `version: 1
modes:
  - {key: home, display_name: Home, default: true, toolboxes: [music]}
toolboxes:
  - {id: music, catalogs: [albums], commands: [play_album, careless]}
catalogs:
  - id: albums
    display_name: Albums
    entity_type: album
    items:
      - {id: AL-1, display_name: Abbey Road}
      - {id: AL-2, display_name: Revolver}
commands:
  - id: careless
    tool: agent_set_active_entity
    parameter: album
    resolver: {catalog: albums}
    sets_active_context: true
    active_entity_type: album
    triggers: [` + extra + `]
  - id: play_album
    tool: agent_set_active_entity
    parameter: album
    resolver: {catalog: albums}
    sets_active_context: true
    active_entity_type: album
    triggers: ["play {item}"]
`
}

// frameTrigger is a trigger that fires on the frame's first sentence
// around "play {item}": a careless configuration's router acts in that
// frame whatever its rules, because the whole sentence is its trigger.
func frameTrigger(t *testing.T, f probe.Frame) (trigger, sample string) {
	tpl := probe.Templates(f)[0]
	for _, t := range probe.Templates(f) {
		// a quoted line or an emoji is never a command, whatever the
		// triggers: the first template without them
		if !strings.HasPrefix(t, ">") && !strings.Contains(t, "😂") && !strings.Contains(t, "🙄") {
			tpl = t
			break
		}
	}
	if f == probe.FrameMention {
		tpl = probe.Templates(f)[3] // the first with words besides the name
	}
	base := "play itemslot"
	if f == probe.FrameMention || f == probe.FrameOtherWorld {
		base = "itemslot" // the item itself is framed
	}
	text := strings.ReplaceAll(strings.ReplaceAll(tpl, "{}", base), "{name}", "sam")
	if f == probe.FrameOtherWorld {
		text = "play " + text
	}
	words := resolve.Fields(nil, resolve.Normalize(text))
	if !slices.Contains(words, "itemslot") {
		t.Fatalf("frame %s: template %q lost its slot", f, tpl)
	}
	trig := strings.ReplaceAll(strings.Join(words, " "), "itemslot", "{item}")
	return fmt.Sprintf("%q", trig), strings.ReplaceAll(text, "itemslot", "Abbey Road")
}

// TestEveryFrameFindsAnAct walks the frames: for each, a configuration
// whose router acts on the frame's sentences (a careless trigger) is
// reported, under that frame, with what it does; and probing only other
// frames does not report it there.
func TestEveryFrameFindsAnAct(t *testing.T) {
	t.Parallel()
	for _, f := range probe.AllFrames() {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			trig, sample := frameTrigger(t, f)
			c := load(t, core.Source{YAML: []byte(music(trig)), Name: "careless.yaml"}, nil)
			rep := run(t, c, nil)
			var got []probe.Hijack
			for _, h := range rep.Hijacks {
				if h.Decision.CommandID == "careless" && h.Frame == f {
					got = append(got, h)
				}
			}
			if len(got) == 0 {
				t.Fatalf("trigger %s: no act of careless in frame %s; %d hijacks %v", trig, f, len(rep.Hijacks), rep.Count())
			}
			found := false
			for _, h := range got {
				found = found || strings.EqualFold(resolve.Normalize(h.Text), resolve.Normalize(sample)) && (h.Kind == probe.Invokes || h.Kind == probe.Confirms) && h.Decision.ResolvedID == "AL-1"
			}
			if !found {
				t.Errorf("%q is not among the acts in frame %s: %q", sample, f, got[0].Text)
			}
			for _, fc := range rep.Frames {
				if fc.Frame == f && fc.Kinds[probe.Invokes]+fc.Kinds[probe.Confirms] < len(got) {
					t.Errorf("frame %s counts %v, fewer than its %d acts", f, fc.Kinds, len(got))
				}
			}
			var others []probe.Frame
			for _, o := range probe.AllFrames() {
				if o != f {
					others = append(others, o)
				}
			}
			for _, h := range run(t, c, &probe.Options{Frames: others}).Hijacks {
				if h.Frame == f {
					t.Fatalf("frame %s reported when not probed: %q", f, h.Text)
				}
			}
		})
	}
}

// TestEveryFrameHasTwelveKinds: the frames of issue 34 are all there,
// each with sentences that put the phrase in more words.
func TestFrames(t *testing.T) {
	t.Parallel()
	if n := len(probe.AllFrames()); n < 13 {
		t.Fatalf("%d frames", n)
	}
	for _, f := range probe.AllFrames() {
		tpls := probe.Templates(f)
		if len(tpls) < 3 {
			t.Errorf("frame %s: %d templates", f, len(tpls))
		}
		for _, tpl := range tpls {
			if !strings.Contains(tpl, "{}") {
				t.Errorf("frame %s: %q has no place for the phrase", f, tpl)
			}
			if f != probe.FrameMention && len(resolve.Fields(nil, resolve.Normalize(strings.ReplaceAll(tpl, "{}", "")))) == 0 {
				t.Errorf("frame %s: %q adds no word to the phrase", f, tpl)
			}
		}
	}
	for in, want := range map[string]string{
		"all":                "",
		"laughter,negation":  "",
		"negation, laughter": "",
		"nope":               `unknown frame "nope"`,
		",":                  "no frame",
	} {
		fr, err := probe.ParseFrames(in)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", in, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want %q", in, err, want)
		case want == "" && in != "all" && !slices.Equal(fr, []probe.Frame{probe.FrameNegation, probe.FrameLaughter}):
			t.Errorf("%q: %v, want negation then laughter (report order)", in, fr)
		}
	}
}

// TestOtherWorldWordsAreForeign: another world's object is made only of
// words the configuration does not use.
func TestOtherWorldWordsAreForeign(t *testing.T) {
	t.Parallel()
	yaml := strings.Replace(music(`"play {item} lol"`), "{id: AL-2, display_name: Revolver}", "{id: AL-2, display_name: Board Game Music}", 1)
	rep := run(t, load(t, core.Source{YAML: []byte(yaml), Name: "board.yaml"}, nil), &probe.Options{Frames: []probe.Frame{probe.FrameOtherWorld}})
	if rep.Utterances == 0 {
		t.Fatal("no other-world utterances")
	}
	for _, h := range rep.Hijacks {
		if strings.Contains(h.Text, "board game") {
			t.Errorf("%q: board game is a word of the configuration", h.Text)
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
	bad := strings.Replace(string(yaml), `triggers: ["play [the] [album] {item}"]`, `triggers: ["play [the] [album] {item}", "i like {item}"]`, 1)
	// and a careless launcher trigger: a picker on a statement is a hijack too
	bad = strings.Replace(bad, `triggers: ["browse [the] albums"]`, `triggers: ["browse [the] albums", "(dont|do not) browse [the] albums"]`, 1)
	c := load(t, core.Source{YAML: []byte(bad), Name: "bad.yaml"}, nil)
	rep := run(t, c, nil)
	found, picker := false, false
	for _, h := range rep.Hijacks {
		if h.Text == "i like Abbey Road" && h.Decision.CommandID == "play_album" && h.Kind == probe.Invokes && h.Frame == probe.FrameMention {
			found = true
		}
		if h.Kind == probe.Picker && h.Decision.CommandID == "play_album" && h.Frame == probe.FrameNegation && strings.Contains(h.Text, "albums") {
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
	rep := run(t, c, &probe.Options{Frames: []probe.Frame{probe.FrameMention}})
	if rep.Utterances == 0 {
		t.Fatal("no mentions")
	}
	for _, h := range rep.Sorted() {
		t.Errorf("%q in mode %s acts: %s(%s)", h.Text, h.Mode, h.Decision.CommandID, h.Decision.ResolvedID)
	}
}

// desk serves a per-person ticket catalog over HTTP, as the help desk's
// service does: a lead sees every ticket, anyone else their own; it
// records who asked.
func desk(t *testing.T) (url string, asked func() []string) {
	var mu sync.Mutex
	var who []string
	tickets := map[string][]string{"dana": {"T-1", "Printer on fire"}, "fox": {"T-2", "VPN drops hourly"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ctx struct {
			Principal struct {
				UserID string   `json:"user_id"`
				Roles  []string `json:"roles"`
			} `json:"principal"`
		}
		json.Unmarshal([]byte(r.Header.Get(resolve.ContextHeader)), &ctx)
		mu.Lock()
		who = append(who, ctx.Principal.UserID)
		mu.Unlock()
		items := []map[string]string{}
		for user, tk := range tickets {
			if user == ctx.Principal.UserID || slices.Contains(ctx.Principal.Roles, "lead") {
				items = append(items, map[string]string{"id": tk[0], "display_name": tk[1]})
			}
		}
		json.NewEncoder(w).Encode(items)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(who) }
}

func deskConfig(url string) string {
	return `version: 1
modes:
  - {key: desk, display_name: Desk, default: true, toolboxes: [tickets, leads]}
toolboxes:
  - {id: tickets, catalogs: [tickets], commands: [open_ticket]}
  - {id: leads, catalogs: [tickets], commands: [close_ticket], required_roles: [lead]}
catalogs:
  - id: tickets
    display_name: My tickets
    entity_type: ticket
    provider: {http: {url: "` + url + `"}}
commands:
  - id: open_ticket
    tool: agent_set_active_entity
    parameter: ticket
    resolver: {catalog: tickets}
    sets_active_context: true
    active_entity_type: ticket
    triggers: ["open {item}", "open {item} lol"]
  - id: close_ticket
    tool: agent_clear_active_entity
    parameter: ticket
    resolver: {catalog: tickets}
    clears_active_context: true
    triggers: ["close {item}", "close {item} lol"]
`
}

// TestPrincipalAndRoles: a per-person provider is asked for items as the
// principal with the roles, so the probe tries that person's items; a
// command of a toolbox the roles do not open cannot act, and the report
// says so; a catalog that gives the principal nothing is named.
func TestPrincipalAndRoles(t *testing.T) {
	t.Parallel()
	url, asked := desk(t)
	c := load(t, core.Source{YAML: []byte(deskConfig(url)), Name: "desk.yaml"}, nil)
	laughs := []probe.Frame{probe.FrameLaughter}
	acts := func(rep probe.Report) map[string]bool {
		m := map[string]bool{}
		for _, h := range rep.Hijacks {
			m[h.Decision.CommandID+"("+h.Decision.ResolvedID+")"] = true
		}
		return m
	}
	gaps := func(rep probe.Report) string {
		var s []string
		for _, g := range rep.Gaps {
			s = append(s, g.Subject+": "+g.Reason)
		}
		return strings.Join(s, "\n")
	}

	dana := run(t, c, &probe.Options{Principal: "dana", Roles: []string{"agent"}, Frames: laughs})
	if got := acts(dana); !got["open_ticket(T-1)"] || got["open_ticket(T-2)"] || got["close_ticket(T-1)"] {
		t.Errorf("dana (agent): acts %v, want open_ticket(T-1) only", got)
	}
	if g := gaps(dana); !strings.Contains(g, "command close_ticket: active in no mode for roles [agent]") {
		t.Errorf("dana's gaps do not name close_ticket:\n%s", g)
	}
	if !slices.Contains(asked(), "dana") {
		t.Errorf("the provider was asked as %v, never as dana", asked())
	}

	walter := run(t, c, &probe.Options{Principal: "walter", Roles: []string{"lead"}, Frames: laughs})
	if got := acts(walter); !got["open_ticket(T-1)"] || !got["open_ticket(T-2)"] || !got["close_ticket(T-2)"] {
		t.Errorf("walter (lead): acts %v, want both tickets opened and closed", got)
	}
	if len(walter.Gaps) != 0 {
		t.Errorf("walter: gaps\n%s", gaps(walter))
	}
	if walter.Principal != "walter" || !slices.Equal(walter.Roles, []string{"lead"}) {
		t.Errorf("report as %s %v", walter.Principal, walter.Roles)
	}

	nobody := run(t, c, &probe.Options{Principal: "kim", Frames: laughs})
	if len(nobody.Hijacks) != 0 {
		t.Errorf("kim has no tickets, yet %d acts", len(nobody.Hijacks))
	}
	if g := gaps(nobody); !strings.Contains(g, "catalog:tickets: no items for kim") || !strings.Contains(g, "open_ticket, close_ticket were not probed") {
		t.Errorf("kim's gaps do not name the empty catalog:\n%s", g)
	}
}

// TestProviderDown: a provider that cannot be reached is named with its
// error, and the commands whose phrases it left out.
func TestProviderDown(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	rep := run(t, load(t, core.Source{YAML: []byte(deskConfig(srv.URL)), Name: "desk.yaml"}, nil), &probe.Options{Roles: []string{"lead"}})
	if len(rep.Gaps) != 1 || rep.Gaps[0].Subject != "catalog:tickets" || !strings.Contains(rep.Gaps[0].Reason, "503") ||
		!strings.Contains(rep.Gaps[0].Reason, "open_ticket, close_ticket") {
		t.Fatalf("gaps %+v", rep.Gaps)
	}
}
