package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/workflow"
)

// TestStreamLoop walks every stream (a session's events, a user's inbox,
// a workflow's events) through every sink of the API (Server-Sent Events,
// WebSocket) on the one loop, events.Stream: the backlog then live items;
// an item the client has already, delivered once; a heartbeat when idle;
// the server draining, which ends the stream with what was committed up
// to the end and the closing frame; and a client that goes away, which
// ends the loop with no goroutine left (the bubble of synctest.Test fails
// on one left blocked, and the hub counts no subscriber). The feeds are
// the server's, over an in-memory chain, inbox and journal; time is
// synctest's, so the heartbeat comes without waiting for it.
func TestStreamLoop(t *testing.T) {
	const beat = 10 * time.Second
	feeds := []struct {
		name string
		open func() *feedFixture
	}{
		{"Session", openSessionFixture},
		{"Inbox", openInboxFixture},
		{"Workflow", openWorkflowFixture},
	}
	sinks := []struct {
		name string
		open func() *sinkFixture
	}{
		{"SSE", openSSEFixture},
		{"WebSocket", openWSFixture},
	}
	cases := []struct {
		name string
		// run acts on the running stream and returns the items the client
		// must have got, in order, after the backlog
		run func(t *testing.T, f *feedFixture, cancel context.CancelFunc) []string
		dup bool // the stream's subscription repeats what the backlog sent
		end error
	}{
		{name: "BacklogThenLive", run: func(t *testing.T, f *feedFixture, cancel context.CancelFunc) []string {
			a, b := f.live(), f.live()
			synctest.Wait()
			cancel()
			return []string{a, b}
		}, end: context.Canceled},
		{name: "DuplicateOnce", dup: true, run: func(t *testing.T, f *feedFixture, cancel context.CancelFunc) []string {
			f.repeat()
			a := f.live()
			synctest.Wait()
			cancel()
			return []string{a}
		}, end: context.Canceled},
		{name: "Heartbeat", run: func(t *testing.T, f *feedFixture, cancel context.CancelFunc) []string {
			time.Sleep(beat + time.Second) // the bubble's clock: it moves at once, when all else waits
			synctest.Wait()
			cancel()
			return []string{"heartbeat"}
		}, end: context.Canceled},
		{name: "DrainEndsWithClosing", run: func(t *testing.T, f *feedFixture, cancel context.CancelFunc) []string {
			a := f.live()
			synctest.Wait()
			return append([]string{a}, f.drain("shutting down")...)
		}},
		{name: "ClientGone", run: func(t *testing.T, f *feedFixture, cancel context.CancelFunc) []string {
			cancel()
			f.live() // after the client left: nobody gets it
			return nil
		}, end: context.Canceled},
	}
	for _, fd := range feeds {
		for _, sk := range sinks {
			for _, c := range cases {
				t.Run(fd.name+"/"+sk.name+"/"+c.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						f, k := fd.open(), sk.open()
						defer f.hub.Close("the test ended")
						feed := f.feed
						if c.dup {
							feed = f.dup
						}
						ctx, cancel := context.WithCancel(t.Context())
						defer cancel()
						st := &events.Stream{Feed: feed, Sink: k.sink, After: 0, Heartbeat: beat}
						ended := make(chan error, 1)
						go func() { ended <- st.Run(ctx) }()
						synctest.Wait()
						want := append(slices.Clone(f.backlog), c.run(t, f, cancel)...)
						err := <-ended
						if !errors.Is(err, c.end) {
							t.Errorf("the loop ended with %v, want %v", err, c.end)
						}
						if got := k.items(); !slices.Equal(got, want) {
							t.Errorf("the client got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
						}
						synctest.Wait()
						if n := f.hub.Subscribers(); n != 0 {
							t.Errorf("%d subscriptions left open after the loop", n)
						}
					})
				})
			}
		}
	}
}

// feedFixture is one stream's feed over in-memory data, and what a test
// does to it.
type feedFixture struct {
	hub     *events.Hub
	feed    events.Feed
	dup     events.Feed   // feed, whose subscription starts one item early (the last backlog item comes twice), or feed (repeat sends one)
	backlog []string      // the items the backlog sends, as the client sees them
	live    func() string // adds an item that comes live; returns it as the client sees it
	repeat  func()        // sends an item the client has had already
	// drain commits one more item without a signal and ends the feed as
	// the server's drain does; it returns what the client gets after that
	drain func(reason string) []string
}

// earlier is a feed whose subscriptions start one item before where the
// stream asks: the hub (or the journal reader) queues again the last
// item the backlog sent, as when a record is read from the store and
// queued by the hub both.
type earlier struct{ events.Feed }

