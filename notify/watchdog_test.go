package notify_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
)

type busEnv struct {
	core *core.Core
	bus  *notify.Bus
	hub  *events.Hub
	clk  *clock
	sess string
}

// newBus is a bus with an agent (a model with nothing to say: these
// notifications reach its prompts, and start no internal turn).
func newBus(t *testing.T) *busEnv { return newBusWith(t, true) }

func newBusWith(t *testing.T, agent bool) *busEnv {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), &sqlite.Options{Extensions: []store.Extension{notify.Extension}})
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	c := demotest.Core(t, &core.Options{Store: st, Now: clk.now})
	l, _ := notify.NewLedger(st, &notify.Options{Now: clk.now})
	s, err := c.Start(context.Background(), core.Start{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	var a *llm.Agent
	if agent {
		a = llm.New(c, &llm.Script{}, config.LLM{}, &llm.Options{Awareness: l.Awareness, Acknowledged: l.AgentAck})
	}
	hub := events.NewHub(st.Records, nil)
	return &busEnv{core: c, bus: notify.NewBus(l, c, hub, &notify.BusOptions{Agent: a}), hub: hub, clk: clk, sess: s.ID}
}

// agentNote is for the agent's context, handled by the system (no
// internal turn).
func agentNote(address notify.Address, session string, ttl int) notify.Notification {
	return notify.Notification{Address: address, UserID: "alice", SessionID: session, Target: notify.TargetAgent, Handler: notify.HandlerSystem,
		Title: "build failed", TTLSeconds: ttl}
}

// What the agent did not deliver within its TTL, or whose lock ran out,
// goes to the user by its address; an escalation never acknowledged ends
// a dead letter.
func TestWatchdog(t *testing.T) {
	ctx := context.Background()
	e := newBus(t)
	w := &notify.Watchdog{Bus: e.bus, RetryAfter: time.Minute, MaxShows: 3}
	l := e.bus.Ledger()
	byTTL, _ := e.bus.Emit(ctx, agentNote(notify.AddressUser, "", 10), 0)
	byLease, _ := e.bus.Emit(ctx, agentNote(notify.AddressSession, e.sess, 600), 0)
	l.Dispatch(ctx, byLease.ID)
	l.Claim(ctx, byLease.ID, 0, 30*time.Second) // the agent holds it
	if s, err := w.Sweep(ctx); err != nil || s != (notify.Swept{}) {
		t.Fatalf("nothing is due yet: %+v %v", s, err)
	}
	e.clk.add(31 * time.Second)
	if s, err := w.Sweep(ctx); err != nil || s.Escalated != 2 {
		t.Fatalf("%+v %v", s, err)
	}
	a, _ := l.Get(ctx, byTTL.ID)
	b, _ := l.Get(ctx, byLease.ID)
	if a.State != notify.StateEscalated || a.Channel != notify.ChannelInbox || a.Target != notify.TargetUser ||
		b.State != notify.StateEscalated || b.Channel != notify.ChannelFloor || b.OwnerLease != 2 {
		t.Fatalf("%+v\n%+v", a, b)
	}
	// the floor's escalation is a notice in the session's chain
	recs, _ := e.core.Records(ctx, e.sess, 0)
	if last := recs[len(recs)-1]; last.Kind != audit.KindNotice || last.Notice.ID != b.ID {
		t.Fatalf("%+v", last)
	}
	// the user acks one; the other is never acked: a dead letter
	if n, err := l.Ack(ctx, a.ID, "alice"); err != nil || n.State != notify.StateDelivered {
		t.Fatalf("%+v %v", n, err)
	}
	// shown again each minute, three times, then a dead letter
	for i := 1; i <= 3; i++ {
		e.clk.add(61 * time.Second)
		if s, err := w.Sweep(ctx); err != nil || s.Reshown != 1 || s.Failed != 0 {
			t.Fatalf("minute %d: %+v %v", i, s, err)
		}
	}
	if n, _ := l.Get(ctx, b.ID); n.Shows != 3 || n.State != notify.StateEscalated {
		t.Fatalf("%+v", n)
	}
	recs, _ = e.core.Records(ctx, e.sess, 0)
	notices := 0
	for _, r := range recs {
		if r.Notice != nil && r.Notice.ID == b.ID {
			notices++
		}
	}
	if notices != 4 { // escalated once, shown again three times
		t.Fatalf("%d notices", notices)
	}
	e.clk.add(61 * time.Second)
	if s, err := w.Sweep(ctx); err != nil || s.Failed != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	dead, _ := l.Dead(ctx, 10)
	if len(dead) != 1 || dead[0].ID != b.ID {
		t.Fatalf("%+v", dead)
	}
}

// Several watchdogs at once escalate each notification once.
func TestWatchdogsRace(t *testing.T) {
	ctx := context.Background()
	e := newBus(t)
	const n = 60
	for range n {
		e.bus.Emit(ctx, agentNote(notify.AddressUser, "", 1), 0)
	}
	e.clk.add(2 * time.Second)
	var mu sync.Mutex
	var total notify.Swept
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := (&notify.Watchdog{Bus: e.bus}).Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total.Escalated += s.Escalated
			total.Lost += s.Lost
			mu.Unlock()
		})
	}
	wg.Wait()
	if total.Escalated != n {
		t.Fatalf("%d escalations of %d notifications (%d lost races)", total.Escalated, n, total.Lost)
	}
	list, _ := e.bus.Ledger().List(ctx, notify.Query{UserID: "alice", Limit: 500})
	for _, m := range list {
		if m.State != notify.StateEscalated || m.OwnerLease != 1 {
			t.Fatalf("%+v", m)
		}
	}
}

