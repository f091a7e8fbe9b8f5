package notify_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
)

// TestInboxAcrossInstances: two instances on one PostgreSQL. A user's
// inbox stream is open on B; notifications emitted on A (which holds no
// stream of the user, so stores them PENDING) reach it through B's
// follower, each once, dispatched once, and no other user's stream sees
// them. The delay from A's emit to B's stream is measured and logged.
func TestInboxAcrossInstances(t *testing.T) {
	url := pgtest.Schema(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	type instance struct {
		hub *events.Hub
		bus *notify.Bus
	}
	open := func() instance {
		st, err := postgres.Open(ctx, url, &postgres.Options{Extensions: []store.Extension{notify.Extension}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		c := demotest.Core(t, &core.Options{Store: st})
		l, err := notify.NewLedger(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		hub := events.NewHub(st.Records, nil)
		bus := notify.NewBus(l, c, hub, nil)
		go bus.Follow(ctx, 50*time.Millisecond)
		return instance{hub, bus}
	}
	a, b := open(), open()
	alice := b.hub.Subscribe(notify.UserTopic("alice"), 0)
	bob := b.hub.Subscribe(notify.UserTopic("bob"), 0)
	defer alice.Close()
	defer bob.Close()
	const n = 60
	var lat []time.Duration
	for i := range n {
		e, err := a.bus.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: "alice", Target: notify.TargetUser,
			Handler: notify.HandlerSystem, Title: "build finished"}, 0)
		if err != nil || e.State != notify.StatePending {
			t.Fatalf("emit %d on A: %+v %v", i, e, err)
		}
		sent := time.Now()
		select {
		case f := <-alice.Events():
			lat = append(lat, time.Since(sent))
			var got notify.Notification
			if err := json.Unmarshal(f.Data, &got); err != nil || got.ID != e.ID || got.State != notify.StateDispatched {
				t.Fatalf("B's stream got %s, want %s DISPATCHED", f.Data, e.ID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("notification %d never reached the stream on B", i)
		}
	}
	select {
	case f := <-alice.Events():
		t.Fatalf("a notification arrived twice: %s", f.Data)
	case f := <-bob.Events():
		t.Fatalf("bob's stream got alice's: %s", f.Data)
	case <-time.After(300 * time.Millisecond):
	}
	slices.Sort(lat)
	t.Logf("emit on A → stream on B, %d notifications: p50 %v, p99 %v, max %v", n, lat[n/2], lat[n*99/100], lat[n-1])
	page, unread, err := b.bus.Inbox(ctx, "alice", 500)
	if err != nil || len(page) != n || unread != n {
		t.Fatalf("alice's inbox: %d, %d unread, %v", len(page), unread, err)
	}

	// alice's streams open on both instances: one emitted on A goes to
	// A's stream at once (stored DISPATCHED) and to B's through B's
	// follower, each once
	onA := a.hub.Subscribe(notify.UserTopic("alice"), 0)
	defer onA.Close()
	backlog, _, err := a.bus.Inbox(ctx, "alice", 500) // what a stream shows when it opens
	if err != nil {
		t.Fatal(err)
	}
	// A's follower may have sent some of the backlog between the
	// subscription and the read, as a stream's server sees it: it shows
	// those with the backlog and skips them live (inboxFeed in httpapi).
	shown := map[string]bool{}
	for _, n := range backlog {
		shown[n.ID] = true
	}
	time.Sleep(150 * time.Millisecond) // A's follower has looked with its stream open: the backlog is not sent again
	for drained := false; !drained; {
		select {
		case f := <-onA.Events():
			var got notify.Notification
			if json.Unmarshal(f.Data, &got); !shown[got.ID] {
				t.Fatalf("A's new stream got one not in its backlog: %s", f.Data)
			}
		default:
			drained = true
		}
	}
	for i := range 10 {
		e, err := a.bus.Emit(ctx, notify.Notification{Address: notify.AddressUser, UserID: "alice", Target: notify.TargetUser,
			Handler: notify.HandlerSystem, Title: "deploy finished"}, 0)
		if err != nil || e.State != notify.StateDispatched {
			t.Fatalf("emit %d with a stream on A: %+v %v", i, e, err)
		}
		for _, sub := range []*events.Sub{onA, alice} {
			select {
			case f := <-sub.Events():
				var got notify.Notification
				if json.Unmarshal(f.Data, &got); got.ID != e.ID {
					t.Fatalf("a stream got %s, want %s", f.Data, e.ID)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("notification %d did not reach both instances' streams", i)
			}
		}
	}
	select {
	case f := <-alice.Events():
		t.Fatalf("B's stream got one twice: %s", f.Data)
	case f := <-onA.Events():
		t.Fatalf("A's stream got one twice: %s", f.Data)
	case <-time.After(300 * time.Millisecond):
	}
}
