package notify_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/internal/testkit/consttest"
	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/sqlite"
)

func TestRoute(t *testing.T) {
	for _, c := range []struct {
		a    notify.Address
		t    notify.Target
		h    notify.Handler
		want notify.Channel
	}{
		{"USER", "USER", "SYSTEM", "A"},
		{"SESSION", "USER", "SYSTEM", "B"},
		{"USER", "USER", "AGENT", "C"},
		{"SESSION", "USER", "AGENT", "C"},
		{"SESSION", "AGENT", "SYSTEM", "C"},
		{"USER", "AGENT", "SYSTEM", "C"},
		{"SESSION", "AGENT", "AGENT", "C"},
		{"USER", "AGENT", "AGENT", "C"},
	} {
		if got, err := notify.Route(c.a, c.t, c.h); err != nil || got != c.want {
			t.Errorf("%s %s %s: %s %v, want %s", c.a, c.t, c.h, got, err, c.want)
		}
	}
	for _, c := range []struct {
		a    notify.Address
		t    notify.Target
		h    notify.Handler
		want string
	}{
		{"GROUP", "USER", "SYSTEM", `address "GROUP"`},
		{"user", "USER", "SYSTEM", `address "user"`},
		{"USER", "BOT", "SYSTEM", `target "BOT"`},
		{"USER", "USER", "", `handler ""`},
	} {
		if _, err := notify.Route(c.a, c.t, c.h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s %s: %v, want %q", c.a, c.t, c.h, err, c.want)
		}
	}
}