func (e earlier) Subscribe(after int64) events.Subscription {
	return e.Feed.Subscribe(max(after-1, 0))
}

// chain is a session's records in memory.
type chain struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (c *chain) add() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	seq := int64(len(c.recs) + 1)
	c.recs = append(c.recs, audit.Record{Session: "s", Seq: seq, Kind: "turn", Time: time.Unix(seq, 0).UTC()})
	return seq
}

func (c *chain) after(_ context.Context, _ string, after int64, limit int) ([]audit.Record, error) {
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

func openSessionFixture() *feedFixture {
	c := &chain{}
	hub := events.NewHub(func(ctx context.Context, s string, after int64) ([]audit.Record, error) {
		return c.after(ctx, s, after, 0)
	}, nil)
	c.add()
	c.add()
	feed := &events.SessionFeed{Hub: hub, Read: c.after, Session: "s"}
	return &feedFixture{hub: hub, feed: feed, dup: earlier{feed}, backlog: []string{"event 1", "event 2"},
		live: func() string {
			seq := c.add()
			hub.Notify("s")
			return fmt.Sprintf("event %d", seq)
		},
		repeat: func() {}, // earlier's subscription repeats event 2
		drain: func(reason string) []string {
			seq := c.add() // committed after the hub's last wake-up: read from the store at the end
			hub.Close(reason)
			return []string{fmt.Sprintf("event %d", seq), fmt.Sprintf("closed: %s @%d", reason, seq)}
		}}
}

func openInboxFixture() *feedFixture {
	hub := events.NewHub(func(context.Context, string, int64) ([]audit.Record, error) { return nil, nil }, nil)
	topic := notify.UserTopic("u")
	note := func(id string) []byte { data, _ := json.Marshal(notify.Notification{ID: id, UserID: "u"}); return data }
	feed := &inboxFeed{sub: hub.Subscribe(topic, 0), shown: map[string]bool{}} // as openInbox makes it
	for _, id := range []string{"n1", "n2"} {
		feed.shown[id] = true
		feed.backlog = append(feed.backlog, events.Frame{Kind: "notification", Data: note(id)})
	}
	n := 2
	return &feedFixture{hub: hub, feed: feed, dup: feed, backlog: []string{"notification n1", "notification n2"},
		live: func() string {
			n++
			id := fmt.Sprintf("n%d", n)
			hub.Publish(topic, "notification", note(id))
			return "notification " + id
		},
		repeat: func() { hub.Publish(topic, "notification", note("n2")) }, // in the backlog already
		drain: func(reason string) []string {
			hub.Close(reason)
			return []string{fmt.Sprintf("closed: %s @0", reason)}
		}}
}

// fakeJournal is a workflow's events in memory.
type fakeJournal struct {
	mu      sync.Mutex
	evs     []json.RawMessage
	changed chan struct{}
}

func (j *fakeJournal) add(signal bool) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.evs = append(j.evs, json.RawMessage(fmt.Sprintf(`{"type":"task_completed","n":%d}`, len(j.evs)+1)))
	if signal {
		close(j.changed)
		j.changed = make(chan struct{})
	}
	return int64(len(j.evs))
}

func (j *fakeJournal) Events(_ context.Context, _ string, after int64, limit int) ([]json.RawMessage, []int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var raws []json.RawMessage
	var seqs []int64
	for i := after; i < int64(len(j.evs)) && len(raws) < limit; i++ {
		raws, seqs = append(raws, j.evs[i]), append(seqs, i+1)
	}
	return raws, seqs, nil
}

func (j *fakeJournal) Changes(string) <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.changed
}

func (j *fakeJournal) Poll() time.Duration { return time.Hour }

func openWorkflowFixture() *feedFixture {
	j := &fakeJournal{changed: make(chan struct{})}
	j.add(false)
	j.add(false)
	stop := make(chan struct{})
	why := ""
	feed := &workflowFeed{j: j, wf: &workflow.Workflow{ID: "w", Status: "running"}, stop: stop, why: &why, log: slog.New(slog.DiscardHandler)}
	return &feedFixture{
		hub:  events.NewHub(func(context.Context, string, int64) ([]audit.Record, error) { return nil, nil }, nil), // none: nothing to count
		feed: feed, dup: earlier{feed}, backlog: []string{"event 1", "event 2"},
		live:   func() string { return fmt.Sprintf("event %d", j.add(true)) },
		repeat: func() {},
		drain: func(reason string) []string {
			seq := j.add(false) // written, not signalled: read at the end
			why = reason
			close(stop)
			return []string{fmt.Sprintf("event %d", seq), fmt.Sprintf("closed: %s @%d", reason, seq)}
		}}
}

