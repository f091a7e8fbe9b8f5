package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/conversation"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/router"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/tool"
)

// demoTools is the demo's send tool (replay only reads its spec).
func demoTools(t testing.TB) *tool.Registry {
	r := tool.NewRegistry()
	if err := r.Register(demo.NewOutbox(nil).Tool()); err != nil {
		t.Fatal(err)
	}
	return r
}

func registry(t testing.TB, yaml []byte) *router.Registry {
	t.Helper()
	cfg, err := config.Parse(yaml, "demo.yaml", &config.Options{Tools: append(append([]string(nil), demo.ToolNames...), tool.BuiltinNames...)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := router.NewRegistry(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

var utterances = []string{
	"switch to sales mode", "switch to ddr mode", "/mode general", "open the q1 cfo outreach template",
	"open the outreach template", "I want to work on email templates", "send it to the q1 pilot list",
	"yes", "no", "1", "2", "hello", "close the q1 cfo outreach template", "open the acp ddr", "/send",
}

// record plays turns (and direct LLM invocations) against the demo with a
// working send tool, exporting the audit log to path.
func record(t testing.TB, path string, steps []string, ui bool) {
	t.Helper()
	reg := registry(t, demo.YAML)
	sink, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	clock := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(7 * time.Second); return clock }
	n := 0
	id := func() string { n++; return fmt.Sprintf("id-%d", n) }
	store := memstore.New()
	sends := 0
	tools := tool.NewRegistry()
	tools.Register(&tool.Func{S: demo.NewOutbox(nil).Tool().Spec(), Fn: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		sends++
		return json.RawMessage(fmt.Sprintf(`{"message_id":%d}`, sends)), nil
	}})
	g, _ := gate.New(reg, store, &gate.Options{Now: now, NewToken: id, Sink: sink, Tools: tools})
	e := conversation.New(reg, g, store, &conversation.Options{Now: now, NewID: id})
	ctx := context.Background()
	s, err := e.Start(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range steps {
		if strings.HasPrefix(text, "llm:") {
			g.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginLLM, RequestID: id()})
			continue
		}
		if _, err := e.Turn(ctx, s.ID, agentplane.TurnInput{Text: text, UI: ui}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplayReproducesGeneratedSessions is a property: any session replays
// against the configuration that recorded it without a single divergence.
func TestReplayReproducesGeneratedSessions(t *testing.T) {
	t.Parallel()
	reg := registry(t, demo.YAML)
	dir := t.TempDir()
	i := 0
	rapid.Check(t, func(rt *rapid.T) {
		i++
		path := filepath.Join(dir, fmt.Sprintf("s%d.jsonl", i))
		steps := rapid.SliceOfN(rapid.SampledFrom(append(utterances, "llm:send")), 1, 15).Draw(rt, "steps")
		record(t, path, steps, rapid.Bool().Draw(rt, "ui"))
		f, _ := os.Open(path)
		defer f.Close()
		var out bytes.Buffer
		n, err := replay.Run(context.Background(), reg, demoTools(t), f, &out)
		if err != nil || n != 0 {
			rt.Fatalf("replay: %d divergences, %v\n%s", n, err, out.String())
		}
	})
}

func TestReplayShowsWhatAConfigChangeChanges(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	record(t, path, []string{"switch to sales mode", "open the q1 cfo outreach template", "send it to the q1 pilot list", "yes", "hello"}, false)
	changed := bytes.Replace(demo.YAML, []byte(`"send (this|it|the template) to [the] {item} [list]"`), []byte(`"mail (this|it) to [the] {item} [list]"`), 1)
	f, _ := os.Open(path)
	defer f.Close()
	var out bytes.Buffer
	n, err := replay.Run(context.Background(), registry(t, changed), demoTools(t), f, &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if n == 0 || !strings.Contains(got, "record 4 (turn): decision differs") || !strings.Contains(got, `"action":"ask_clarifying_question"`) {
		t.Fatalf("%d divergences:\n%s", n, got)
	}
}

func TestReplayRefusesABrokenLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	record(t, path, []string{"switch to ddr mode"}, false)
	data, _ := os.ReadFile(path)
	tampered := bytes.Replace(data, []byte(`"resolved_id":"ddr"`), []byte(`"resolved_id":"sales"`), 1)
	_, err := replay.Run(context.Background(), registry(t, demo.YAML), demoTools(t), bytes.NewReader(tampered), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "hash mismatch") {
		t.Fatalf("err = %v", err)
	}
}

// TestReplayRunsExecutionsAsTheirPrincipal records an LLM execution of a
// command that only an admin may run and replays it: the record carries the
// roles, so the replay runs it as an admin too and nothing diverges.
func TestReplayRunsExecutionsAsTheirPrincipal(t *testing.T) {
	t.Parallel()
	gated := bytes.Replace(demo.YAML, []byte("  - id: core\n"), []byte("  - id: core\n    required_roles: [admin]\n"), 1)
	if bytes.Equal(gated, demo.YAML) {
		t.Fatal("the demo's core toolbox was not found")
	}
	reg := registry(t, gated)
	path := filepath.Join(t.TempDir(), "log.jsonl")
	sink, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	store := memstore.New()
	g, _ := gate.New(reg, store, &gate.Options{Now: now, Sink: sink})
	ctx := context.Background()
	s, err := g.Open(ctx, "s1", "")
	if err != nil {
		t.Fatal(err)
	}
	for i, roles := range [][]string{{"admin"}, nil} {
		res, err := g.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "set_mode", ResolvedID: "ddr", Origin: gate.OriginLLM,
			Roles: roles, RequestID: fmt.Sprint("r", i)})
		want := agentplane.StatusSuccess
		if roles == nil {
			want = agentplane.StatusRejected
		}
		if err != nil || res.Status != want {
			t.Fatalf("roles %v: %+v, %v", roles, res, err)
		}
	}
	sink.Close()
	f, _ := os.Open(path)
	defer f.Close()
	var out bytes.Buffer
	n, err := replay.Run(ctx, reg, demoTools(t), f, &out)
	if err != nil || n != 0 {
		t.Fatalf("replay: %d divergences, %v\n%s", n, err, out.String())
	}
}
