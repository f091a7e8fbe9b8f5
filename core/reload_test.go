package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
)

// changed is the demo configuration with the sales mode's key renamed:
// the mode "sales" is gone.
var changed = bytes.Replace(demo.YAML, []byte("  - key: sales\n"), []byte("  - key: selling\n"), 1)

func parse(t testing.TB, yaml []byte) *config.Config {
	t.Helper()
	cfg, err := core.Load(core.Source{YAML: yaml, Name: "changed.yaml"}, &core.Options{Programs: demo.Programs(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestReloadTurnInFlight: a turn whose tool is running when the
// configuration is reloaded finishes on the configuration it started on
// (its record names it), and the next turn runs on the new one; the
// reload does not wait for the turn.
func TestReloadTurnInFlight(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	c := demotest.Core(t, &core.Options{Programs: demo.SendWith(func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		close(started)
		<-release
		return json.RawMessage(`{"message_id":1}`), nil
	})})
	ctx := context.Background()
	a := c.Digest()
	s := startSession(t, c, "sales")
	turn(t, c, s.ID, agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"})
	turn(t, c, s.ID, agentplane.TurnInput{Text: "send this to the Q1 pilot list"})
	done := make(chan core.Turn)
	go func() {
		tr, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: "yes"}})
		if err != nil {
			t.Error(err)
		}
		done <- tr
	}()
	<-started
	b, err := c.Reload(ctx, parse(t, changed))
	if err != nil {
		t.Fatal(err)
	}
	if b == a || c.Digest() != b || c.ModeOK("sales") || !c.ModeOK("selling") {
		t.Fatalf("after the reload: digest %s (was %s), sales %v", c.Digest(), a, c.ModeOK("sales"))
	}
	close(release)
	tr := <-done
	if tr.Result == nil || tr.Result.Status != agentplane.StatusSuccess || tr.Session.Mode != "sales" {
		t.Fatalf("the turn in flight: %+v %+v", tr.Result, tr.Session)
	}
	recs, err := c.Records(ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1]; last.Seq != tr.Seq || last.Config != a {
		t.Fatalf("the turn in flight recorded on %s, not %s (the configuration it started on)", last.Config, a)
	}
	// the next turn: the session's mode is gone, so it is fitted first
	// as on resume, and the person is told
	next := turn(t, c, s.ID, agentplane.TurnInput{Text: "hello"})
	if next.Session.Mode != "general" {
		t.Fatalf("a session in a mode that is gone: %+v", next.Session)
	}
	recs, _ = c.Records(ctx, s.ID, tr.Seq)
	if len(recs) != 2 || recs[0].Kind != "resume" || !strings.Contains(strings.Join(recs[0].Notes, " "), `mode "sales" is no longer configured`) || recs[0].Config != b || recs[1].Config != b {
		t.Fatalf("after the reload: %+v", recs)
	}
}

// TestReloadFailureChangesNothing: a configuration whose secret header is
// not in the environment is refused with the reason, and the one in force
// stays, answering turns.
func TestReloadFailureChangesNothing(t *testing.T) {
	c := demotest.Core(t, &core.Options{Getenv: func(string) string { return "" }})
	before := c.Digest()
	withSecret := bytes.Replace(demo.YAML, []byte("    program: demo_outbox\n"), []byte("    http:\n      url: http://127.0.0.1:1/send\n      headers_env: {Authorization: SEND_TOKEN}\n"), 1)
	_, err := c.Reload(context.Background(), parse(t, withSecret))
	if err == nil || !strings.Contains(err.Error(), "SEND_TOKEN is not set") {
		t.Fatalf("reload without the secret: %v", err)
	}
	if c.Digest() != before {
		t.Fatal("a refused reload changed the configuration")
	}
	s := startSession(t, c, "sales")
	if tr := turn(t, c, s.ID, agentplane.TurnInput{Text: "switch to ddr mode"}); tr.Session.Mode != "ddr" {
		t.Fatalf("after a refused reload: %+v", tr.Session)
	}
}