// drivers returns the ledger's stores to test: SQLite, and PostgreSQL
// (skipped, and saying why, where no server is configured).
func drivers(t testing.TB) map[string]func(t testing.TB) store.Store {
	out := map[string]func(t testing.TB) store.Store{
		"sqlite": func(t testing.TB) store.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "n.db"), &sqlite.Options{Extensions: []store.Extension{notify.Extension}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	out["postgres"] = func(t testing.TB) store.Store {
		s, err := postgres.Open(context.Background(), pgtest.Schema(t), &postgres.Options{Extensions: []store.Extension{notify.Extension}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return out
}

// clock is a settable clock.
type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.t.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.t.Add(int64(d)) }
func newClock() *clock {
	c := &clock{}
	c.t.Store(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func inbox(user, title string) notify.Notification {
	return notify.Notification{Address: notify.AddressUser, UserID: user, Target: notify.TargetUser, Handler: notify.HandlerSystem, Title: title}
}

func TestLedger(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clk := newClock()
			l, err := notify.NewLedger(open(t), &notify.Options{Now: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			// emit, route, the per-address sequence
			a, err := l.Emit(ctx, inbox("alice", "one"), 0)
			if err != nil || a.Channel != notify.ChannelInbox || a.State != notify.StatePending || a.Seq != 1 || a.Deduplicated {
				t.Fatalf("%+v %v", a, err)
			}
			b, _ := l.Emit(ctx, inbox("alice", "two"), 0)
			other, _ := l.Emit(ctx, inbox("bob", "one"), 0)
			if b.Seq != 2 || other.Seq != 1 {
				t.Fatalf("sequences %d %d", b.Seq, other.Seq)
			}
			// the system channel: dispatched, then acked by its user only
			if n, err := l.Dispatch(ctx, a.ID); err != nil || n.State != notify.StateDispatched {
				t.Fatalf("%+v %v", n, err)
			}
			if _, err := l.Ack(ctx, a.ID, "bob"); !errors.Is(err, notify.ErrNotFound) {
				t.Fatalf("bob acked alice's: %v", err)
			}
			if n, err := l.Ack(ctx, a.ID, "alice"); err != nil || n.State != notify.StateDelivered || n.OwnerLease != 1 {
				t.Fatalf("%+v %v", n, err)
			}
			// terminal states never change
			for _, try := range []func() (notify.Notification, error){
				func() (notify.Notification, error) { return l.Ack(ctx, a.ID, "alice") },
				func() (notify.Notification, error) { return l.Dispatch(ctx, a.ID) },
				func() (notify.Notification, error) { return l.Claim(ctx, a.ID, 1, time.Minute) },
				func() (notify.Notification, error) { return l.Fail(ctx, a.ID, 1) },
			} {
				if _, err := try(); !errors.Is(err, notify.ErrIllegal) && !errors.Is(err, notify.ErrStale) {
					t.Fatalf("a delivered notification moved: %v", err)
				}
			}
			if n, _ := l.Get(ctx, a.ID); n.State != notify.StateDelivered {
				t.Fatalf("%+v", n)
			}
			// the agent's channel: claims fence each other; an expired lease is taken over; escalation re-routes
			agentN := notify.Notification{Address: notify.AddressSession, UserID: "alice", SessionID: "s1", Target: notify.TargetAgent,
				Handler: notify.HandlerAgent, Title: "build failed", Directive: "tell the user if it matters", TTLSeconds: 60}
			c, err := l.Emit(ctx, agentN, 0)
			if err != nil || c.Channel != notify.ChannelAgent {
				t.Fatalf("%+v %v", c, err)
			}
			l.Dispatch(ctx, c.ID)
			held, err := l.Claim(ctx, c.ID, 0, 30*time.Second)
			if err != nil || held.State != notify.StateLocked || held.OwnerLease != 1 || held.Attempts != 1 {
				t.Fatalf("%+v %v", held, err)
			}
			if _, err := l.Claim(ctx, c.ID, 1, 30*time.Second); !errors.Is(err, notify.ErrStale) {
				t.Fatalf("a claim of a live lease: %v", err)
			}
			clk.add(31 * time.Second)
			taken, err := l.Claim(ctx, c.ID, 1, 30*time.Second) // the watchdog
			if err != nil || taken.OwnerLease != 2 {
				t.Fatalf("%+v %v", taken, err)
			}
			if _, err := l.Deliver(ctx, c.ID, 1); !errors.Is(err, notify.ErrStale) {
				t.Fatalf("the first owner delivered after losing its lease: %v", err)
			}
			esc, err := l.Escalate(ctx, c.ID, 2)
			if err != nil || esc.State != notify.StateEscalated || esc.Channel != notify.ChannelFloor || esc.Target != notify.TargetUser || esc.Handler != notify.HandlerSystem {
				t.Fatalf("%+v %v", esc, err)
			}
			if n, err := l.Ack(ctx, c.ID, "alice"); err != nil || n.State != notify.StateDelivered {
				t.Fatalf("%+v %v", n, err)
			}
		})
	}
}

func TestDedup(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := ledgerOn(t, open)
			n := inbox("alice", "v1")
			n.DedupKey = "build-42"
			first, _ := l.Emit(ctx, n, 0)
			n.Title = "v2"
			second, err := l.Emit(ctx, n, 0)
			if err != nil || !second.Deduplicated || second.ID != first.ID || second.Title != "v2" {
				t.Fatalf("%+v %v", second, err)
			}
			// another user's key is theirs
			m := inbox("bob", "b")
			m.DedupKey = "build-42"
			if b, _ := l.Emit(ctx, m, 0); b.Deduplicated {
				t.Fatal("bob's emit overwrote alice's")
			}
			// locked: only the owner's lease overwrites
			l.Dispatch(ctx, first.ID)
			l.Claim(ctx, first.ID, 0, time.Minute)
			n.Title = "v3"
			if _, err := l.Emit(ctx, n, 0); !errors.Is(err, notify.ErrStale) {
				t.Fatalf("a dedup update without the lease: %v", err)
			}
			if got, err := l.Emit(ctx, n, 1); err != nil || got.Title != "v3" || got.State != notify.StateLocked {
				t.Fatalf("%+v %v", got, err)
			}
			// after a terminal state: a new notification
			l.Deliver(ctx, first.ID, 1)
			n.Title = "v4"
			fresh, err := l.Emit(ctx, n, 0)
			if err != nil || fresh.Deduplicated || fresh.ID == first.ID || fresh.State != notify.StatePending {
				t.Fatalf("%+v %v", fresh, err)
			}
		})
	}
}

func TestBadNotifications(t *testing.T) {
	l, _ := notify.NewLedger(drivers(t)["sqlite"](t), nil)
	for _, c := range []struct {
		edit func(*notify.Notification)
		want string
	}{
		{func(n *notify.Notification) { n.Address = "GROUP" }, `address "GROUP"`},
		{func(n *notify.Notification) { n.Address = notify.AddressSession }, "session_id: missing"},
		{func(n *notify.Notification) { n.Payload = []byte(`"` + strings.Repeat("x", 70<<10) + `"`) }, "payload: 71682 bytes; at most 65536"},
		{func(n *notify.Notification) { n.Payload = []byte(`{`) }, "payload: JSON at byte 1: expected a member name"},
		// what the audit log's reader would refuse is never stored
		{func(n *notify.Notification) { n.Payload = []byte(`{"a":1,"A":2}`) }, `payload: JSON at byte 12: member names "A" and "a" differ only in letter case`},
		{func(n *notify.Notification) { n.Payload = []byte(`{"a":1,"a":2}`) }, `duplicate member name "a"`},
		{func(n *notify.Notification) { n.Payload = []byte(`{"n":1e999}`) }, "(n): number 1e999 is out of range"},
		{func(n *notify.Notification) { n.Payload = []byte(`{"s":"\udc00"}`) }, "(s): lone surrogate"},
		{func(n *notify.Notification) { n.Payload = []byte(strings.Repeat("[", 65) + strings.Repeat("]", 65)) }, "nested deeper than 64"},
		{func(n *notify.Notification) { n.TTLSeconds = -1 }, "ttl_seconds: -1"},
		{func(n *notify.Notification) { n.DedupKey = strings.Repeat("k", 257) }, "deduplication_key: 257 bytes; at most 256"},
		{func(n *notify.Notification) { n.UserID = "" }, "user_id: missing"},
		{func(n *notify.Notification) { n.Urgency = "PANIC" }, `urgency "PANIC"`},
	} {
		n := inbox("alice", "t")
		c.edit(&n)
		if _, err := l.Emit(context.Background(), n, 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
	if list, _ := l.List(context.Background(), notify.Query{UserID: "alice"}); len(list) != 0 {
		t.Fatalf("refused emits were stored: %d", len(list))
	}
}

// Unread counts every undelivered inbox notification, not a page of them.
func TestUnread(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := ledgerOn(t, open)
			var first notify.Emitted
			for i := range 60 {
				e, err := l.Emit(ctx, inbox("alice", fmt.Sprint("n", i)), 0)
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = e
				}
			}
			l.Emit(ctx, inbox("bob", "other"), 0)
			l.Dispatch(ctx, first.ID)
			l.Ack(ctx, first.ID, "alice")
			if n, err := l.Unread(ctx, "alice"); err != nil || n != 59 {
				t.Fatalf("%d %v", n, err)
			}
		})
	}
}

