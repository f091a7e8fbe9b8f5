// Package events turns a session's audit chain into the event stream
// clients follow: every committed record is an Event whose id is the
// record's sequence number, so a client that lost its connection resumes
// after the last id it saw with no gap and no duplicate.
//
// A Hub fans a session's new events out to its subscribers. It is woken by
// Notify after a commit (in this process, or — through a listener — in
// another process sharing the database) and reads the new records from
// the store once per wake-up, whatever the number of subscribers; each
// event is encoded once and the same bytes go to every subscriber. A
// subscriber's queue is bounded: one that falls behind is closed with a
// reason and resumes from its last id.
//
// Stream is the one loop every front end follows a feed with (a session's
// events, a user's inbox, a workflow's journal) into its sink (SSE,
// WebSocket, MCP notifications): backlog, subscription, each sequence
// number once, heartbeat, and the closing frame when the feed closes.
//
//	hub := events.NewHub(st.Records, nil)
//	c, _ := core.New(ctx, src, &core.Options{Store: st, Observer: &core.Observer{Committed: hub.Committed}})
//	sub := hub.Subscribe(sessionID, lastSeen)
//	for f := range sub.Events() { … }
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
)

// Event is one committed change of a session: a session opened, a turn
// (its input, the router's decision and, when a command ran, its result),
// an execution (an intent or a tool call from any front end, with its
// result and state diff), or a resume. Snapshot is the state after it.
type Event struct {
	Seq       int64                       `json:"seq"`
	Kind      string                      `json:"kind"` // open | turn | execution | resume | llm | proposal
	Time      time.Time                   `json:"time"`
	Principal string                      `json:"principal,omitempty"`
	Input     *agentplane.TurnInput       `json:"input,omitempty"`
	Decision  *agentplane.Decision        `json:"decision,omitempty"`
	Intent    *agentplane.Intent          `json:"intent,omitempty"`
	Result    *agentplane.ExecutionResult `json:"result,omitempty"`
	Snapshot  *agentplane.StateSnapshot   `json:"snapshot,omitempty"`
	Notes     []string                    `json:"notes,omitempty"`
	LLM       *agentplane.LLMExchange     `json:"llm,omitempty"`
	Notice    *agentplane.Notice          `json:"notice,omitempty"`
}

// FromRecord is the event of an audit record.
func FromRecord(r *audit.Record) Event {
	e := Event{Seq: r.Seq, Kind: r.Kind, Time: r.Time, Principal: r.Principal, Input: r.Input, Decision: r.Decision,
		Intent: r.Intent, Result: r.Result, Notes: r.Notes, LLM: r.LLM, Notice: r.Notice}
	if r.State != nil {
		s := r.State.Snapshot(r.Time)
		e.Snapshot = &s
	}
	return e
}

// Frame is an encoded event: its sequence number, kind and JSON. A
// transient frame (Publish) has sequence number 0.
type Frame struct {
	Seq  int64
	Kind string
	Data []byte
}

// Encode returns the frame of a record.
func Encode(r *audit.Record) (Frame, error) {
	e := FromRecord(r)
	data, err := json.Marshal(&e)
	if err != nil {
		return Frame{}, fmt.Errorf("events: encode record %d of %s: %w", r.Seq, r.Session, err)
	}
	return Frame{Seq: r.Seq, Kind: r.Kind, Data: data}, nil
}

// Reader reads a session's records after a sequence number (store.Store's
// Records).
type Reader func(ctx context.Context, session string, after int64) ([]audit.Record, error)

// Options configure a Hub. nil means defaults.
type Options struct {
	// Queue is how many events a subscriber may have waiting; one that
	// has this many and is sent another is closed. 0 means 256.
	Queue  int
	Logger *slog.Logger // nil discards
}

// Hub fans sessions' events out to subscribers. It is safe for
// concurrent use.
type Hub struct {
	read   Reader
	queue  int
	log    *slog.Logger
	mu     sync.Mutex
	topics map[string]*topic
	closed string // why the hub closed; "" while open
	subs   int    // open subscriptions

	ctx    context.Context // the pumps' reads; cancelled by Close
	cancel context.CancelFunc
	pumps  sync.WaitGroup // the topics' pump goroutines, waited for by Close
}

