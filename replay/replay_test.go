package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/tool"
)

var utterances = []string{
	"switch to sales mode", "switch to ddr mode", "/mode general", "open the q1 cfo outreach template",
	"open the outreach template", "I want to work on email templates", "send it to the q1 pilot list",
	"yes", "no", "1", "2", "hello", "close the q1 cfo outreach template", "open the acp ddr", "/send",
}

// sendOutcomes is how the recording's send tool answers, call by call:
// success, a failure, a hang past the timeout, not connected.
func sendTool(calls *atomic.Int32) map[string]tool.Program {
	return demo.SendWith(func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		n := calls.Add(1)
		switch n % 4 {
		case 1:
			return json.RawMessage(fmt.Sprintf(`{"message_id":%d}`, n)), nil
		case 2:
			return nil, tool.Errorf("http_status", "POST http://mail.example/send: status 502: bad gateway")
		case 3:
			<-ctx.Done()
			return nil, ctx.Err()
		default:
			return nil, fmt.Errorf("%w: the mail system is down", tool.ErrUnavailable)
		}
	})
}

// recorder runs a recording: the demo runtime with a send tool that
// succeeds, fails, times out and is down in turn.
func recorder(t testing.TB) *core.Core {
	var calls atomic.Int32
	clock := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	return demotest.Core(t, &core.Options{Programs: sendTool(&calls), ToolTimeout: 20 * time.Millisecond,
		Now: func() time.Time { clock = clock.Add(7 * time.Second); return clock }})
}

// export writes a session's chain as stored to path.
func export(t testing.TB, c *core.Core, session, path string) {
	t.Helper()
	f, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Export(context.Background(), session, func(ctx context.Context, after int64) ([]audit.Record, error) {
		return c.Records(ctx, session, after)
	}); err != nil {
		t.Fatal(err)
	}
}

// record plays turns and direct invocations (an LLM's send, an API
// client's send and its confirmation with the token) against the demo and
// exports the audit log to path.
func record(t testing.TB, path string, steps []string, ui bool) {
	t.Helper()
	c := recorder(t)
	ctx := context.Background()
	s, err := c.Start(ctx, core.Start{Principal: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, text := range steps {
		n++
		switch text {
		case "llm:send":
			c.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "send_template_to_list", ResolvedID: "LIST-9", Origin: gate.OriginLLM,
				Principal: "ann", RequestID: fmt.Sprint("r", n)})
			continue
		case "api:send":
			in := agentplane.Intent{Type: agentplane.IntentActionCall, Action: "send_template_to_list", Args: json.RawMessage(`{"list_id":"LIST-9"}`),
				RequestID: fmt.Sprint("r", n)}
			res, _ := c.Intent(ctx, gate.IntentRequest{SessionID: s.ID, Principal: "ann", Intent: in})
			if res.ConfirmationToken != "" {
				in.ConfirmationToken, in.RequestID = res.ConfirmationToken, fmt.Sprint("r", n, "c")
				c.Intent(ctx, gate.IntentRequest{SessionID: s.ID, Principal: "ann", Intent: in})
			}
			continue
		}
		if _, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: text, UI: ui}}); err != nil {
			t.Fatal(err)
		}
	}
	export(t, c, s.ID, path)
}

func replayFile(t testing.TB, c *core.Core, path string) (int, string, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	n, err := replay.Run(context.Background(), c, f, &out, nil)
	return n, out.String(), err
}

// TestReplayReproducesGeneratedSessions is a property: any session — with
// tools that fail, time out and are down, and confirmations by token —
// replays against the configuration that recorded it without a single
// divergence.
func TestReplayReproducesGeneratedSessions(t *testing.T) {
	t.Parallel()
	c := demotest.Core(t, nil)
	dir := t.TempDir()
	i := 0
	rapid.Check(t, func(rt *rapid.T) {
		i++
		path := filepath.Join(dir, fmt.Sprintf("s%d.jsonl", i))
		steps := rapid.SliceOfN(rapid.SampledFrom(append(utterances, "llm:send", "api:send", "api:send")), 1, 15).Draw(rt, "steps")
		record(t, path, steps, rapid.Bool().Draw(rt, "ui"))
		if n, out, err := replayFile(t, c, path); err != nil || n != 0 {
			rt.Fatalf("replay: %d divergences, %v\n%s", n, err, out)
		}
	})
}