// TestInboxAnyClientCanUse: a client that polls the inbox, holding no
// stream, can acknowledge what it was given (the page dispatched it, in
// the same transaction), and an ack of a PENDING notification by its
// owner delivers it; another user's page and ack change nothing; eight
// clients acknowledging one notification at once deliver it once.
func TestInboxAnyClientCanUse(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := ledgerOn(t, open)
			a, _ := l.Emit(ctx, inbox("alice", "one"), 0)
			b, _ := l.Emit(ctx, inbox("alice", "two"), 0)
			if page, unread, err := l.Inbox(ctx, "bob", 10); err != nil || len(page) != 0 || unread != 0 {
				t.Fatalf("bob's page: %v %d %v", page, unread, err)
			}
			page, unread, err := l.Inbox(ctx, "alice", 1)
			if err != nil || len(page) != 1 || page[0].ID != b.ID || page[0].State != notify.StateDispatched || unread != 2 {
				t.Fatalf("alice's page: %+v %d %v", page, unread, err)
			}
			if n, _ := l.Get(ctx, b.ID); n.State != notify.StateDispatched {
				t.Fatalf("the page was not dispatched in the ledger: %s", n.State)
			}
			if n, _ := l.Get(ctx, a.ID); n.State != notify.StatePending {
				t.Fatalf("a notification off the page moved: %s", n.State)
			}
			if n, err := l.Ack(ctx, b.ID, "alice"); err != nil || n.State != notify.StateDelivered {
				t.Fatalf("ack of the listed one: %+v %v", n, err)
			}
			if _, err := l.Ack(ctx, a.ID, "bob"); !errors.Is(err, notify.ErrNotFound) {
				t.Fatalf("bob acked alice's: %v", err)
			}
			// eight clients ack the PENDING one at once: one delivers it,
			// the others are refused, and it went through every state once
			var wg sync.WaitGroup
			var delivered atomic.Int32
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := l.Ack(ctx, a.ID, "alice"); err == nil {
						delivered.Add(1)
					} else if !errors.Is(err, notify.ErrIllegal) && !errors.Is(err, notify.ErrStale) {
						t.Errorf("ack: %v", err)
					}
				}()
			}
			wg.Wait()
			n, _ := l.Get(ctx, a.ID)
			if delivered.Load() != 1 || n.State != notify.StateDelivered || n.OwnerLease != 1 {
				t.Fatalf("%d acks delivered; %s lease %d", delivered.Load(), n.State, n.OwnerLease)
			}
			if page, unread, _ := l.Inbox(ctx, "alice", 10); len(page) != 2 || unread != 0 {
				t.Fatalf("after: %d listed, %d unread", len(page), unread)
			}
		})
	}
}

// TestAgentHoldsSurviveARestart: what the agent runtime holds (an
// agent-channel notification in its prompt, LOCKED with a lease) is in
// the ledger, not in a process: a ledger opened afresh on the same store —
// a restarted instance, or another one — puts it in the session's next
// prompt at once, without waiting for its lease to run out, and the
// model's ack delivers it with the lease the row carries.
func TestAgentHoldsSurviveARestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	open := func() (store.Store, *notify.Ledger) {
		s, err := sqlite.Open(ctx, path, &sqlite.Options{Extensions: []store.Extension{notify.Extension}})
		if err != nil {
			t.Fatal(err)
		}
		l, err := notify.NewLedger(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s, l
	}
	s1, l1 := open()
	sess := &agentplane.Session{ID: "s1", Owner: "alice", Mode: "general", Version: 1}
	n, err := l1.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: "alice", Target: notify.TargetAgent, Handler: notify.HandlerAgent,
		Title: "Build 42 failed", TTLSeconds: 3600}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lines := l1.Awareness(ctx, sess); len(lines) == 0 || !strings.Contains(lines[0], n.ID) {
		t.Fatalf("the first prompt: %v", lines)
	}
	held, _ := l1.Get(ctx, n.ID)
	if held.State != notify.StateLocked || held.LeaseUntil.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("not held for its TTL: %+v", held)
	}
	s1.Close() // the instance stops, its memory gone
	s2, l2 := open()
	defer s2.Close()
	if lines := l2.Awareness(ctx, sess); len(lines) == 0 || !strings.Contains(lines[0], n.ID) {
		t.Fatalf("after the restart, the prompt lost what the agent holds: %v", lines)
	}
	if again, _ := l2.Get(ctx, n.ID); again.OwnerLease != held.OwnerLease || again.State != notify.StateLocked {
		t.Fatalf("the restart claimed it again instead of keeping the hold: %+v", again)
	}
	l2.AgentAck(ctx, "alice", []string{n.ID})
	if done, _ := l2.Get(ctx, n.ID); done.State != notify.StateDelivered {
		t.Fatalf("the model's ack after the restart: %s", done.State)
	}
}

// TestAcksTogether: acks that arrive together are committed together,
// and each is still its own compare-and-swap: 64 clients acknowledging
// their own notifications (PENDING, DISPATCHED and ESCALATED alike) at
// once, while each notification is also acknowledged a second time,
// deliver every one exactly once, through its states once.
func TestAcksTogether(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := ledgerOn(t, open)
			var ns []notify.Notification
			for i := range 64 {
				e, err := l.Emit(ctx, inbox(fmt.Sprintf("user-%d", i%8), fmt.Sprintf("n%d", i)), 0)
				if err != nil {
					t.Fatal(err)
				}
				n := e.Notification
				switch i % 3 {
				case 1:
					n, _ = l.Dispatch(ctx, n.ID)
				case 2:
					n, _ = l.Dispatch(ctx, n.ID)
					n, _ = l.Claim(ctx, n.ID, n.OwnerLease, time.Minute)
					n, _ = l.Escalate(ctx, n.ID, n.OwnerLease)
				}
				ns = append(ns, n)
			}
			var wg sync.WaitGroup
			var delivered atomic.Int32
			for _, n := range ns {
				for range 2 {
					wg.Go(func() {
						got, err := l.Ack(ctx, n.ID, n.UserID)
						switch {
						case err == nil && got.State == notify.StateDelivered && got.ID == n.ID:
							delivered.Add(1)
						case err == nil:
							t.Errorf("ack of %s: %+v", n.ID, got)
						case !errors.Is(err, notify.ErrIllegal) && !errors.Is(err, notify.ErrStale):
							t.Errorf("ack of %s: %v", n.ID, err)
						}
					})
				}
			}
			wg.Wait()
			if delivered.Load() != 64 {
				t.Fatalf("%d acks delivered, want 64 (one per notification)", delivered.Load())
			}
			for _, n := range ns {
				got, _ := l.Get(ctx, n.ID)
				wantLease := n.OwnerLease + 1
				if n.State == notify.StateEscalated {
					wantLease = n.OwnerLease
				}
				if got.State != notify.StateDelivered || got.OwnerLease != wantLease {
					t.Fatalf("%s (was %s, lease %d): %s lease %d", n.ID, n.State, n.OwnerLease, got.State, got.OwnerLease)
				}
			}
		})
	}
}

