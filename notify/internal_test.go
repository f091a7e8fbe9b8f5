package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
)

// An internal turn: the agent handles an AGENT/AGENT notification on its
// own — a read tool runs; the send it then tries changes the world, so it
// does not run: the notification is promoted to the user with the
// question, the session holds the confirmation, and the human's yes sends
// once. The internal exchanges stay out of the conversation's history,
// and the session replays exactly.
func TestInternalTurn(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "i.db"), &sqlite.Options{Extensions: []store.Extension{notify.Extension}})
	if err != nil {
		t.Fatal(err)
	}
	out := demo.NewOutbox(nil)
	c := demotest.Core(t, &core.Options{Store: st, Programs: out.Programs()})
	l, _ := notify.NewLedger(st, nil)
	srv := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "catalog_search", Arguments: `{"catalog_id":"mailer_lists","query":"pilot"}`}}},
		llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "send_template", Arguments: `{"list_id":"LIST-9"}`}}},
	)
	s := llm.Settings{LLM: config.LLM{BaseURL: srv.URL, Model: "test-model", Timeout: 5 * time.Second, MaxToolRounds: 4, MaxHistoryTurns: 10}}
	agent := llm.New(c, llm.NewOpenAI(s, nil), s.LLM, &llm.Options{Awareness: l.Awareness, Acknowledged: l.AgentAck})
	bus := notify.NewBus(l, c, events.NewHub(st.Records, nil), &notify.BusOptions{Agent: agent})
	sess, _ := c.Start(ctx, core.Start{Mode: "sales", Principal: "alice"})
	c.Turn(ctx, core.TurnRequest{SessionID: sess.ID, Principal: "alice", Input: agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"}})

	e, err := bus.Emit(ctx, notify.Notification{Address: notify.AddressSession, UserID: "alice", SessionID: sess.ID, Target: notify.TargetAgent,
		Handler: notify.HandlerAgent, Title: "Pilot list refreshed", Directive: "resend the active template to it if one is open"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// the emit started the internal turn; it ends with the notification
	// promoted, and then its notice in the session
	var n notify.Notification
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		recs, _ := c.Records(ctx, sess.ID, 0)
		if n, _ = l.Get(ctx, e.ID); n.State == notify.StateEscalated && recs[len(recs)-1].Kind == audit.KindNotice {
			break
		}
	}
	if n.State != notify.StateEscalated || n.Channel != notify.ChannelFloor || n.Target != notify.TargetUser {
		t.Fatalf("not promoted: %+v", n)
	}
	now, _ := c.Session(ctx, sess.ID)
	if pc := now.PendingConfirmation; pc == nil || pc.Tool != "send_template" || len(out.Sends()) != 0 {
		t.Fatalf("pending %+v, %d sends", now.PendingConfirmation, len(out.Sends()))
	}
	recs, _ := c.Records(ctx, sess.ID, 0)
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Kind)
		if r.Kind == audit.KindLLM && !r.LLM.Internal {
			t.Fatal("an internal exchange not marked internal")
		}
		if r.Kind == audit.KindExecution && r.Intent.Origin != "agent_internal" {
			t.Fatalf("an internal call with origin %s", r.Intent.Origin)
		}
	}
	if got := strings.Join(kinds, " "); got != "open turn llm execution llm execution proposal notice" {
		t.Fatalf("records: %s", got)
	}
	if last := recs[len(recs)-1]; !strings.Contains(last.Notice.Body, "Confirm send_template") {
		t.Fatalf("the promoted notice does not ask: %+v", last.Notice)
	}
	// nothing of the internal turn is in the conversation's history; the
	// promoted notice, which the user saw, is
	if h := llm.History(recs, 10); len(h) != 3 || !strings.Contains(h[2].Content, "[notification shown to the user] Pilot list refreshed") {
		t.Fatalf("history %+v", h)
	}
	// the human's yes sends once
	yes, err := c.Turn(ctx, core.TurnRequest{SessionID: sess.ID, Principal: "alice", Input: agentplane.TurnInput{Text: "yes"}})
	if err != nil || yes.Result == nil || yes.Result.Status != agentplane.StatusSuccess || len(out.Sends()) != 1 {
		t.Fatalf("%+v %v", yes.Result, err)
	}
	// and it replays exactly
	recs, _ = c.Records(ctx, sess.ID, 0)
	var log, diff bytes.Buffer
	for _, r := range recs {
		log.Write(r.Raw)
		log.WriteByte('\n')
	}
	if n, err := replay.Run(ctx, c, &log, &diff, nil); err != nil || n != 0 {
		t.Fatalf("%d divergences, %v:\n%s", n, err, diff.String())
	}
}

// The built-in agent_notify_user, where a toolbox offers it, emits through
// the bus: the LLM (or an MCP client) notifies the session's user, through
// the gate; without a bus it says notifications are not served there.
func TestNotifyUserTool(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "t.db"), &sqlite.Options{Extensions: []store.Extension{notify.Extension}})
	if err != nil {
		t.Fatal(err)
	}
	var bus *notify.Bus
	yaml := []byte(strings.Replace(string(demo.YAML), "tools: [agent_list_modes, agent_get_context, agent_set_mode]",
		"tools: [agent_list_modes, agent_get_context, agent_set_mode, agent_notify_user]", 1))
	c := demotest.WithYAML(t, yaml, &core.Options{Store: st, Notifier: notify.Notifier(func() *notify.Bus { return bus })})
	l, _ := notify.NewLedger(st, nil)
	call := func(args string) agentplane.ExecutionResult {
		sess, _ := c.Start(ctx, core.Start{Principal: "alice"})
		res, err := c.Execute(ctx, gate.Invocation{SessionID: sess.ID, Tool: "agent_notify_user", Args: json.RawMessage(args), Origin: gate.OriginLLM, Principal: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call(`{"title":"Reminder"}`); res.Status != agentplane.StatusFailed || !strings.Contains(res.Message, "not here") {
		t.Fatalf("%+v", res)
	}
	bus = notify.NewBus(l, c, events.NewHub(st.Records, nil), nil)
	res := call(`{"title":"Reminder","body":"renewals are due","address":"SESSION"}`)
	if res.Status != agentplane.StatusSuccess || !strings.Contains(string(res.Output), `"channel":"B"`) {
		t.Fatalf("%+v %s", res, res.Output)
	}
	var out struct{ ID string }
	json.Unmarshal(res.Output, &out)
	n, err := l.Get(ctx, out.ID)
	if err != nil || n.UserID != "alice" || n.State != notify.StateDispatched || n.Handler != notify.HandlerSystem {
		t.Fatalf("%+v %v", n, err)
	}
	if res := call(`{"title":""}`); res.Status != agentplane.StatusRejected || res.Error.Code != agentplane.CodeInvalidArgs {
		t.Fatalf("%+v", res)
	}
}
