package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/workflow"
)

// The sinks and feeds of events.Stream, the one loop every stream of the
// API runs: sseSink and wsSink write; inboxFeed and workflowFeed read (a
// session's events are events.SessionFeed).

// writeTimeout bounds one write to a stream: a client that stops reading
// is cut when its socket buffers are full for this long.
const writeTimeout = 10 * time.Second

// sseSink writes a stream as Server-Sent Events: an item with a sequence
// number as "id: SEQ / event: KIND / data: JSON", one without as "event:
// KIND / data: JSON", the heartbeat as a comment and the closing frame as
// a "closed" event (a Closing). Every write has its own deadline.
type sseSink struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// openSSE starts a Server-Sent Events response — its headers and the
// client's reconnect delay — counted among the open streams until done
// is called.
func (s *Server) openSSE(w http.ResponseWriter) (sink *sseSink, done func()) {
	sink = &sseSink{w: w, rc: http.NewResponseController(w)}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sink.printf("retry: 1000\n\n")
	if s.metrics == nil {
		return sink, func() {}
	}
	g := s.metrics.streams.WithLabelValues("sse")
	g.Inc()
	return sink, g.Dec
}

func (k *sseSink) printf(format string, args ...any) error {
	k.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := fmt.Fprintf(k.w, format, args...)
	return err
}

func (k *sseSink) Send(_ context.Context, f events.Frame) error {
	if f.Seq == 0 { // transient, or an inbox's notification: no id
		return k.printf("event: %s\ndata: %s\n\n", f.Kind, f.Data)
	}
	return k.printf("id: %d\nevent: %s\ndata: %s\n\n", f.Seq, f.Kind, f.Data)
}

func (k *sseSink) Flush(context.Context) error { return k.rc.Flush() }

func (k *sseSink) Heartbeat(context.Context) error { return k.printf(": keep-alive\n\n") }

func (k *sseSink) Close(_ context.Context, c events.Closing) error {
	data, _ := json.Marshal(Closing{Reason: c.Reason, LastEventID: c.LastEventID})
	if err := k.printf("event: closed\ndata: %s\n\n", data); err != nil {
		return err
	}
	return k.rc.Flush()
}

// wsSink writes a stream on a WebSocket (see wsServer): an item with a
// sequence number as {"type":"event"}, one without as {"type":KIND}
// (a notification, a model's streamed text), the heartbeat as a ping, and
// the closing frame as {"type":"closed"} and the close status. Before
// the end it waits for the client's turn in flight (Settle), so what it
// commits is sent before the closing message.
type wsSink struct {
	write     func(wsServer) error
	ping      func(context.Context) error              // the connection's Ping
	close     func(websocket.StatusCode, string) error // the connection's Close
	heartbeat time.Duration
	turns     *drainGroup
}

func (k *wsSink) Send(_ context.Context, f events.Frame) error {
	if f.Seq == 0 {
		return k.write(wsServer{Type: f.Kind, Event: f.Data})
	}
	return k.write(wsServer{Type: "event", ID: f.Seq, Event: f.Data})
}

func (k *wsSink) Flush(context.Context) error { return nil }

// Heartbeat pings the client and fails when no pong comes within the
// heartbeat (and at least pongWait): a client that is gone, or that
// stalled in the middle of a frame — it cannot answer until the frame is
// whole. Browsers and WebSocket libraries answer pings by themselves.
func (k *wsSink) Heartbeat(ctx context.Context) error {
	pctx, done := context.WithTimeout(ctx, max(k.heartbeat, pongWait))
	defer done()
	return k.ping(pctx)
}

// pongWait is the least time a pong is waited for (a heartbeat set short
// for tests is not a deadline for a loaded machine).
const pongWait = 5 * time.Second

func (k *wsSink) Settle() { k.turns.wait() }

func (k *wsSink) Close(_ context.Context, c events.Closing) error {
	status := websocket.StatusTryAgainLater
	if c.Final {
		status = websocket.StatusGoingAway
	}
	last := c.LastEventID
	err := k.write(wsServer{Type: "closed", Reason: c.Reason, LastEventID: &last})
	k.close(status, truncate(c.Reason, 120))
	return err
}

// workflowFeed is a workflow's events as a feed: read from the engine's
// journal, after each change the engine signals (and every poll, for
// another instance's writes). Its subscription ends, final, once the
// workflow has ended and its last event was read, or when the server
// drains.
type workflowFeed struct {
	j    journal
	wf   *workflow.Workflow
	stop <-chan struct{} // closed when the server drains
	why  *string         // why it drains, read once stop is closed
	log  *slog.Logger
	// ended is set when the backlog held the workflow's last event (read
	// by the stream's goroutine only; the subscription's keeps its own)
	ended bool
}