// ledgerOn is a ledger with the default options on a store of the driver.
func ledgerOn(t *testing.T, open func(testing.TB) store.Store) *notify.Ledger {
	t.Helper()
	_, l := storeAndLedger(t, open)
	return l
}

// storeAndLedger opens a store and a ledger over it.
func storeAndLedger(t *testing.T, open func(testing.TB) store.Store) (store.Store, *notify.Ledger) {
	t.Helper()
	st := open(t)
	l, err := notify.NewLedger(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st, l
}

// TestEmitsTogether: emits that arrive together, many to the same
// addresses, each get their own row, id and result; each address's
// sequence numbers are 1…n with none taken twice or skipped; what each
// emit returned is what is stored.
func TestEmitsTogether(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := ledgerOn(t, open)
			const producers, each, users = 16, 12, 4
			var mu sync.Mutex
			got := map[string]notify.Emitted{}
			var wg sync.WaitGroup
			for p := range producers {
				wg.Go(func() {
					for i := range each {
						n := inbox(fmt.Sprintf("user-%d", (p+i)%users), fmt.Sprintf("p%d-%d", p, i))
						if i%3 == 0 {
							n.Body, n.Payload, n.TTLSeconds, n.Directive = "body", []byte(`{"k":1}`), 60, "do it"
						}
						e, err := l.Emit(ctx, n, 0)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if _, dup := got[e.ID]; dup {
							t.Errorf("id %s returned twice", e.ID)
						}
						got[e.ID] = e
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(got) != producers*each {
				t.Fatalf("%d emitted, want %d", len(got), producers*each)
			}
			seqs := map[string][]bool{}
			for id, e := range got {
				stored, err := l.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if stored.Seq != e.Seq || stored.Title != e.Title || stored.Body != e.Body || string(stored.Payload) != string(e.Payload) ||
					stored.TTLSeconds != e.TTLSeconds || stored.Directive != e.Directive || stored.State != e.State || stored.Channel != e.Channel ||
					!stored.CreatedAt.Equal(e.CreatedAt) || stored.Urgency != e.Urgency {
					t.Fatalf("returned %+v, stored %+v", e.Notification, stored)
				}
				s := seqs[e.UserID]
				for int64(len(s)) < e.Seq {
					s = append(s, false)
				}
				if s[e.Seq-1] {
					t.Fatalf("%s: seq %d twice", e.UserID, e.Seq)
				}
				s[e.Seq-1] = true
				seqs[e.UserID] = s
			}
			for u, s := range seqs {
				if len(s) != producers*each/users || slices.Contains(s, false) {
					t.Fatalf("%s: sequence numbers %v, want 1…%d each once", u, s, producers*each/users)
				}
			}
		})
	}
}

// TestEmitRefusedIsTriedAlone: an emit whose batch the database refuses
// for a unique key (here its id, taken already) is tried again alone, and
// stored once.
func TestEmitRefusedIsTriedAlone(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ids := []string{"first", "first", "second"}
			var mu sync.Mutex
			l, err := notify.NewLedger(open(t), &notify.Options{NewID: func() string {
				mu.Lock()
				defer mu.Unlock()
				id := ids[0]
				ids = ids[1:]
				return id
			}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Emit(ctx, inbox("u", "one"), 0); err != nil {
				t.Fatal(err)
			}
			e, err := l.Emit(ctx, inbox("u", "two"), 0)
			if err != nil || e.ID != "second" || e.Seq != 2 {
				t.Fatalf("%+v %v, want second with seq 2", e, err)
			}
			list, err := l.List(ctx, notify.Query{UserID: "u"})
			if err != nil || len(list) != 2 || list[0].ID != "second" || list[1].ID != "first" || list[0].Title != "two" {
				t.Fatalf("%+v %v", list, err)
			}
		})
	}
}

// TestBatchesInFlight: emits and acks from many producers at once, each
// producer acknowledging its own notification right after it emitted it
// while a client acknowledges the same notification too — the batches
// taken as their commits start (on SQLite inside the group commit, beside
// another subsystem's commits that fail and make their groups be tried
// again, each commit of such a group applied twice; on PostgreSQL two
// batches of each kind in flight): every emit is stored once, with its own
// row and sequence number, every notification is delivered by exactly one
// of its two acks, through its states once, on its one channel.
func TestBatchesInFlight(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, l := storeAndLedger(t, open)
			stop := make(chan struct{})
			var failing sync.WaitGroup
			if name == "sqlite" {
				failing.Go(func() { // another subsystem's commits that fail after the group began
					boom := errors.New("boom")
					for {
						select {
						case <-stop:
							return
						default:
						}
						err := st.Commit(ctx, &store.Commit{Ops: []store.Op{store.OpFunc(func(ctx context.Context, tx store.Tx) error {
							if _, err := tx.Exec(ctx, `UPDATE notifications SET updated = updated WHERE id = ''`); err != nil {
								return err
							}
							return boom
						})}})
						if !errors.Is(err, boom) {
							t.Errorf("the failing commit: %v", err)
							return
						}
					}
				})
			}
			const producers, each, users = 16, 16, 5
			var mu sync.Mutex
			emitted := map[string]notify.Emitted{}
			delivered := map[string]int{}
			ack := func(e notify.Emitted) {
				got, err := l.Ack(ctx, e.ID, e.UserID)
				switch {
				case err == nil && got.ID == e.ID && got.State == notify.StateDelivered:
					mu.Lock()
					delivered[e.ID]++
					mu.Unlock()
				case err == nil:
					t.Errorf("ack of %s: %+v", e.ID, got)
				case !errors.Is(err, notify.ErrIllegal) && !errors.Is(err, notify.ErrStale):
					t.Errorf("ack of %s: %v", e.ID, err)
				}
			}
			shown := make(chan notify.Emitted, producers*each)
			var clients, wg sync.WaitGroup
			clients.Go(func() { // the client acknowledges what it is shown
				for e := range shown {
					ack(e)
				}
			})
			for p := range producers {
				wg.Go(func() {
					for i := range each {
						e, err := l.Emit(ctx, inbox(fmt.Sprintf("user-%d", (p+i)%users), fmt.Sprintf("p%d-%d", p, i)), 0)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if _, dup := emitted[e.ID]; dup {
							t.Errorf("id %s returned twice", e.ID)
						}
						emitted[e.ID] = e
						mu.Unlock()
						shown <- e
						ack(e)
					}
				})
			}
			wg.Wait()
			close(shown)
			clients.Wait()
			close(stop)
			failing.Wait()
			if t.Failed() {
				return
			}
			var rows int
			if err := st.(store.Querier).Query(ctx, `SELECT COUNT(*) FROM notifications`, nil, func(scan func(...any) error) error { return scan(&rows) }); err != nil {
				t.Fatal(err)
			}
			if rows != producers*each || len(emitted) != producers*each {
				t.Fatalf("%d rows stored, %d emits returned, want %d", rows, len(emitted), producers*each)
			}
			seqs := map[string]map[int64]bool{}
			for id, e := range emitted {
				got, err := l.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if got.Title != e.Title || got.UserID != e.UserID || got.Seq != e.Seq || got.Channel != notify.ChannelInbox {
					t.Fatalf("returned %+v, stored %+v", e.Notification, got)
				}
				if got.State != notify.StateDelivered || got.OwnerLease != 1 || got.Attempts != 1 || delivered[id] != 1 {
					t.Fatalf("%s: %s, owner_lease %d, %d attempts, delivered by %d acks; want DELIVERED once", id, got.State, got.OwnerLease, got.Attempts, delivered[id])
				}
				if seqs[e.UserID] == nil {
					seqs[e.UserID] = map[int64]bool{}
				}
				if seqs[e.UserID][e.Seq] {
					t.Fatalf("%s: seq %d twice", e.UserID, e.Seq)
				}
				seqs[e.UserID][e.Seq] = true
			}
			for u, s := range seqs {
				for k := int64(1); k <= int64(len(s)); k++ {
					if !s[k] {
						t.Fatalf("%s: sequence numbers %v skip %d", u, s, k)
					}
				}
			}
		})
	}
}

