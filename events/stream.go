package events

import (
	"context"
	"time"

	"github.com/agentplane/agentplane/audit"
)

// The one stream loop every front end follows a feed with: the session's
// SSE stream and WebSocket, the inbox stream, the workflow stream and
// MCP's resource subscriptions. Each supplies a Feed (where the items come
// from) and a Sink (how they are written); the loop does the rest, the
// same way for all:
//
//   - the backlog first, a page at a time, then the live items, each item
//     with a sequence number sent once (a duplicate or an older one is
//     dropped; items without one — transient frames — pass);
//   - a heartbeat when idle (Stream.Heartbeat);
//   - when the feed's subscription ends because the feed closed (the
//     server drains, the workflow ended): what was queued, then the
//     backlog once more (what was committed after the end), then the
//     closing frame with the reason and the last sequence number sent;
//   - when it ends for another reason (the client fell too far behind):
//     what was queued, then the closing frame, so the client resumes
//     from the id it names — or, with Stream.Resume (a client that cannot
//     resume by itself), the backlog from the last item and a new
//     subscription;
//   - when the client goes away or ctx ends, nothing more: the loop
//     returns and leaves no goroutine behind.

// Feed is what a stream follows: a backlog read a page at a time, then
// live items. Its methods are called from the stream's goroutine only.
type Feed interface {
	// Backlog returns up to limit items after sequence number after,
	// oldest first; fewer than limit when there are no more now.
	Backlog(ctx context.Context, after int64, limit int) ([]Frame, error)
	// Subscribe returns the live items after sequence number after.
	Subscribe(after int64) Subscription
}

// Subscription is a feed's live items. *Sub is one.
type Subscription interface {
	// Events is the queue of items; it is never closed: wait on Done too.
	Events() <-chan Frame
	// Done is closed when the subscription ends; items already queued
	// may still be read.
	Done() <-chan struct{}
	// Reason says why Done was closed.
	Reason() string
	// Final reports, once Done is closed, whether the feed itself closed
	// (subscribing again would end at once): the server drains, the
	// workflow ended.
	Final() bool
	// Close ends the subscription; it is safe to call more than once.
	Close()
}

// Fresh is what a Feed whose items carry no sequence number may add: it
// reports whether a live item was not sent with the backlog already (an
// inbox's notifications, keyed by their id).
type Fresh interface {
	Fresh(Frame) bool
}

// Closing is a stream's last frame: why it ends, and the last sequence
// number sent, to resume after. Final says the feed closed (the server
// drains, or what it follows ended), not the client's own lag.
type Closing struct {
	Reason      string
	LastEventID int64
	Final       bool
}

// Sink is where a stream writes: an SSE response, a WebSocket, an MCP
// client's notifications. Its methods are called from the stream's
// goroutine only; an error ends the stream (the client is gone or stalled).
type Sink interface {
	// Send writes one item.
	Send(ctx context.Context, f Frame) error
	// Flush ends a batch of items: what Send wrote goes out.
	Flush(ctx context.Context) error
	// Heartbeat shows an idle client that the stream lives.
	Heartbeat(ctx context.Context) error
	// Close writes the closing frame; the stream then ends.
	Close(ctx context.Context, c Closing) error
}

// Settler is what a Sink may add: Settle is called once the feed's
// subscription has ended, before the rest is sent and the closing frame
// written — work that may still commit items (a WebSocket's turn in
// flight) ends first, so they are sent before the closing frame.
type Settler interface {
	Settle()
}

// DefaultPage is how many items a stream reads of its backlog at a time.
const DefaultPage = 64

// Stream follows a feed into a sink. Fill the fields and call Run once.
type Stream struct {
	Feed Feed
	Sink Sink
	// Also is a second feed on the same stream (a session's stream
	// carrying its user's inbox), nil for none: its backlog follows the
	// main one's, its items come as they come, its sequence numbers are
	// its own, and its subscription ending ends the stream as the main
	// one's does.
	Also Feed
	// After is where the main feed resumes: its last item the client has.
	After int64
	// Page is how many backlog items are read at a time; 0 means
	// DefaultPage.
	Page int
	// Heartbeat is how often an idle stream gets a heartbeat; 0 means
	// never.
	Heartbeat time.Duration
	// Resume catches up and subscribes again when a subscription ends for
	// another reason than its feed closing, instead of closing the stream:
	// for a client that cannot resume by itself.
	Resume bool
}

// follower is one feed of a running stream.
type follower struct {
	feed Feed
	last int64
	sub  Subscription
}

