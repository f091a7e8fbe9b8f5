package events_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/events"
)

// memChain is a session's records in memory.
type memChain struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (c *memChain) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	seq := int64(len(c.recs) + 1)
	c.recs = append(c.recs, audit.Record{Session: "s", Seq: seq, Kind: "turn", Time: time.Unix(seq, 0).UTC()})
}

func (c *memChain) after(_ context.Context, _ string, after int64, limit int) ([]audit.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []audit.Record
	for _, r := range c.recs {
		if r.Seq > after && (limit <= 0 || len(out) < limit) {
			out = append(out, r)
		}
	}
	return out, nil
}

// gatedSink records what it is sent; while gate is set, Send waits for
// it to be closed (a client that stopped reading).
type gatedSink struct {
	mu   sync.Mutex
	got  []string
	gate chan struct{}
}

func (k *gatedSink) Send(_ context.Context, f events.Frame) error {
	k.mu.Lock()
	g := k.gate
	k.mu.Unlock()
	if g != nil {
		<-g
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = append(k.got, fmt.Sprint(f.Seq))
	return nil
}

func (k *gatedSink) Flush(context.Context) error     { return nil }
func (k *gatedSink) Heartbeat(context.Context) error { return nil }
func (k *gatedSink) Close(_ context.Context, c events.Closing) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	reason := c.Reason
	if strings.HasPrefix(reason, "too slow") {
		reason = "too slow"
	}
	k.got = append(k.got, fmt.Sprintf("closed: %s @%d final=%v", reason, c.LastEventID, c.Final))
	return nil
}

func (k *gatedSink) items() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.got)
}

// A client that falls behind loses its subscription (the hub's queue is
// bounded): the stream closes with the reason and the last id sent, for
// the client to resume from; with Resume (an MCP client, which cannot
// resume) the stream reads what it missed from the store and subscribes
// again, every event once, until the hub closes.
func TestStreamLostSubscription(t *testing.T) {
	for _, c := range []struct {
		name   string
		resume bool
		want   []string
	}{
		{"Closes", false, []string{"1", "2", "3", "4", "closed: too slow @4 final=false"}},
		{"Resumes", true, []string{"1", "2", "3", "4", "5", "6", "7", "closed: the hub closed @7 final=true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ch := &memChain{}
				hub := events.NewHub(func(ctx context.Context, s string, after int64) ([]audit.Record, error) {
					return ch.after(ctx, s, after, 0)
				}, &events.Options{Queue: 2})
				defer hub.Close("the test ended")
				ch.add()
				k := &gatedSink{}
				st := &events.Stream{Feed: &events.SessionFeed{Hub: hub, Read: ch.after, Session: "s"}, Sink: k, Resume: c.resume, Page: 2}
				ended := make(chan error, 1)
				go func() { ended <- st.Run(t.Context()) }()
				synctest.Wait()

				gate := make(chan struct{})
				k.mu.Lock()
				k.gate = gate
				k.mu.Unlock()
				ch.add()
				hub.Notify("s")
				synctest.Wait() // the stream waits to send 2
				for range 4 {
					ch.add()
				}
				hub.Notify("s") // 3 and 4 are queued; 5 does not fit: the subscription is dropped
				synctest.Wait()
				k.mu.Lock()
				k.gate = nil
				k.mu.Unlock()
				close(gate)
				synctest.Wait()
				if c.resume {
					ch.add()
					hub.Notify("s")
					synctest.Wait()
					hub.Close("the hub closed")
				}
				if err := <-ended; err != nil {
					t.Errorf("the stream ended with %v", err)
				}
				if got := k.items(); !slices.Equal(got, c.want) {
					t.Errorf("the client got %q, want %q", got, c.want)
				}
			})
		})
	}
}