// TestReplayOfFailedTools: every kind of tool failure replays as recorded,
// message and all (a failure once came back prefixed twice).
func TestReplayOfFailedTools(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	var steps []string
	for i := 0; i < 4; i++ { // success, 502, timeout, down
		steps = append(steps, "api:send")
	}
	record(t, path, append([]string{"switch to sales mode", "open the q1 cfo outreach template"}, steps...), false)
	data, _ := os.ReadFile(path)
	for _, want := range []string{`"code":"tool_failed"`, `"code":"timeout"`, `"code":"tool_unavailable"`, `"status":"success"`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Fatalf("the recording has no %s result", want)
		}
	}
	if n, out, err := replayFile(t, demotest.Core(t, nil), path); err != nil || n != 0 {
		t.Fatalf("replay: %d divergences, %v\n%s", n, err, out)
	}
}

// TestReplayOfConcurrentWriters: two writers on one session, as two chat
// processes; the one that decided on a state the other had moved on from
// gets version_conflict, and replay reproduces that and everything after.
func TestReplayOfConcurrentWriters(t *testing.T) {
	t.Parallel()
	c := recorder(t)
	ctx := context.Background()
	s, _ := c.Start(ctx, core.Start{Principal: "ann"})
	stale, _ := c.Session(ctx, s.ID)
	turnOn := func(text string) {
		if _, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: agentplane.TurnInput{Text: text}}); err != nil {
			t.Fatal(err)
		}
	}
	turnOn("switch to ddr mode") // the first process
	// the second process decides on the state it read before
	res, err := c.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "set_mode", ResolvedID: "sales", Origin: gate.OriginUser,
		Principal: "bob", RequestID: "b1", Base: stale})
	if err != nil || res.Error == nil || res.Error.Code != agentplane.CodeVersionConflict {
		t.Fatalf("the stale writer: %+v %v", res, err)
	}
	turnOn("open the acp ddr")
	turnOn("switch to sales mode")
	path := filepath.Join(t.TempDir(), "log.jsonl")
	export(t, c, s.ID, path)
	if n, out, err := replayFile(t, demotest.Core(t, nil), path); err != nil || n != 0 {
		t.Fatalf("replay: %d divergences, %v\n%s", n, err, out)
	}
}

func TestReplayShowsWhatAConfigChangeChanges(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	record(t, path, []string{"switch to sales mode", "open the q1 cfo outreach template", "send it to the q1 pilot list", "yes", "hello"}, false)
	changed := bytes.Replace(demo.YAML, []byte(`"send (this|it|the template) to [the] {item} [list]"`), []byte(`"mail (this|it) to [the] {item} [list]"`), 1)
	n, got, err := replayFile(t, demotest.WithYAML(t, changed, nil), path)
	if err != nil {
		t.Fatal(err)
	}
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
	_, err := replay.Run(context.Background(), demotest.Core(t, nil), bytes.NewReader(tampered), &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "hash mismatch") {
		t.Fatalf("err = %v", err)
	}
	_, err = replay.Run(context.Background(), demotest.Core(t, nil), bytes.NewReader(nil), &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "no records") {
		t.Fatalf("an empty log: %v", err)
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
	c := demotest.WithYAML(t, gated, nil)
	ctx := context.Background()
	s, err := c.Start(ctx, core.Start{})
	if err != nil {
		t.Fatal(err)
	}
	for i, roles := range [][]string{{"admin"}, nil} {
		res, err := c.Execute(ctx, gate.Invocation{SessionID: s.ID, CommandID: "set_mode", ResolvedID: "ddr", Origin: gate.OriginLLM,
			Roles: roles, RequestID: fmt.Sprint("r", i)})
		want := agentplane.StatusSuccess
		if roles == nil {
			want = agentplane.StatusRejected
		}
		if err != nil || res.Status != want {
			t.Fatalf("roles %v: %+v, %v", roles, res, err)
		}
	}
	path := filepath.Join(t.TempDir(), "log.jsonl")
	export(t, c, s.ID, path)
	if n, out, err := replayFile(t, demotest.WithYAML(t, gated, nil), path); err != nil || n != 0 {
		t.Fatalf("replay: %d divergences, %v\n%s", n, err, out)
	}
}

// TestTokensNeverLogged: no confirmation token, issued in a turn or to an
// API client, appears in the log; only digests do.
func TestTokensNeverLogged(t *testing.T) {
	t.Parallel()
	c := recorder(t)
	ctx := context.Background()
	s, _ := c.Start(ctx, core.Start{Mode: "sales"})
	var tokens []string
	for _, text := range []string{"open the q1 cfo outreach template", "send it to the q1 pilot list"} {
		tr, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Input: agentplane.TurnInput{Text: text}})
		if err != nil {
			t.Fatal(err)
		}
		if tr.ConfirmationToken != "" {
			tokens = append(tokens, tr.ConfirmationToken)
		}
	}
	res, _ := c.Intent(ctx, gate.IntentRequest{SessionID: s.ID, Intent: agentplane.Intent{Type: agentplane.IntentActionCall,
		Action: "send_template_to_list", Args: json.RawMessage(`{"list_id":"LIST-9"}`), Origin: "api"}})
	tokens = append(tokens, res.ConfirmationToken)
	res, _ = c.Intent(ctx, gate.IntentRequest{SessionID: s.ID, Intent: agentplane.Intent{Type: agentplane.IntentActionCall,
		Action: "send_template_to_list", Args: json.RawMessage(`{"list_id":"LIST-9"}`), Origin: "api", ConfirmationToken: res.ConfirmationToken}})
	if len(tokens) != 2 || res.Status != agentplane.StatusSuccess {
		t.Fatalf("tokens %q, confirmed send %+v", tokens, res)
	}
	recs, _ := c.Records(ctx, s.ID, 0)
	var all []byte
	for _, r := range recs {
		all = append(all, r.Raw...)
	}
	for _, tok := range tokens {
		if bytes.Contains(all, []byte(tok)) {
			t.Fatalf("token %s is in the log", tok)
		}
		if !bytes.Contains(all, []byte(gate.Digest(tok))) {
			t.Fatalf("the digest of token %s is not in the log", tok)
		}
	}
}

