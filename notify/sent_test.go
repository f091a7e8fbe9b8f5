package notify_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentplane/agentplane/notify"
)

// What the bus remembers of the notifications it sent to this instance's
// streams stays bounded on SQLite, where Follow (which used to prune it)
// does not run: a write forgets those older than a while, and the oldest
// beyond the bound. Each is sent to the stream once.
func TestSentIsBounded(t *testing.T) {
	ctx := t.Context()
	e := newBus(t)
	notify.SetSentMax(e.bus, 50)
	sub := e.hub.Subscribe(notify.UserTopic("alice"), 0)
	defer sub.Close()
	emit := func(i int) {
		t.Helper()
		e.clk.add(time.Millisecond) // an order the inbox page keeps
		n, err := e.bus.Emit(ctx, inbox("alice", fmt.Sprint("note ", i)), 0)
		if err != nil || n.State != notify.StateDispatched {
			t.Fatalf("emit %d with a stream open: %+v %v", i, n, err)
		}
		select { // published before Emit returned
		case <-sub.Events():
		default:
			t.Fatalf("notification %d did not reach the stream", i)
		}
	}
	for i := range 500 {
		emit(i)
		if n := notify.SentSize(e.bus); n > 50 {
			t.Fatalf("after %d emitted: %d remembered, bound 50", i+1, n)
		}
	}
	if n := notify.SentSize(e.bus); n != 50 {
		t.Fatalf("%d remembered after 500, want the last 50", n)
	}
	// an inbox page of the last 20: remembered already, nothing added
	if page, _, err := e.bus.Inbox(ctx, "alice", 20); err != nil || len(page) != 20 {
		t.Fatalf("inbox: %d, %v", len(page), err)
	}
	if n := notify.SentSize(e.bus); n != 50 {
		t.Fatalf("%d remembered after the inbox page, want 50", n)
	}
	// a while later, the next write forgets all but itself
	e.clk.add(31 * time.Second)
	emit(500)
	if n := notify.SentSize(e.bus); n != 1 {
		t.Fatalf("%d remembered 31 s later, want 1", n)
	}
	select {
	case f := <-sub.Events():
		t.Fatalf("a notification was sent twice: %s", f.Data)
	default:
	}
}
