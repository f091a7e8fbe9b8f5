package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/coder/websocket"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/notify"
)

// resumePoint is where a stream starts: after Last-Event-ID, or the
// after query parameter, or the beginning.
func resumePoint(r *http.Request) (int64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		return seqParam(v, "Last-Event-ID")
	}
	return seqParam(r.URL.Query().Get("after"), "query parameter after")
}

// openStream starts a stream of the principal's session: the session,
// where it resumes, and the stream counted among the principal's (past
// the cap, refused) until release.
func (s *Server) openStream(r *http.Request, p auth.Principal) (sess *agentplane.Session, after int64, release func(), err error) {
	if sess, err = s.owned(r, p); err != nil {
		return nil, 0, nil, err
	}
	if after, err = resumePoint(r); err != nil {
		return nil, 0, nil, err
	}
	if release, err = s.limits.holdStream(p); err != nil {
		return nil, 0, nil, err
	}
	return sess, after, release, nil
}

// records reads a page of the session's records for its stream's
// backlog; a failure is logged (the stream ends, and the client resumes
// from its last id).
func (s *Server) records(ctx context.Context, session string, after int64, limit int) ([]audit.Record, error) {
	recs, err := s.core.RecordsAfter(ctx, session, after, limit)
	if err != nil && ctx.Err() == nil {
		s.log.Error("event stream: read the backlog", "session", session, "err", err)
	}
	return recs, err
}

// boolParam reads a query parameter that is true, false or absent
// (false).
func boolParam(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, invalid("query parameter %s=%q: want true or false", name, truncate(v, 20))
	}
}

// limitParam reads the limit query parameter: a number from 1 to most,
// or def when absent.
func limitParam(r *http.Request, def, most int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, invalid("query parameter limit=%q: want a number from 1 to %d", truncate(v, 20), most)
	}
	return n, nil
}

// Closing is the last event of a stream the server ends: why, and the
// last event id sent, to resume after.
type Closing struct {
	Reason      string `json:"reason"`
	LastEventID int64  `json:"last_event_id"`
}

// getEvents serves the session's events as Server-Sent Events: id is the
// event's seq, event its kind, data its JSON. It starts after
// Last-Event-ID (or ?after=), sends the backlog from the store, then
// follows new events; a keep-alive comment goes out when idle. When the
// server drains, or the client falls too far behind, a final "closed"
// event says why and where to resume. With ?inbox=true the principal's
// inbox comes on the same stream, as on /v1/inbox/events ("notification"
// events, without ids): one connection per page, where browsers allow
// six per server.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	withInbox, err := boolParam(r, "inbox")
	if err != nil {
		return err
	}
	withInbox = withInbox && s.bus != nil
	sess, after, release, err := s.openStream(r, p)
	if err != nil {
		return err
	}
	defer release()
	st := &events.Stream{Feed: &events.SessionFeed{Hub: s.hub, Read: s.records, Session: sess.ID}, After: after, Heartbeat: s.heartbeat}
	if withInbox {
		feed, err := s.openInbox(r.Context(), p)
		if err != nil {
			return err
		}
		defer feed.sub.Close()
		st.Also = feed
	}
	sink, done := s.openSSE(w)
	defer done()
	st.Sink = sink
	st.Run(r.Context()) // the stream is open: whatever ended it, the client resumes from its last id
	return nil
}

// The WebSocket protocol: JSON text messages.
//
// Server to client:
//
//	{"type": "event", "id": SEQ, "event": EVENT}            every event, as on the SSE stream
//	{"type": "turn", "request_id": ID, "answer": TURN}       the answer to a client's turn
//	{"type": "acked", "id": SEQ}                             an ack was recorded (or "notification_id")
//	{"type": "notification", "event": NOTIFICATION}          the principal's inbox: undelivered first, then new ones
//	{"type": "error", "request_id": ID, "error": {code, message}}
//	{"type": "closed", "reason": ..., "last_event_id": SEQ}  the server ends the stream
//
// Client to server:
//
//	{"type": "turn", "request_id"?: ID, "text"?: ..., "selection"?: {...}, "ui"?: bool}
//	{"type": "ack", "id": SEQ}                               the client has shown event SEQ (a notice: delivered)
//	{"type": "ack", "notification_id": ID}                   the client has shown an inbox notification
type wsClient struct {
	Type      string                `json:"type"`
	RequestID string                `json:"request_id,omitempty"`
	Text      string                `json:"text,omitempty"`
	Selection *agentplane.Selection `json:"selection,omitempty"`
	UI        *bool                 `json:"ui,omitempty"`
	ID        int64                 `json:"id,omitempty"`
	// NotificationID acks an inbox notification (instead of an event id)
	NotificationID string `json:"notification_id,omitempty"`
}