// Run follows the feeds until the stream ends: the closing frame was
// written (nil), the client is gone or stalled (the sink's error), a
// backlog could not be read (its error), or ctx ended (ctx's error).
func (s *Stream) Run(ctx context.Context) error {
	page := s.Page
	if page <= 0 {
		page = DefaultPage
	}
	main := &follower{feed: s.Feed, last: s.After}
	fs := []*follower{main}
	if s.Also != nil {
		fs = append(fs, &follower{feed: s.Also})
	}
	defer func() {
		for _, f := range fs {
			if f.sub != nil {
				f.sub.Close()
			}
		}
	}()
	for _, f := range fs {
		if err := s.backlog(ctx, f, page); err != nil {
			return err
		}
		f.sub = f.feed.Subscribe(f.last)
	}
	if err := s.Sink.Flush(ctx); err != nil {
		return err
	}
	var beat <-chan time.Time
	if s.Heartbeat > 0 {
		t := time.NewTicker(s.Heartbeat)
		defer t.Stop()
		beat = t.C
	}
	// a nil channel (no second feed) is never ready
	var alsoEvents <-chan Frame
	var alsoDone <-chan struct{}
	for {
		if len(fs) > 1 {
			alsoEvents, alsoDone = fs[1].sub.Events(), fs[1].sub.Done()
		}
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case fr := <-main.sub.Events():
			err = s.batch(ctx, main, fr)
		case fr := <-alsoEvents:
			err = s.batch(ctx, fs[1], fr)
		case <-main.sub.Done():
			var done bool
			if done, err = s.ended(ctx, fs, main, page); done {
				return err
			}
		case <-alsoDone:
			var done bool
			if done, err = s.ended(ctx, fs, fs[1], page); done {
				return err
			}
		case <-beat:
			if err = s.Sink.Heartbeat(ctx); err == nil {
				err = s.Sink.Flush(ctx)
			}
		}
		if err != nil {
			return err
		}
	}
}

// send writes an item the client has not had: a live one (from the
// subscription) without a sequence number is asked of the feed's Fresh.
func (s *Stream) send(ctx context.Context, f *follower, fr Frame, live bool) error {
	if fr.Seq > 0 {
		if fr.Seq <= f.last {
			return nil // read from the backlog and queued by the subscription both
		}
		f.last = fr.Seq
	} else if fresh, ok := f.feed.(Fresh); ok && live && !fresh.Fresh(fr) {
		return nil
	}
	return s.Sink.Send(ctx, fr)
}

// batch writes an item and what else is queued now on its subscription,
// then flushes them.
func (s *Stream) batch(ctx context.Context, f *follower, fr Frame) error {
	if err := s.send(ctx, f, fr, true); err != nil {
		return err
	}
	for n := cap(f.sub.Events()); n > 0; n-- { // bounded: a busy feed still lets the loop look at the others
		select {
		case fr := <-f.sub.Events():
			if err := s.send(ctx, f, fr, true); err != nil {
				return err
			}
		default:
			return s.Sink.Flush(ctx)
		}
	}
	return s.Sink.Flush(ctx)
}

// backlog writes the feed's backlog after its last item, a page at a
// time.
func (s *Stream) backlog(ctx context.Context, f *follower, page int) error {
	for {
		items, err := f.feed.Backlog(ctx, f.last, page)
		if err != nil {
			return err
		}
		for _, fr := range items {
			if err := s.send(ctx, f, fr, false); err != nil {
				return err
			}
		}
		if len(items) < page {
			return nil
		}
	}
}

// drain writes what the subscription has queued.
func (s *Stream) drain(ctx context.Context, f *follower) error {
	for {
		select {
		case fr := <-f.sub.Events():
			if err := s.send(ctx, f, fr, true); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// ended handles the end of f's subscription: it reports whether the
// stream ends (then with the error to return), or goes on subscribed
// again (Resume).
func (s *Stream) ended(ctx context.Context, fs []*follower, f *follower, page int) (bool, error) {
	final := f.sub.Final()
	if s.Resume && !final {
		if err := s.drain(ctx, f); err != nil {
			return true, err
		}
		f.sub.Close()
		if err := s.backlog(ctx, f, page); err != nil {
			return true, err
		}
		f.sub = f.feed.Subscribe(f.last)
		return false, s.Sink.Flush(ctx)
	}
	if st, ok := s.Sink.(Settler); ok {
		st.Settle()
	}
	for _, f := range fs {
		if err := s.drain(ctx, f); err != nil {
			return true, err
		}
	}
	if final {
		// what was committed after the feed closed and before the last
		// writer stopped: read where it was written
		for _, f := range fs {
			if err := s.backlog(ctx, f, page); err != nil {
				return true, err
			}
		}
	}
	reason := f.sub.Reason()
	if err := s.Sink.Close(ctx, Closing{Reason: reason, LastEventID: fs[0].last, Final: final}); err != nil {
		return true, err
	}
	return true, nil
}

// Records reads up to limit of a session's records after a sequence
// number (store.Store's RecordsAfter).
type Records func(ctx context.Context, session string, after int64, limit int) ([]audit.Record, error)

// SessionFeed is a session's events as a Feed: the backlog read from the
// store, the live events from the hub.
type SessionFeed struct {
	Hub     *Hub
	Read    Records
	Session string
}

// Backlog reads and encodes the session's records after a sequence
// number.
func (f *SessionFeed) Backlog(ctx context.Context, after int64, limit int) ([]Frame, error) {
	recs, err := f.Read(ctx, f.Session, after, limit)
	if err != nil {
		return nil, err
	}
	frames := make([]Frame, len(recs))
	for i := range recs {
		if frames[i], err = Encode(&recs[i]); err != nil {
			return nil, err
		}
	}
	return frames, nil
}

// Subscribe follows the session on the hub.
func (f *SessionFeed) Subscribe(after int64) Subscription { return f.Hub.Subscribe(f.Session, after) }
