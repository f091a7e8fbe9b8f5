package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/notify"
)

// ProducerRole is the role that may emit notifications for any user;
// others emit only for themselves.
const ProducerRole = "producer"

// NotificationBody is the body of POST /v1/notifications: the seed's
// fields, its upper-case axes.
type NotificationBody struct {
	Address           notify.Address  `json:"address"`
	UserID            string          `json:"user_id,omitempty"` // the caller when absent
	SessionID         string          `json:"session_id,omitempty"`
	Target            notify.Target   `json:"target"`
	Handler           notify.Handler  `json:"handler"`
	Title             string          `json:"title"`
	Body              string          `json:"body,omitempty"`
	Payload           json.RawMessage `json:"payload,omitempty"`
	DedupKey          string          `json:"deduplication_key,omitempty"`
	AgentInstructions *struct {
		Directive string `json:"directive"`
	} `json:"agent_instructions,omitempty"`
	TTLSeconds int            `json:"ttl_seconds,omitempty"`
	Urgency    notify.Urgency `json:"urgency,omitempty"`
	// OwnerLease is presented by a dedup update of a notification that is
	// LOCKED or ESCALATED (its current owner_lease).
	OwnerLease int64 `json:"owner_lease,omitempty"`
}

// NotificationCreated answers POST /v1/notifications.
type NotificationCreated struct {
	ID           string         `json:"id"`
	Channel      notify.Channel `json:"channel"`
	State        notify.State   `json:"state"`
	Seq          int64          `json:"seq"`
	Deduplicated bool           `json:"deduplicated,omitempty"`
}

// Inbox answers GET /v1/inbox.
type Inbox struct {
	Notifications []notify.Notification `json:"notifications"`
	Unread        int                   `json:"unread"`
}

func (s *Server) postNotification(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var body NotificationBody
	if err := decode(r, &body, false); err != nil {
		return err
	}
	if body.UserID == "" {
		body.UserID = p.ID
	}
	if body.UserID != p.ID && !slices.Contains(p.Roles, ProducerRole) {
		return withStatus(http.StatusForbidden, agentplane.CodeInactiveAction, "user_id %q: only a principal with the %s role emits for another user", truncate(body.UserID, 60), ProducerRole)
	}
	n := notify.Notification{Address: body.Address, UserID: body.UserID, SessionID: body.SessionID, Target: body.Target, Handler: body.Handler,
		Title: body.Title, Body: body.Body, Payload: body.Payload, DedupKey: body.DedupKey, TTLSeconds: body.TTLSeconds, Urgency: body.Urgency}
	if body.AgentInstructions != nil {
		n.Directive = body.AgentInstructions.Directive
	}
	e, err := s.bus.Emit(r.Context(), n, body.OwnerLease)
	if err != nil {
		return notify.Describe(err)
	}
	status := http.StatusCreated
	if e.Deduplicated {
		status = http.StatusOK
	}
	w.Header().Set("Location", "/v1/notifications/"+e.ID)
	writeJSON(w, status, NotificationCreated{ID: e.ID, Channel: e.Channel, State: e.State, Seq: e.Seq, Deduplicated: e.Deduplicated})
	return nil
}

// mine returns the principal's notification named in the path.
func (s *Server) mine(r *http.Request, p auth.Principal) (notify.Notification, error) {
	n, err := s.bus.Ledger().Get(r.Context(), r.PathValue("id"))
	if err == nil && n.UserID != p.ID {
		err = fmt.Errorf("%w: %q", notify.ErrNotFound, r.PathValue("id"))
	}
	return n, notify.Describe(err)
}

func (s *Server) getNotification(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	n, err := s.mine(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

func (s *Server) ackNotification(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := decode(r, &struct{}{}, true); err != nil { // nothing, or {}
		return err
	}
	n, err := s.bus.Ledger().Ack(r.Context(), r.PathValue("id"), p.ID)
	if err != nil {
		return notify.Describe(err)
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

// getInbox lists a page of the principal's inbox, newest first, with how
// many are not delivered yet. It only reads: a GET changes nothing (a
// page of another site could make a browser send one). The client
// acknowledges what it showed with POST /v1/notifications/{id}/ack,
// which delivers a notification whatever state it was left in.
func (s *Server) getInbox(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	limit, err := limitParam(r, 50, 500)
	if err != nil {
		return err
	}
	list, err := s.bus.Ledger().List(r.Context(), notify.Query{UserID: p.ID, Channel: notify.ChannelInbox, Limit: limit})
	if err != nil {
		return err
	}
	unread, err := s.bus.Ledger().Unread(r.Context(), p.ID)
	if err != nil {
		return err
	}
	if list == nil {
		list = []notify.Notification{}
	}
	writeJSON(w, http.StatusOK, Inbox{Notifications: list, Unread: unread})
	return nil
}

// inboxFeed is the principal's inbox as a feed: the notifications not
// yet delivered (the PENDING ones become DISPATCHED), oldest first, as its
// backlog, then each new one from sub. The subscription starts before the
// backlog is read, so nothing emitted meanwhile is missed; Fresh drops a
// new one already in the backlog. Notifications carry no sequence number
// on the stream: a client that reconnects gets what is still undelivered.
type inboxFeed struct {
	sub     *events.Sub
	backlog []events.Frame // until the stream has read it
	shown   map[string]bool
}

func (s *Server) openInbox(ctx context.Context, p auth.Principal) (*inboxFeed, error) {
	sub := s.hub.Subscribe(notify.UserTopic(p.ID), 0)
	list, _, err := s.bus.Inbox(ctx, p.ID, 500)
	if err != nil {
		sub.Close()
		return nil, err
	}
	f := &inboxFeed{sub: sub, shown: map[string]bool{}}
	for i := len(list) - 1; i >= 0; i-- { // oldest first
		if n := list[i]; !n.State.Terminal() {
			data, _ := json.Marshal(n)
			f.shown[n.ID] = true
			f.backlog = append(f.backlog, events.Frame{Kind: "notification", Data: data})
		}
	}
	return f, nil
}

// Backlog returns the undelivered notifications read when the feed was
// opened, once, whatever after and limit.
func (f *inboxFeed) Backlog(context.Context, int64, int) ([]events.Frame, error) {
	b := f.backlog
	f.backlog = nil
	return b, nil
}

// Subscribe returns the subscription opened with the feed.
func (f *inboxFeed) Subscribe(int64) events.Subscription { return f.sub }

// Fresh reports whether a notification from the subscription was not
// in the backlog.
func (f *inboxFeed) Fresh(fr events.Frame) bool {
	var n struct{ ID string }
	json.Unmarshal(fr.Data, &n)
	return !f.shown[n.ID]
}

// getInboxEvents serves the principal's inbox live as Server-Sent Events:
// first the notifications not yet delivered (event "notification"; the
// PENDING ones become DISPATCHED), then each new one as it is emitted,
// and a final "closed" event when the server drains or the client falls
// behind. The client acknowledges with POST /v1/notifications/{id}/ack.
func (s *Server) getInboxEvents(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	release, err := s.limits.holdStream(p)
	if err != nil {
		return err
	}
	defer release()
	feed, err := s.openInbox(r.Context(), p)
	if err != nil {
		return err
	}
	defer feed.sub.Close()
	sink, done := s.openSSE(w)
	defer done()
	st := &events.Stream{Feed: feed, Sink: sink, Heartbeat: s.heartbeat}
	st.Run(r.Context())
	return nil
}