// journal is what a workflow stream reads of the engine
// (*workflow.Engine).
type journal interface {
	// Events returns up to limit of the workflow's events after a
	// sequence number, with their sequence numbers.
	Events(ctx context.Context, id string, after int64, limit int) ([]json.RawMessage, []int64, error)
	// Changes returns a channel closed when the workflow next writes.
	Changes(id string) <-chan struct{}
	// Poll is how often a reader looks again without a change signalled.
	Poll() time.Duration
}

// Backlog reads the workflow's events after a sequence number, and notes
// whether they hold its end.
func (f *workflowFeed) Backlog(ctx context.Context, after int64, limit int) ([]events.Frame, error) {
	frames, err := f.read(ctx, after, limit)
	for _, fr := range frames {
		f.ended = f.ended || endsWorkflow(fr.Kind)
	}
	return frames, err
}

// read returns the workflow's events after a sequence number as frames
// (the kind: the event's type).
func (f *workflowFeed) read(ctx context.Context, after int64, limit int) ([]events.Frame, error) {
	raws, seqs, err := f.j.Events(ctx, f.wf.ID, after, limit)
	if err != nil {
		return nil, err
	}
	frames := make([]events.Frame, len(raws))
	for i, raw := range raws {
		var ev struct{ Type string }
		json.Unmarshal(raw, &ev)
		frames[i] = events.Frame{Seq: seqs[i], Kind: ev.Type, Data: raw}
	}
	return frames, nil
}

// endsWorkflow reports whether an event of this type is a workflow's last.
func endsWorkflow(kind string) bool {
	return kind == workflow.EventCompleted || kind == workflow.EventAborted || kind == workflow.EventFailed
}

// Subscribe starts the goroutine that reads the workflow's new events;
// Close stops it and waits for it.
func (f *workflowFeed) Subscribe(after int64) events.Subscription {
	ctx, cancel := context.WithCancel(context.Background())
	sub := &workflowSub{c: make(chan events.Frame, events.DefaultPage), done: make(chan struct{}), exited: make(chan struct{}), cancel: cancel}
	// the backlog held its end, or it had ended before after (a workflow
	// ends with its last event)
	ended := f.ended || workflow.Terminal(f.wf.Status) && f.wf.Seq <= after
	go sub.run(ctx, f, after, ended)
	return sub
}

// workflowSub is a workflow feed's subscription: its goroutine reads the
// new events and queues them until the workflow ends, the server drains,
// or Close.
type workflowSub struct {
	c      chan events.Frame
	done   chan struct{} // closed by run when the subscription ends
	reason string        // set before done is closed
	final  bool
	exited chan struct{} // closed when run returns
	cancel context.CancelFunc
}

func (w *workflowSub) run(ctx context.Context, f *workflowFeed, after int64, ended bool) {
	defer close(w.exited)
	end := func(reason string, final bool) {
		w.reason, w.final = reason, final
		close(w.done)
	}
	poll := time.NewTicker(f.j.Poll())
	defer poll.Stop()
	for {
		changed := f.j.Changes(f.wf.ID)
		frames, err := f.read(ctx, after, events.DefaultPage)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Error("workflow stream: read the events", "workflow", f.wf.ID, "err", err)
				end("the server could not read the workflow's events; resume from your last event id", false)
			}
			return
		}
		for _, fr := range frames {
			select {
			case w.c <- fr: // the queue is bounded: this waits for the stream to take it
			case <-ctx.Done():
				return
			}
			after = fr.Seq
			ended = ended || endsWorkflow(fr.Kind)
		}
		if len(frames) > 0 {
			continue
		}
		if ended { // and everything was read
			end("the workflow has ended", true)
			return
		}
		select {
		case <-changed:
		case <-poll.C:
		case <-f.stop:
			end(*f.why, true)
			return
		case <-ctx.Done():
			return
		}
	}
}

func (w *workflowSub) Events() <-chan events.Frame { return w.c }
func (w *workflowSub) Done() <-chan struct{}       { return w.done }

// Reason and Final are read once Done is closed (which orders them after
// run set them).
func (w *workflowSub) Reason() string { return w.reason }
func (w *workflowSub) Final() bool    { return w.final }

func (w *workflowSub) Close() {
	w.cancel()
	<-w.exited
}