// TestIDsInEmissionOrder: the ledger's own ids sort in the order the
// ledger's clock made them — an emit adds to the last pages of the id's
// index, not to a random page of it — and tell nothing else: 32 hex
// digits, 80 of their bits random.
func TestIDsInEmissionOrder(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l, err := notify.NewLedger(drivers(t)["sqlite"](t), &notify.Options{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 20 {
		e, err := l.Emit(ctx, inbox("alice", fmt.Sprint("n", i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.ID) != 32 || strings.Trim(e.ID, "0123456789abcdef") != "" {
			t.Fatalf("id %q: want 32 hex digits", e.ID)
		}
		ids = append(ids, e.ID)
		clk.add(time.Millisecond)
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("ids out of emission order: %v", ids)
	}
	if ids[0][12:] == ids[1][12:] {
		t.Fatalf("two ids share their random part: %s %s", ids[0], ids[1])
	}
}

// TestAckTriedAgainSeesTheRetry: on SQLite, a group commit that a failing
// commit makes be tried again applies the ack batch twice; when a commit
// before it in the group acts differently the second time (here it moves
// the notification to FAILED), the ack is what the second try found — not
// delivered — and never the first try's answer, which was rolled back.
// The group is arranged by holding the store's leader while the three
// commits queue, one after the other: in a synctest bubble, Wait returns
// once each is queued (blocked until its group is decided).
func TestAckTriedAgainSeesTheRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "n.db"), &sqlite.Options{Extensions: []store.Extension{notify.Extension}})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		l, err := notify.NewLedger(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		e, err := l.Emit(ctx, inbox("u", "n"), 0)
		if err != nil {
			t.Fatal(err)
		}
		state := func(tx store.Tx) string {
			var s string
			if err := tx.Query(ctx, `SELECT state FROM notifications WHERE id = ?`, []any{e.ID}, func(scan func(...any) error) error { return scan(&s) }); err != nil {
				t.Error(err)
			}
			return s
		}
		commit := func(op func(ctx context.Context, tx store.Tx) error) error {
			return st.Commit(ctx, &store.Commit{Ops: []store.Op{store.OpFunc(op)}})
		}
		var aRuns, fRuns int
		var aFirst, fFirst string // the state each saw at its first application
		hold := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // the leader, held while the others queue
			commit(func(context.Context, store.Tx) error { <-hold; return nil })
		})
		synctest.Wait()
		wg.Go(func() { // a: writes nothing the first time, FAILED the second
			commit(func(ctx context.Context, tx store.Tx) error {
				if aRuns++; aRuns == 1 {
					aFirst = state(tx)
					_, err := tx.Exec(ctx, `UPDATE notifications SET updated = updated WHERE id = ?`, e.ID)
					return err
				}
				_, err := tx.Exec(ctx, `UPDATE notifications SET state = 'FAILED' WHERE id = ?`, e.ID)
				return err
			})
		})
		synctest.Wait()
		var acked notify.Notification
		var ackErr error
		wg.Go(func() { acked, ackErr = l.Ack(ctx, e.ID, "u") })
		synctest.Wait()
		boom := errors.New("boom")
		wg.Go(func() { // f: fails after the ack, so the group is tried again
			err := commit(func(ctx context.Context, tx store.Tx) error {
				if fRuns++; fRuns == 1 {
					fFirst = state(tx)
				}
				return boom
			})
			if !errors.Is(err, boom) {
				t.Errorf("the failing commit: %v", err)
			}
		})
		synctest.Wait()
		close(hold)
		wg.Wait()
		// a, the ack and f in that order in one group, tried twice: a saw
		// the notification before the ack delivered it, f after
		if aRuns != 2 || aFirst != string(notify.StatePending) || fFirst != string(notify.StateDelivered) {
			t.Fatalf("a ran %d times and saw %q, f saw %q: not one group of a, the ack and f, tried twice", aRuns, aFirst, fFirst)
		}
		stored, err := l.Get(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ackErr == nil || stored.State != notify.StateFailed {
			t.Fatalf("the ack answered %s, %v; the notification is stored %s; want the ack refused, FAILED", acked.State, ackErr, stored.State)
		}
	})
}