// topic is one session's subscribers and its pump's state.
type topic struct {
	session string
	subs    map[*Sub]struct{}
	dirty   bool  // something was committed since the pump last read
	running bool  // a pump goroutine serves the topic
	seen    int64 // the last sequence number the pump read
}

// Sub is one subscription to a session's events.
type Sub struct {
	c      chan Frame
	done   chan struct{}
	reason string
	cursor int64 // the last event queued to it
	hub    *Hub
	topic  *topic
}

// NewHub returns a hub reading records with read.
func NewHub(read Reader, opts *Options) *Hub {
	h := &Hub{read: read, queue: 256, log: slog.New(slog.DiscardHandler), topics: map[string]*topic{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if opts != nil {
		if opts.Queue > 0 {
			h.queue = opts.Queue
		}
		if opts.Logger != nil {
			h.log = opts.Logger
		}
	}
	return h
}

// Committed is core.Observer.Committed: a commit appended seq to the
// session's chain.
func (h *Hub) Committed(session string, seq int64, _ time.Duration) { h.Notify(session) }

// Notify says that the session has new records; "" says any session may
// have (a notification listener reconnected). It does not block; with no
// subscribers to the session it does nothing.
func (h *Hub) Notify(session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if session == "" {
		for _, t := range h.topics {
			h.wake(t)
		}
		return
	}
	t := h.topics[session]
	if t == nil {
		return
	}
	h.wake(t)
}

// Heads returns the sequence number of the last record of each of the
// sessions (absent: none), in one read: how a poller learns which followed
// sessions another instance has written to.
type Heads func(ctx context.Context, sessions []string) (map[string]int64, error)

// Poll learns of other instances' commits every interval until ctx ends:
// one heads read for all followed sessions, and a wake-up of those that
// moved past what the hub has read. With heads nil every followed session
// is woken (one records read each).
func (h *Hub) Poll(ctx context.Context, every time.Duration, heads Heads) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if heads == nil {
			h.Notify("")
			continue
		}
		h.mu.Lock()
		seen := make(map[string]int64, len(h.topics))
		sessions := make([]string, 0, len(h.topics))
		for id, t := range h.topics {
			seen[id] = t.seen
			sessions = append(sessions, id)
		}
		h.mu.Unlock()
		if len(sessions) == 0 {
			continue
		}
		got, err := heads(ctx, sessions)
		if err != nil {
			h.log.Warn("event stream: poll the sessions' heads", "err", err)
			continue
		}
		for id, seq := range got {
			if seq > seen[id] {
				h.Notify(id)
			}
		}
	}
}

// wake marks t dirty and starts its pump; h.mu is held. A closed hub
// starts none: Close waits for those it started.
func (h *Hub) wake(t *topic) {
	t.dirty = true
	if !t.running && h.closed == "" {
		t.running = true
		h.pumps.Go(func() { h.pump(t) })
	}
}

// Subscribe follows the session's events after sequence number after.
// The caller has sent the client everything up to after (a client
// resuming from Last-Event-ID, or one that read the backlog itself); the
// hub queues every later event, including any committed before this call.
// On a closed hub the subscription is closed at once.
func (h *Hub) Subscribe(session string, after int64) *Sub {
	s := &Sub{c: make(chan Frame, h.queue), done: make(chan struct{}), cursor: after, hub: h}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != "" {
		s.reason = h.closed
		close(s.done)
		return s
	}
	t := h.topics[session]
	if t == nil {
		t = &topic{session: session, subs: map[*Sub]struct{}{}}
		h.topics[session] = t
	}
	s.topic = t
	t.subs[s] = struct{}{}
	h.subs++
	h.wake(t) // events committed between the caller's read and now
	return s
}

// Events returns the subscription's queue. It is never closed: wait on
// Done too.
func (s *Sub) Events() <-chan Frame { return s.c }

// Done is closed when the hub drops the subscription: it fell behind, or
// the hub closed. Events already queued may still be read.
func (s *Sub) Done() <-chan struct{} { return s.done }

// Reason says why Done was closed.
func (s *Sub) Reason() string {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.reason
}

// Final reports whether the hub has closed: subscribing again would end
// at once. With Done closed and Final false, the subscription was dropped
// (it fell behind, or a read failed) and may be taken again.
func (s *Sub) Final() bool {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.hub.closed != ""
}