type wsServer struct {
	Type           string          `json:"type"`
	ID             int64           `json:"id,omitempty"`
	RequestID      string          `json:"request_id,omitempty"`
	Event          json.RawMessage `json:"event,omitempty"`
	Answer         *TurnAnswer     `json:"answer,omitempty"`
	Error          *ErrorDetail    `json:"error,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	LastEventID    *int64          `json:"last_event_id,omitempty"`
	NotificationID string          `json:"notification_id,omitempty"`
}

// wsReadLimit bounds one client message.
const wsReadLimit = 64 << 10

// getWebSocket serves the session's events over a WebSocket, with the
// client's turns and acks coming the other way; see wsClient and
// wsServer. It resumes after ?after= like the SSE stream.
func (s *Server) getWebSocket(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sess, after, release, err := s.openStream(r, p)
	if err != nil {
		return err
	}
	defer release()
	if !s.hijacked.begin() { // Wait has begun: no new connection it cannot see
		return agentplane.Errorf(agentplane.CodeUnavailable, "the server is shutting down; connect to another instance or again after it restarts")
	}
	defer s.hijacked.done()
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept answered the request
	}
	var wg sync.WaitGroup // the reader: waited for once the connection is closed
	defer wg.Wait()
	defer conn.CloseNow()
	conn.SetReadLimit(wsReadLimit)
	if s.metrics != nil {
		g := s.metrics.streams.WithLabelValues("websocket")
		g.Inc()
		defer g.Dec()
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var mu sync.Mutex // one writer at a time keeps each message whole and events in order
	write := func(m wsServer) error {
		data, err := json.Marshal(m)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		wctx, done := context.WithTimeout(ctx, writeTimeout)
		defer done()
		return conn.Write(wctx, websocket.MessageText, data)
	}
	var turns drainGroup // the client's turns: one read before the end is answered before it
	st := &events.Stream{Feed: &events.SessionFeed{Hub: s.hub, Read: s.records, Session: sess.ID}, After: after, Heartbeat: s.heartbeat,
		Sink: &wsSink{write: write, ping: conn.Ping, close: conn.Close, heartbeat: s.heartbeat, turns: &turns}}
	// the principal's inbox (channel A) rides along: what is not delivered
	// yet, then each new one
	if s.bus != nil {
		if feed, err := s.openInbox(ctx, p); err == nil {
			defer feed.sub.Close()
			st.Also = feed
		}
	}
	wg.Go(func() { s.wsRead(ctx, cancel, conn, sess, p, write, &turns) })
	st.Run(ctx) // its end (the closing message, the client gone, the pings unanswered) closes the connection
	return nil
}

// drainGroup counts work that may begin until wait is called: wait
// refuses new work and returns once what began has ended. The zero value
// is ready.
type drainGroup struct {
	mu       sync.Mutex
	draining bool
	running  int
	idle     chan struct{} // closed once draining with nothing running
}

// begin reports whether the work may begin (then the caller calls done
// when it ends); false once wait was called.
func (g *drainGroup) begin() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return false
	}
	g.running++
	return true
}

// done ends work begin let begin.
func (g *drainGroup) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	if g.draining && g.running == 0 {
		close(g.idle)
	}
}

// drained refuses new work and returns a channel closed once what began
// has ended.
func (g *drainGroup) drained() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.draining {
		g.draining = true
		g.idle = make(chan struct{})
		if g.running == 0 {
			close(g.idle)
		}
	}
	return g.idle
}

// wait refuses new work and waits for what began.
func (g *drainGroup) wait() { <-g.drained() }

// wsRead reads the client's messages until the connection ends: turns run
// one at a time, in order; acks are answered.
// A turn read once the stream ends (turns.wait) is refused as
// unavailable, not run.
func (s *Server) wsRead(ctx context.Context, cancel context.CancelFunc, conn *websocket.Conn, sess *agentplane.Session, p auth.Principal, write func(wsServer) error, turns *drainGroup) {
	defer cancel()
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			write(wsServer{Type: "error", Error: &ErrorDetail{Code: agentplane.CodeInvalidInput, Message: "send JSON text messages"}})
			continue
		}
		var m wsClient
		err = decodeJSON(data, "the message", &m)
		if err == nil {
			err = checkRequestID("field \"request_id\"", m.RequestID)
		}
		if err != nil { // the same refusals as an HTTP body's
			write(wsServer{Type: "error", Error: &ErrorDetail{Code: agentplane.ErrorCode(err), Message: agentplane.ErrorMessage(err)}})
			continue
		}
		switch m.Type {
		case "turn":
			if !turns.begin() {
				write(wsServer{Type: "error", RequestID: m.RequestID, Error: &ErrorDetail{Code: agentplane.CodeUnavailable,
					Message: "the stream is closing: the turn was not run; send it again after reconnecting"}})
				continue
			}
			ok := s.wsTurn(ctx, sess, p, m, write)
			turns.done() // answered: the closing message may follow
			if !ok {
				return
			}
		case "ack":
			if m.NotificationID != "" && s.bus != nil { // an inbox notification
				if err := s.bus.Ledger().Acknowledge(ctx, m.NotificationID, p.ID); err != nil {
					err = notify.Describe(err)
					write(wsServer{Type: "error", Error: &ErrorDetail{Code: agentplane.ErrorCode(err), Message: agentplane.ErrorMessage(err)}})
					continue
				}
				write(wsServer{Type: "acked", NotificationID: m.NotificationID})
				continue
			}
			if m.ID <= 0 {
				write(wsServer{Type: "error", Error: &ErrorDetail{Code: agentplane.CodeInvalidInput, Message: "an ack needs the id of an event (a positive integer)"}})
				continue
			}
			if err := s.ackEvent(ctx, sess.ID, p, m.ID); err != nil {
				write(wsServer{Type: "error", Error: &ErrorDetail{Code: agentplane.ErrorCode(err), Message: agentplane.ErrorMessage(err)}})
				continue
			}
			write(wsServer{Type: "acked", ID: m.ID})
		default:
			write(wsServer{Type: "error", RequestID: m.RequestID, Error: &ErrorDetail{Code: agentplane.CodeInvalidInput,
				Message: "message type " + strconv.Quote(truncate(m.Type, 40)) + ": want turn or ack"}})
		}
	}
}

// wsTurn runs a client's turn and answers it; false when the connection
// is gone (the reader stops).
func (s *Server) wsTurn(ctx context.Context, sess *agentplane.Session, p auth.Principal, m wsClient, write func(wsServer) error) bool {
	t, err := s.turn(ctx, sess, p, TurnBody{Text: m.Text, Selection: m.Selection, UI: m.UI}, m.RequestID)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return false
		}
		code := agentplane.ErrorCode(err)
		if code == agentplane.CodeInternal {
			s.log.Error("websocket turn failed", "session", sess.ID, "err", err)
		}
		return write(wsServer{Type: "error", RequestID: m.RequestID, Error: &ErrorDetail{Code: code, Message: agentplane.ErrorMessage(err)}}) == nil
	}
	return write(wsServer{Type: "turn", RequestID: m.RequestID, Answer: &t}) == nil
}

// ackEvent acknowledges an event the client has shown: a notice (a
// notification on the floor) becomes DELIVERED; other events need no ack.
func (s *Server) ackEvent(ctx context.Context, session string, p auth.Principal, seq int64) error {
	if s.bus == nil {
		return nil
	}
	recs, err := s.core.RecordsAfter(ctx, session, seq-1, 1) // one record, however long the chain
	if err != nil {
		return err
	}
	if len(recs) == 0 || recs[0].Seq != seq {
		return agentplane.Errorf(agentplane.CodeNotFound, "no event %d in this session", seq)
	}
	if n := recs[0].Notice; n != nil {
		if err := s.bus.Ledger().Acknowledge(ctx, n.ID, p.ID); err != nil {
			return notify.Describe(err)
		}
	}
	return nil
}