// TestWhatAUserSees walks every combination of a notification's axes,
// for two users, as emitted and (what reaches the agent) once escalated,
// plus one addressed to the one user's session under the other's id (the
// ledger does not check a session's owner; the bus does): each user's
// List holds exactly the user's notifications on both addresses, its
// inbox and unread count exactly the user's inbox ones, never the other
// user's. The inbox is found by the user's address alone, which holds
// only because Route and Fallback send nothing addressed to a session to
// the inbox — checked first, over every combination. On SQLite every
// statement that finds a user's notifications searches an index; none
// scans the table.
func TestWhatAUserSees(t *testing.T) {
	addresses := []notify.Address{notify.AddressUser, notify.AddressSession}
	targets := []notify.Target{notify.TargetUser, notify.TargetAgent}
	handlers := []notify.Handler{notify.HandlerSystem, notify.HandlerAgent}
	for _, a := range addresses {
		for _, tg := range targets {
			for _, h := range handlers {
				if ch, err := notify.Route(a, tg, h); err != nil || ch == notify.ChannelInbox && a != notify.AddressUser {
					t.Fatalf("Route(%s, %s, %s) = %s, %v: only what is addressed to a user may reach the inbox", a, tg, h, ch, err)
				}
			}
		}
		if notify.Fallback(a) == notify.ChannelInbox && a != notify.AddressUser {
			t.Fatalf("Fallback(%s) is the inbox", a)
		}
	}
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, l := storeAndLedger(t, open)
			all := map[string]map[string]bool{"alice": {}, "bob": {}}
			inboxes := map[string]map[string]bool{"alice": {}, "bob": {}}
			emit := func(n notify.Notification, escalate bool) {
				e, err := l.Emit(ctx, n, 0)
				if err != nil {
					t.Fatal(err)
				}
				ch := e.Channel
				if escalate && ch == notify.ChannelAgent {
					d, err := l.Dispatch(ctx, e.ID)
					if err != nil {
						t.Fatal(err)
					}
					c, err := l.Claim(ctx, e.ID, d.OwnerLease, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					x, err := l.Escalate(ctx, e.ID, c.OwnerLease)
					if err != nil {
						t.Fatal(err)
					}
					ch = x.Channel
				}
				all[n.UserID][e.ID] = true
				if ch == notify.ChannelInbox {
					inboxes[n.UserID][e.ID] = true
				}
			}
			for user := range all {
				for _, a := range addresses {
					for _, tg := range targets {
						for _, h := range handlers {
							for _, escalate := range []bool{false, true} {
								n := notify.Notification{Address: a, UserID: user, Target: tg, Handler: h, Title: fmt.Sprint(a, tg, h, escalate)}
								if a == notify.AddressSession {
									n.SessionID = user + "-s"
								}
								emit(n, escalate)
							}
						}
					}
				}
			}
			emit(notify.Notification{Address: notify.AddressSession, UserID: "bob", SessionID: "alice-s", Target: notify.TargetUser,
				Handler: notify.HandlerSystem, Title: "bob's, in alice's session"}, false)
			ids := func(list []notify.Notification) map[string]bool {
				out := map[string]bool{}
				for _, n := range list {
					out[n.ID] = true
				}
				return out
			}
			for user := range all {
				list, err := l.List(ctx, notify.Query{UserID: user, Limit: 500})
				if err != nil || !maps.Equal(ids(list), all[user]) {
					t.Errorf("%s's List: %d notifications, want %d (%v)", user, len(list), len(all[user]), err)
				}
				list, err = l.List(ctx, notify.Query{UserID: user, Channel: notify.ChannelInbox, Limit: 500})
				if err != nil || !maps.Equal(ids(list), inboxes[user]) {
					t.Errorf("%s's List of the inbox: %d notifications, want %d (%v)", user, len(list), len(inboxes[user]), err)
				}
				page, unread, err := l.Inbox(ctx, user, 500)
				if err != nil || !maps.Equal(ids(page), inboxes[user]) || unread != len(inboxes[user]) {
					t.Errorf("%s's inbox: %d listed, %d unread, want %d (%v)", user, len(page), unread, len(inboxes[user]), err)
				}
				if n, err := l.Unread(ctx, user); err != nil || n != len(inboxes[user]) {
					t.Errorf("%s's unread: %d, want %d (%v)", user, n, len(inboxes[user]), err)
				}
			}
			if len(inboxes["alice"]) == 0 || len(all["alice"]) == len(inboxes["alice"]) {
				t.Fatalf("the walk reached no inbox or only the inbox: %d of %d", len(inboxes["alice"]), len(all["alice"]))
			}
			if name != "sqlite" {
				return
			}
			q := st.(store.Querier)
			for what, s := range notify.UserStatements("alice") {
				plan := explain(t, q, name, s[0].(string), s[1].([]any))
				for _, step := range plan {
					if strings.HasPrefix(step, "SCAN notifications") {
						t.Errorf("%s scans the table: %q", what, plan)
					}
					// by the user (address or user id), never by an index of
					// every user's rows (a state's: dead, escalated, locked)
					if strings.HasPrefix(step, "SEARCH notifications") && !strings.Contains(step, "(address_key=") && !strings.Contains(step, "(user_id=") {
						t.Errorf("%s does not find the user's rows by the user: %q", what, plan)
					}
				}
			}
		})
	}
}