// TestReplayOfLauncherTargetModes records, on the media configuration,
// a launcher's selections that switch the session to its target mode —
// from a picker, a slash argument, a typed answer and an API intent — and
// replays them without a divergence.
func TestReplayOfLauncherTargetModes(t *testing.T) {
	t.Parallel()
	media := func() *core.Core {
		c, err := core.New(context.Background(), core.Source{Path: "../examples/media/agentplane.yaml"}, &core.Options{SkipMCP: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := media()
	ctx := context.Background()
	s, err := c.Start(ctx, core.Start{Principal: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	turn := func(in agentplane.TurnInput) {
		t.Helper()
		if _, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "ann", Input: in}); err != nil {
			t.Fatal(err)
		}
	}
	turn(agentplane.TurnInput{Text: "show the tickets", UI: true})
	turn(agentplane.TurnInput{Selection: &agentplane.Selection{CommandID: "open_ticket", ID: "T-12"}, UI: true})
	turn(agentplane.TurnInput{Text: "switch to the home mode"})
	turn(agentplane.TurnInput{Text: "/tickets dark mode colours"})
	turn(agentplane.TurnInput{Text: "switch to the home mode"})
	turn(agentplane.TurnInput{Text: "/tickets", UI: true})
	turn(agentplane.TurnInput{Text: "login fails on mobile", UI: true})
	turn(agentplane.TurnInput{Text: "switch to the home mode"})
	res, err := c.Intent(ctx, gate.IntentRequest{SessionID: s.ID, Principal: "ann", Intent: agentplane.Intent{
		Type: agentplane.IntentActionCall, Action: "open_ticket", Args: json.RawMessage(`{"ticket":"T-7"}`), Mode: "support", RequestID: "api-1"}})
	if err != nil || res.Status != agentplane.StatusSuccess || res.Session.Mode != "support" {
		t.Fatalf("the API's launcher selection: %+v %v", res, err)
	}
	path := filepath.Join(t.TempDir(), "log.jsonl")
	export(t, c, s.ID, path)
	data, _ := os.ReadFile(path)
	if n := bytes.Count(data, []byte(`"mode":"support"`)); n < 4 {
		t.Fatalf("%d records show the support mode:\n%s", n, data)
	}
	if n, out, err := replayFile(t, media(), path); err != nil || n != 0 {
		t.Fatalf("replay: %d divergences, %v\n%s", n, err, out)
	}
}