// With no agent to hand it to, an agent-channel notification goes to the
// user at once.
func TestAgentDown(t *testing.T) {
	ctx := context.Background()
	e := newBusWith(t, false)
	got, err := e.bus.Emit(ctx, agentNote(notify.AddressUser, "", 0), 0)
	if err != nil || got.State != notify.StateEscalated || got.Channel != notify.ChannelInbox {
		t.Fatalf("%+v %v", got, err)
	}
}

// The agent runtime holds what it puts in a prompt; the model's ack
// delivers it — unless the watchdog took it over first: the late ack,
// with the old lease, changes nothing.
func TestAgentAckIsFenced(t *testing.T) {
	ctx := context.Background()
	e := newBus(t)
	l := e.bus.Ledger()
	sess, _ := e.core.Session(ctx, e.sess)
	first, _ := e.bus.Emit(ctx, agentNote(notify.AddressUser, "", 60), 0)
	second, _ := e.bus.Emit(ctx, agentNote(notify.AddressUser, "", 60), 0)
	if lines := e.bus.Ledger().Awareness(ctx, sess); len(lines) < 3 || !strings.Contains(strings.Join(lines, "\n"), "[NOTIFICATION "+first.ID+"]") {
		t.Fatalf("%q", lines)
	}
	e.bus.Ledger().AgentAck(ctx, "alice", []string{first.ID})
	if n, _ := l.Get(ctx, first.ID); n.State != notify.StateDelivered {
		t.Fatalf("%+v", n)
	}
	e.clk.add(61 * time.Second)
	if s, _ := (&notify.Watchdog{Bus: e.bus}).Sweep(ctx); s.Escalated != 1 {
		t.Fatalf("%+v", s)
	}
	e.bus.Ledger().AgentAck(ctx, "alice", []string{second.ID}) // too late
	if n, _ := l.Get(ctx, second.ID); n.State != notify.StateEscalated || n.OwnerLease != 2 {
		t.Fatalf("a late ack moved the watchdog's notification: %+v", n)
	}
}

// When the LLM fails, what the runtime holds for the user goes to the
// user at once.
func TestAgentFailed(t *testing.T) {
	ctx := context.Background()
	e := newBus(t)
	sess, _ := e.core.Session(ctx, e.sess)
	n, _ := e.bus.Emit(ctx, agentNote(notify.AddressUser, "", 600), 0)
	e.bus.Ledger().Awareness(ctx, sess) // into a prompt: held
	if got, _ := e.bus.Ledger().Get(ctx, n.ID); got.State != notify.StateLocked {
		t.Fatalf("%+v", got)
	}
	e.bus.AgentFailed(ctx, sess)
	if got, _ := e.bus.Ledger().Get(ctx, n.ID); got.State != notify.StateEscalated || got.Channel != notify.ChannelInbox {
		t.Fatalf("%+v", got)
	}
}