// TestAcksFindTheirRows: a batch of acks finds its rows by their ids, not
// by their states — with many notifications live (not delivered yet)
// across users, a plan over the state index would read every one of them
// for each batch (SQLite's did, from 16 acks a batch). SQLite's plan must
// search only the id's index, at every batch size; PostgreSQL's must not
// touch the state index either (on a table this small its statistics
// rightly choose to read it whole for the larger batches).
func TestAcksFindTheirRows(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, l := storeAndLedger(t, open)
			var ids, users []string
			for i := range 600 {
				user := fmt.Sprint("user-", i%30)
				e, err := l.Emit(ctx, inbox(user, fmt.Sprint("n", i)), 0)
				if err != nil {
					t.Fatal(err)
				}
				if i%4 == 0 {
					ids, users = append(ids, e.ID), append(users, user)
				}
			}
			q := st.(store.Querier)
			if name == "postgres" {
				if err := st.Commit(ctx, &store.Commit{Ops: []store.Op{store.Statement{Query: `ANALYZE notifications`}}}); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range []int{1, 2, 6, 16, 32, 64, 128} { // every batch size up to maxAckBatch's
				sql, args := notify.AckStatement(l, ids[:k], users[:k], k%2 == 0) // returning the ids alone, and every column
				plan := explain(t, q, name, sql, args)
				joined := strings.Join(plan, "\n")
				for _, line := range plan { // PostgreSQL: the primary key's index or none (a table this small read whole)
					if m := pgIndexRE.FindStringSubmatch(line); name == "postgres" && m != nil && m[1]+m[2] != "notifications_pkey" {
						t.Fatalf("%d acks: the plan reads an index other than the id's:\n%s", k, joined)
					}
				}
				for _, line := range plan { // SQLite's plan, without statistics, is the same at any size
					if name == "sqlite" && (strings.HasPrefix(line, "SEARCH notifications") && !strings.Contains(line, "(id=?)") ||
						strings.HasPrefix(line, "SCAN notifications")) {
						t.Fatalf("%d acks: the plan reads more than their rows:\n%s", k, joined)
					}
				}
			}
			ids, users = ids[:6], users[:6]
			// the batch still delivers exactly its own
			for i, id := range ids {
				if n, err := l.Ack(ctx, id, users[i]); err != nil || n.State != notify.StateDelivered {
					t.Fatalf("ack %s: %+v %v", id, n, err)
				}
			}
		})
	}
}

// TestAcknowledge: Acknowledge delivers as Ack does, in the same batches,
// without the notification back. A batch of Acknowledges returns the ids
// alone; a batch that mixes them with Acks returns every column, and each
// Ack gets its notification as delivered. Refusals are Ack's: another
// user's notification is not found, a delivered one cannot be
// acknowledged again, and of eight clients acknowledging one at once
// exactly one delivers it.
func TestAcknowledge(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := ledgerOn(t, open)
			var ids, users []string
			for i := range 7 {
				user := "alice"
				if i == 6 {
					user = "bob"
				}
				e, err := l.Emit(ctx, inbox(user, fmt.Sprint("n", i)), 0)
				if err != nil {
					t.Fatal(err)
				}
				ids, users = append(ids, e.ID), append(users, "alice") // alice acks bob's too
			}
			if q, _ := notify.AckStatement(l, ids, users, false); !strings.HasSuffix(q, "RETURNING id") {
				t.Fatalf("a batch of Acknowledges returns more than the ids: …%s", q[max(0, len(q)-60):])
			}
			// a batch of Acknowledges alone, then one mixed with Acks
			_, ok, err := notify.AckTogether(ctx, l, ids[:2], users[:2], []bool{false, false})
			if err != nil || !ok[0] || !ok[1] {
				t.Fatalf("Acknowledges alone: %v %v", ok, err)
			}
			whole := []bool{true, false, true, false, false}
			got, ok, err := notify.AckTogether(ctx, l, ids[2:], users[2:], whole)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range ids[2:] {
				stored, err := l.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if id == ids[6] { // bob's
					if ok[i] || stored.State != notify.StatePending {
						t.Fatalf("alice's ack of bob's notification: delivered %v, stored %s", ok[i], stored.State)
					}
					continue
				}
				if !ok[i] || stored.State != notify.StateDelivered {
					t.Fatalf("ack %d: delivered %v, stored %s", i, ok[i], stored.State)
				}
				if whole[i] && (got[i].ID != id || got[i].Title != stored.Title || got[i].State != notify.StateDelivered || got[i].OwnerLease != stored.OwnerLease) {
					t.Fatalf("Ack %d got %+v, stored %+v", i, got[i], stored)
				}
			}
			// the public method and its refusals
			if err := l.Acknowledge(ctx, ids[6], "alice"); !errors.Is(err, notify.ErrNotFound) {
				t.Fatalf("alice acknowledged bob's: %v", err)
			}
			if err := l.Acknowledge(ctx, ids[0], "alice"); !errors.Is(err, notify.ErrIllegal) {
				t.Fatalf("acknowledged again: %v", err)
			}
			e, err := l.Emit(ctx, inbox("alice", "once"), 0)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var delivered atomic.Int32
			for range 8 {
				wg.Go(func() {
					if err := l.Acknowledge(ctx, e.ID, "alice"); err == nil {
						delivered.Add(1)
					} else if !errors.Is(err, notify.ErrIllegal) && !errors.Is(err, notify.ErrStale) {
						t.Errorf("acknowledge: %v", err)
					}
				})
			}
			wg.Wait()
			if n, _ := l.Get(ctx, e.ID); delivered.Load() != 1 || n.State != notify.StateDelivered || n.OwnerLease != 1 {
				t.Fatalf("%d delivered; stored %s, lease %d", delivered.Load(), n.State, n.OwnerLease)
			}
		})
	}
}