// Close ends the subscription. It is safe to call more than once.
func (s *Sub) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.drop(s, "closed by the subscriber")
}

// drop removes s with a reason; h.mu is held.
func (h *Hub) drop(s *Sub, reason string) {
	if s.topic == nil {
		return
	}
	delete(s.topic.subs, s)
	if len(s.topic.subs) == 0 && !s.topic.running {
		delete(h.topics, s.topic.session)
	}
	s.topic = nil
	s.reason = reason
	close(s.done)
	h.subs--
}

// Publish sends a transient frame to a topic's subscribers now (a
// session's, or any other topic's: a user's inbox): no id, not stored, not
// resumable (a model's streamed text, which its recorded exchange makes
// whole). A subscriber whose queue is full is closed, as for events. It
// returns how many subscribers got it.
func (h *Hub) Publish(session, kind string, data []byte) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[session]
	if t == nil {
		return 0
	}
	f := Frame{Kind: kind, Data: data}
	sent := 0
	for s := range t.subs {
		select {
		case s.c <- f:
			sent++
		default:
			h.drop(s, fmt.Sprintf("too slow: %d events were waiting; resume after event %d", h.queue, s.cursor))
		}
	}
	return sent
}

// Subscribers returns how many subscriptions are open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subs
}

// Following reports whether a topic (a session, a user's inbox) has
// subscribers now.
func (h *Hub) Following(topic string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[topic]
	return t != nil && len(t.subs) > 0
}

// Followed returns the topics with subscribers now whose names begin
// with prefix (a user's inbox topics: notify.UserTopic).
func (h *Hub) Followed(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name, t := range h.topics {
		if len(t.subs) > 0 && strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

// Close drops every subscription with the reason (a server shutting
// down), refuses new ones, and returns once the hub's goroutines have
// ended (a store read in flight is cancelled). It is safe to call more
// than once, and concurrently: the first reason is kept.
func (h *Hub) Close(reason string) {
	if reason == "" {
		reason = "the event hub closed"
	}
	h.mu.Lock()
	if h.closed == "" {
		h.closed = reason
	}
	for _, t := range h.topics {
		for s := range t.subs {
			h.drop(s, h.closed)
		}
	}
	h.mu.Unlock()
	h.cancel()
	h.pumps.Wait()
}

// pump serves a topic while it is dirty: it reads the records after the
// furthest-behind subscriber's cursor, encodes each once and queues it to
// every subscriber that has not had it.
func (h *Hub) pump(t *topic) {
	for {
		h.mu.Lock()
		if !t.dirty || len(t.subs) == 0 {
			t.running = false
			if len(t.subs) == 0 && h.topics[t.session] == t {
				delete(h.topics, t.session)
			}
			h.mu.Unlock()
			return
		}
		t.dirty = false
		from := int64(-1)
		for s := range t.subs {
			if from < 0 || s.cursor < from {
				from = s.cursor
			}
		}
		h.mu.Unlock()

		recs, err := h.read(h.ctx, t.session, from)
		frames := make([]Frame, 0, len(recs))
		for i := range recs {
			if err != nil {
				break
			}
			var f Frame
			f, err = Encode(&recs[i])
			frames = append(frames, f)
		}
		if err != nil {
			if h.ctx.Err() == nil {
				h.log.Error("event stream: read the session's records", "session", t.session, "err", err)
			}
			h.mu.Lock()
			for s := range t.subs {
				h.drop(s, "the server could not read the session's events; resume from your last event id")
			}
			h.mu.Unlock()
			continue
		}
		h.mu.Lock()
		if n := len(frames); n > 0 && frames[n-1].Seq > t.seen {
			t.seen = frames[n-1].Seq
		}
		for s := range t.subs {
			h.deliver(s, frames)
		}
		h.mu.Unlock()
	}
}

// deliver queues the frames s has not had; h.mu is held.
func (h *Hub) deliver(s *Sub, frames []Frame) {
	for _, f := range frames {
		if f.Seq <= s.cursor {
			continue
		}
		select {
		case s.c <- f:
			s.cursor = f.Seq
		default:
			h.drop(s, fmt.Sprintf("too slow: %d events were waiting; resume after event %d", h.queue, s.cursor))
			return
		}
	}
}