// sinkFixture is a sink of the API, writing where the test reads: items
// returns what the client got, one line an item.
type sinkFixture struct {
	sink  events.Sink
	items func() []string
}

// sseRecorder is a response the test reads while the stream writes it.
type sseRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
	h   http.Header
}

func (r *sseRecorder) Header() http.Header { return r.h }
func (r *sseRecorder) WriteHeader(int)     {}
func (r *sseRecorder) Flush()              {}
func (r *sseRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func openSSEFixture() *sinkFixture {
	w := &sseRecorder{h: http.Header{}}
	k := &sseSink{w: w, rc: http.NewResponseController(w)}
	return &sinkFixture{sink: k, items: func() []string {
		w.mu.Lock()
		defer w.mu.Unlock()
		var out []string
		for _, block := range strings.Split(w.buf.String(), "\n\n") {
			if block == "" {
				continue
			}
			if block == ": keep-alive" {
				out = append(out, "heartbeat")
				continue
			}
			f := map[string]string{}
			for _, line := range strings.Split(block, "\n") {
				k, v, _ := strings.Cut(line, ": ")
				f[k] = v
			}
			out = append(out, item(f["id"], f["event"], []byte(f["data"])))
		}
		return out
	}}
}

func openWSFixture() *sinkFixture {
	var mu sync.Mutex
	var out []string
	add := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, s)
	}
	k := &wsSink{heartbeat: 10 * time.Second, turns: &drainGroup{},
		write: func(m wsServer) error {
			data, err := json.Marshal(m) // as the connection's writer does
			if err != nil {
				return err
			}
			var got wsServer
			json.Unmarshal(data, &got)
			var last int64
			if got.LastEventID != nil {
				last = *got.LastEventID
			}
			switch got.Type {
			case "event":
				add(item(fmt.Sprint(got.ID), "", got.Event))
			case "closed":
				add(fmt.Sprintf("closed: %s @%d", got.Reason, last))
			default:
				add(item("", got.Type, got.Event))
			}
			return nil
		},
		ping:  func(context.Context) error { add("heartbeat"); return nil },
		close: func(websocket.StatusCode, string) error { return nil },
	}
	return &sinkFixture{sink: k, items: func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}}
}

// item is a frame as the tests compare it: "event SEQ", "notification
// ID" or "closed: REASON @LAST".
func item(id, kind string, data []byte) string {
	switch {
	case kind == "closed":
		var c Closing
		json.Unmarshal(data, &c)
		return fmt.Sprintf("closed: %s @%d", c.Reason, c.LastEventID)
	case id != "":
		return "event " + id
	case kind == "notification":
		var n struct{ ID string }
		json.Unmarshal(data, &n)
		return "notification " + n.ID
	}
	return "? " + kind + " " + string(data)
}

// A workflow stream ends with the workflow's last event, whether the
// backlog or the subscription reads it: a workflow still running when the
// request read it, whose end the backlog then sent, is over too.
func TestWorkflowStreamEndsWithItsLastEvent(t *testing.T) {
	for _, c := range []struct {
		name string
		live bool // the last event comes after the backlog
	}{{"InBacklog", false}, {"Live", true}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := &fakeJournal{changed: make(chan struct{})}
				j.add(false)
				end := func(signal bool) {
					j.mu.Lock()
					j.evs = append(j.evs, json.RawMessage(`{"type":"`+workflow.EventCompleted+`"}`))
					if signal {
						close(j.changed)
						j.changed = make(chan struct{})
					}
					j.mu.Unlock()
				}
				if !c.live {
					end(false)
				}
				why := ""
				k := openSSEFixture()
				feed := &workflowFeed{j: j, wf: &workflow.Workflow{ID: "w", Status: "running"}, stop: make(chan struct{}), why: &why, log: slog.New(slog.DiscardHandler)}
				st := &events.Stream{Feed: feed, Sink: k.sink, Heartbeat: time.Minute}
				ended := make(chan error, 1)
				go func() { ended <- st.Run(t.Context()) }()
				synctest.Wait()
				if c.live {
					end(true)
				}
				if err := <-ended; err != nil {
					t.Errorf("the stream ended with %v", err)
				}
				want := []string{"event 1", "event 2", "closed: the workflow has ended @2"}
				if got := k.items(); !slices.Equal(got, want) {
					t.Errorf("the client got %q, want %q", got, want)
				}
			})
		})
	}
}