// TestAwarenessIsTheSessions: a session's prompt holds what the agent
// must act on for that session and its owner, and the [SEEN] lines of
// that session's floor — however many newer notifications the owner's
// other sessions have, and never another user's put at the session's
// address (the ledger does not check a session's owner; the bus does).
// Before, Awareness listed the owner's eight newest and only then kept
// the session's: another session's ten newer crowded them out.
func TestAwarenessIsTheSessions(t *testing.T) {
	for name, open := range drivers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := ledgerOn(t, open)
			emit := func(n notify.Notification) notify.Emitted {
				t.Helper()
				e, err := l.Emit(ctx, n, 0)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			agent := func(user string, a notify.Address, session, title string) notify.Notification {
				return notify.Notification{Address: a, UserID: user, SessionID: session, Target: notify.TargetAgent, Handler: notify.HandlerSystem, Title: title}
			}
			floor := func(user, session, title string) notify.Notification {
				return notify.Notification{Address: notify.AddressSession, UserID: user, SessionID: session, Target: notify.TargetUser, Handler: notify.HandlerSystem, Title: title}
			}
			mine := emit(agent("alice", notify.AddressSession, "s1", "for s1"))
			owners := emit(agent("alice", notify.AddressUser, "", "for alice"))
			shown := emit(floor("alice", "s1", "shown in s1"))
			if _, err := l.Dispatch(ctx, shown.ID); err != nil {
				t.Fatal(err)
			}
			emit(agent("bob", notify.AddressSession, "s1", "bob's, at s1"))
			for i := range 10 { // newer, in alice's other session
				emit(agent("alice", notify.AddressSession, "s2", fmt.Sprint("for s2 ", i)))
				f := emit(floor("alice", "s2", fmt.Sprint("shown in s2 ", i)))
				if _, err := l.Dispatch(ctx, f.ID); err != nil {
					t.Fatal(err)
				}
			}
			lines := strings.Join(l.Awareness(ctx, &agentplane.Session{ID: "s1", Owner: "alice"}), "\n")
			for _, want := range []string{"[NOTIFICATION " + mine.ID + "] for s1", "[NOTIFICATION " + owners.ID + "] for alice", "[SEEN] shown in s1"} {
				if !strings.Contains(lines, want) {
					t.Errorf("s1's prompt lacks %q:\n%s", want, lines)
				}
			}
			for _, not := range []string{"for s2", "shown in s2", "bob's"} {
				if strings.Contains(lines, not) {
					t.Errorf("s1's prompt holds %q:\n%s", not, lines)
				}
			}
			if n, _ := l.Get(ctx, mine.ID); n.State != notify.StateLocked {
				t.Errorf("the notification put in s1's prompt is %s, not held", n.State)
			}
		})
	}
}

// TestUnreadStates: the unread count and its index name every state of
// the package that is not terminal — each State constant, read from the
// source, so that a state added later is checked too — and no terminal
// one. A state left out would drop its notifications from the count.
func TestUnreadStates(t *testing.T) {
	for _, c := range consttest.Strings(t, "notification.go", "State", 6) {
		state := notify.State(c.Value)
		if listed := strings.Contains(notify.UnreadStates, "'"+c.Value+"'"); listed == state.Terminal() {
			t.Errorf("%s: terminal %v, counted unread %v", c.Name, state.Terminal(), listed)
		}
	}
}

// explain returns a statement's plan, a line a step: SQLite's EXPLAIN
// QUERY PLAN details, or PostgreSQL's EXPLAIN lines (driver: the store's).
func explain(t *testing.T, q store.Querier, driver, query string, args []any) []string {
	t.Helper()
	var plan []string
	prefix := `EXPLAIN QUERY PLAN `
	if driver == "postgres" {
		prefix = `EXPLAIN `
	}
	err := q.Query(context.Background(), prefix+query, args, func(scan func(...any) error) error {
		var line string
		var err error
		if driver == "postgres" {
			err = scan(&line)
		} else {
			var id, parent, unused int
			err = scan(&id, &parent, &unused, &line)
		}
		plan = append(plan, line)
		return err
	})
	if err != nil || len(plan) == 0 { // no plan would hold to every rule
		t.Fatalf("explain %s: %d steps, %v", query, len(plan), err)
	}
	return plan
}

// pgIndexRE finds the index a line of PostgreSQL's EXPLAIN reads.
var pgIndexRE = regexp.MustCompile(`(?:Index Scan|Index Only Scan)(?: Backward)? using (\w+)|Bitmap Index Scan on (\w+)`)
