package events_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
)

// chain is a session on a memstore with a hub over it.
type chain struct {
	t   *testing.T
	st  *memstore.Store
	hub *events.Hub
	v   int64
	mu  sync.Mutex
	// reads counts the hub's reads of the store
	reads int
}

func newChain(t *testing.T, queue int) *chain {
	c := &chain{t: t, st: memstore.New()}
	c.hub = events.NewHub(func(ctx context.Context, session string, after int64) ([]audit.Record, error) {
		c.mu.Lock()
		c.reads++
		c.mu.Unlock()
		return c.st.Records(ctx, session, after)
	}, &events.Options{Queue: queue})
	c.commit()
	return c
}

// commit appends a record that changes the session, and notifies.
func (c *chain) commit() int64 {
	c.t.Helper()
	c.v++
	s := &agentplane.Session{ID: "s", Mode: "m", Version: c.v}
	cm := &store.Commit{SessionID: "s", Session: s, Record: &audit.Record{Session: "s", Time: time.Unix(c.v, 0).UTC(), Kind: audit.KindExecution, State: s}}
	if err := c.st.Commit(context.Background(), cm); err != nil {
		c.t.Fatal(err)
	}
	c.hub.Notify("s")
	return cm.Record.Seq
}

func next(t *testing.T, s *events.Sub) events.Frame {
	t.Helper()
	select {
	case f := <-s.Events():
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return events.Frame{}
}

func TestSubscribersGetEveryEventOnce(t *testing.T) {
	c := newChain(t, 0)
	subs := make([]*events.Sub, 100)
	for i := range subs {
		subs[i] = c.hub.Subscribe("s", 1)
	}
	for range 20 {
		c.commit()
	}
	for i, s := range subs {
		for want := int64(2); want <= 21; want++ {
			if f := next(t, s); f.Seq != want || !strings.Contains(string(f.Data), `"seq":`) {
				t.Fatalf("sub %d: got %d, want %d", i, f.Seq, want)
			}
		}
		select {
		case f := <-s.Events():
			t.Fatalf("sub %d: a duplicate %d", i, f.Seq)
		default:
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reads > 21+100 { // at most one read per commit and per subscription, whatever the number of subscribers
		t.Fatalf("%d reads of the store for 100 subscribers and 20 commits", c.reads)
	}
}

// A subscription created after commits still gets them: nothing between
// the caller's own read and Subscribe is lost.
func TestSubscribeCatchesUp(t *testing.T) {
	c := newChain(t, 0)
	c.commit()
	c.commit()
	s := c.hub.Subscribe("s", 1)
	if f := next(t, s); f.Seq != 2 {
		t.Fatalf("%d", f.Seq)
	}
	if f := next(t, s); f.Seq != 3 {
		t.Fatalf("%d", f.Seq)
	}
}

// A subscriber that does not read is closed with a reason once its queue
// is full; resuming after its last event loses nothing.
func TestSlowSubscriberIsClosed(t *testing.T) {
	c := newChain(t, 4)
	slow := c.hub.Subscribe("s", 1)
	fast := c.hub.Subscribe("s", 1)
	got := 0
	for range 10 {
		c.commit()
		next(t, fast)
		got++
	}
	select {
	case <-slow.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the slow subscriber was not closed")
	}
	if r := slow.Reason(); !strings.Contains(r, "too slow") || !strings.Contains(r, "resume after event 5") {
		t.Fatalf("reason %q", r)
	}
	last := int64(1)
	for len(slow.Events()) > 0 {
		last = next(t, slow).Seq
	}
	if last != 5 {
		t.Fatalf("queued up to %d", last)
	}
	// resuming: the backlog from the store, then the hub from there
	backlog, _ := c.st.Records(context.Background(), "s", last)
	if len(backlog) != 6 || backlog[0].Seq != 6 {
		t.Fatalf("backlog of %d", len(backlog))
	}
	again := c.hub.Subscribe("s", backlog[len(backlog)-1].Seq)
	c.commit()
	if f := next(t, again); f.Seq != 12 {
		t.Fatalf("resumed with %d, want 12", f.Seq)
	}
	if c.hub.Subscribers() != 2 {
		t.Fatalf("%d subscribers", c.hub.Subscribers())
	}
}

func TestCloseEndsEverySubscription(t *testing.T) {
	c := newChain(t, 0)
	s := c.hub.Subscribe("s", 0)
	c.hub.Close("bye")
	<-s.Done()
	if s.Reason() != "bye" || c.hub.Subscribers() != 0 {
		t.Fatalf("%q %d", s.Reason(), c.hub.Subscribers())
	}
	late := c.hub.Subscribe("s", 0)
	<-late.Done()
	if late.Reason() != "bye" {
		t.Fatal(late.Reason())
	}
	s.Close() // again: nothing happens
}

// Poll finds commits the hub was not told of (another instance's), with
// one heads read per period for all followed sessions.
func TestPollFindsUnnotifiedCommits(t *testing.T) {
	c := newChain(t, 0)
	s := c.hub.Subscribe("s", 1)
	var polls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.hub.Poll(ctx, 5*time.Millisecond, func(ctx context.Context, sessions []string) (map[string]int64, error) {
		polls.Add(1)
		if len(sessions) != 1 || sessions[0] != "s" {
			t.Errorf("polled %v", sessions)
		}
		recs, err := c.st.Records(ctx, "s", 0)
		return map[string]int64{"s": recs[len(recs)-1].Seq}, err
	})
	// commit behind the hub's back
	v := &agentplane.Session{ID: "s", Mode: "m", Version: 2}
	if err := c.st.Commit(ctx, &store.Commit{SessionID: "s", Session: v, Record: &audit.Record{Session: "s", Time: time.Unix(2, 0), Kind: audit.KindExecution, State: v}}); err != nil {
		t.Fatal(err)
	}
	if f := next(t, s); f.Seq != 2 {
		t.Fatalf("%d", f.Seq)
	}
	reads := func() int { c.mu.Lock(); defer c.mu.Unlock(); return c.reads }
	before, p := reads(), polls.Load()
	for polls.Load() < p+5 {
		time.Sleep(time.Millisecond)
	}
	if r := reads(); r > before+1 { // nothing new: heads only, no records read
		t.Fatalf("%d records reads while nothing changed", r-before)
	}
}
