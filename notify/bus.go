package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/telemetry"
	"github.com/agentplane/agentplane/tool"
)

// Bus emits notifications and delivers each on its one channel: the
// inbox (A) live to the user's inbox streams, the floor (B) as a notice
// in the session's chain — so in its event streams and history, in order
// with the turns — and the agent's context (C) in the LLM's next prompt.
// A notification is DISPATCHED once sent on its channel.
type Bus struct {
	ledger *Ledger
	core   Sessions
	hub    *events.Hub
	agent  *llm.Agent // nil: no agent; its channel goes to the user at once
	log    *slog.Logger
	tracer trace.Tracer // nil: tracing is off

	mu   sync.Mutex
	sent sentLog // inbox notifications put on this instance's streams lately

	// the internal turns the bus started (AGENT/AGENT notifications): at
	// most cap(slots) at once, under ctx, waited for by Close
	ctx     context.Context
	cancel  context.CancelFunc
	slots   chan struct{}
	turns   sync.WaitGroup
	closing sync.Mutex // held by Close while it stops new turns; guards closed
	closed  bool
}

// showMargin is how far back, before its last look, Follow looks again
// for inbox notifications (another instance's clock may be behind);
// sentFor is how long a notification is remembered as sent here, and
// sentMax how many at most.
const (
	showMargin = 5 * time.Second
	sentFor    = 30 * time.Second
	sentMax    = 10000
)

// sentLog is the inbox notifications put on this instance's streams
// lately, oldest first: each write forgets those older than sentFor, and
// the oldest beyond its bound, so it stays bounded on every store (Follow,
// the only reader that needs the memory, runs on PostgreSQL only).
type sentLog struct {
	at    map[string]time.Time
	order []sentEntry // in the order sent; each is in at while it is here
	max   int         // 0 means sentMax
}

type sentEntry struct {
	id string
	at time.Time
}

// add records id as sent at now; false when it was sent already.
func (s *sentLog) add(id string, now time.Time) bool {
	if s.at == nil {
		s.at = map[string]time.Time{}
	}
	bound := s.max
	if bound <= 0 {
		bound = sentMax
	}
	forget := func() {
		delete(s.at, s.order[0].id)
		s.order[0] = sentEntry{}
		s.order = s.order[1:]
	}
	for len(s.order) > 0 && now.Sub(s.order[0].at) > sentFor {
		forget()
	}
	if _, ok := s.at[id]; ok {
		return false
	}
	for len(s.order) >= bound {
		forget()
	}
	s.at[id] = now
	s.order = append(s.order, sentEntry{id, now})
	return true
}

// sentHere records that the inbox notification id goes to this
// instance's streams now; false when it went already.
func (b *Bus) sentHere(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent.add(id, b.ledger.now())
}

// BusOptions configure a Bus. nil means defaults.
type BusOptions struct {
	// Agent handles what is addressed to the agent: its channel's
	// notifications reach its next prompt (build it with the ledger's
	// Awareness and AgentAck), and an AGENT/AGENT one starts an internal
	// turn at once. nil: there is no LLM, and what would go to the agent's
	// channel goes straight to the user's (escalated at once) — a
	// notification never depends on the model.
	Agent *llm.Agent
	// InternalTurns bounds the internal turns running at once; an
	// emission that would start one more waits for a slot (or its context,
	// or Close). 0 means 8.
	InternalTurns int
	Logger        *slog.Logger // nil discards
	// Tracer, when set, traces each emitted notification's routing and
	// dispatch (package telemetry); nil: no tracing.
	Tracer trace.Tracer
}

// Sessions is what the bus uses of the core (a *core.Core): the sessions a
// notification may reach, and the notices it puts on their floor. A notice
// is written by the core, on the configuration in force; the bus reaches
// no gate and no store. The methods are safe for concurrent use.
type Sessions interface {
	// Owned returns a session when it is the principal's; not_found
	// otherwise.
	Owned(ctx context.Context, id, principal string) (*agentplane.Session, error)
	// Sessions lists a principal's sessions, newest first.
	Sessions(ctx context.Context, q store.SessionQuery) (store.SessionPage, error)
	// RecordNotice appends a notice to a session's chain and returns its
	// sequence number.
	RecordNotice(ctx context.Context, sessionID string, n *agentplane.Notice) (int64, error)
}

// NewBus returns the bus over a ledger, the sessions (a *core.Core) and
// the event hub (streams).
func NewBus(l *Ledger, c Sessions, hub *events.Hub, opts *BusOptions) *Bus {
	b := &Bus{ledger: l, core: c, hub: hub}
	turns := 8
	if opts != nil {
		b.agent, b.log, b.tracer = opts.Agent, opts.Logger, opts.Tracer
		if opts.InternalTurns > 0 {
			turns = opts.InternalTurns
		}
	}
	b.slots = make(chan struct{}, turns)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b
}

// Ledger returns the bus's ledger.
func (b *Bus) Ledger() *Ledger { return b.ledger }

// userTopicPrefix begins every user's inbox topic.
const userTopicPrefix = "user:"

// UserTopic is the hub topic of a user's inbox streams.
func UserTopic(user string) string { return userTopicPrefix + user }

// Follow delivers, every interval until ctx ends, the inbox notifications
// other instances stored or sent for the users whose inbox streams are
// open here: one query for all followed users of what changed since the
// last look (less showMargin, for clocks apart). A PENDING one (stored
// by an instance with no stream of the user) is dispatched here — a
// fenced compare-and-swap, so exactly one instance dispatches it — and a
// DISPATCHED one another instance sent to its own streams is sent to this
// one's too; each goes to this instance's streams once.
func (b *Bus) Follow(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	since := b.ledger.now().Add(-showMargin)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		topics := b.hub.Followed(userTopicPrefix)
		if len(topics) == 0 {
			since = b.ledger.now().Add(-showMargin)
			continue
		}
		users := make([]string, len(topics))
		for i, tp := range topics {
			users[i] = strings.TrimPrefix(tp, userTopicPrefix)
		}
		look := b.ledger.now()
		changed, err := b.ledger.inboxSince(ctx, users, since)
		if err != nil {
			b.log.Warn("inbox streams: look for other instances' notifications", "err", err)
			continue
		}
		since = look.Add(-showMargin)
		for _, n := range changed {
			if n.State == StatePending {
				if n, err = b.ledger.Dispatch(ctx, n.ID); err != nil {
					continue // another instance, or an ack, moved it first: seen next time if it was sent
				}
			}
			if !b.sentHere(n.ID) {
				continue
			}
			data, _ := json.Marshal(n)
			b.hub.Publish(UserTopic(n.UserID), "notification", data)
		}
	}
}

// ErrUnknownSession is Emit's error for a SESSION notification whose
// session is not the user's.
var ErrUnknownSession = errors.New("notify: unknown session")

// Emit stores a notification and delivers it on its channel when it is
// new. A SESSION notification's session must exist and be the user's.
func (b *Bus) Emit(ctx context.Context, n Notification, lease int64) (e Emitted, err error) {
	if b.tracer != nil {
		var span trace.Span
		ctx, span = b.tracer.Start(ctx, "notify", trace.WithAttributes(attribute.String("agentplane.notification.address", string(n.Address)),
			attribute.String("agentplane.notification.target", string(n.Target)), attribute.String("agentplane.notification.handler", string(n.Handler))))
		defer func() {
			span.SetAttributes(telemetry.Channel.String(string(e.Channel)), attribute.String("agentplane.notification.state", string(e.State)),
				attribute.Bool("agentplane.notification.deduplicated", e.Deduplicated))
			if err != nil {
				telemetry.Fail(span, "notify", err.Error())
			}
			span.End()
		}()
	}
	if n.Address == AddressSession && n.SessionID != "" && n.UserID != "" {
		if _, err := b.core.Owned(ctx, n.SessionID, n.UserID); err != nil {
			if agentplane.ErrorCode(err) == agentplane.CodeNotFound {
				return Emitted{}, fmt.Errorf("%w: session_id: no session %q of user %q", ErrUnknownSession, n.SessionID, n.UserID)
			}
			return Emitted{}, err
		}
	}
	ch, _ := Route(n.Address, n.Target, n.Handler)
	live := ch == ChannelInbox && b.hub.Following(UserTopic(n.UserID))
	e, err = b.ledger.emit(ctx, n, lease, live)
	if err != nil || e.Deduplicated {
		return e, err
	}
	if live { // stored DISPATCHED: send it now, unless Follow saw it stored and sent it first
		if b.sentHere(e.ID) {
			data, _ := json.Marshal(e.Notification)
			b.hub.Publish(UserTopic(n.UserID), "notification", data)
		}
		return e, nil
	}
	e.Notification, err = b.deliver(ctx, e.Notification)
	return e, err
}

// deliver sends a PENDING notification on its channel and marks it
// DISPATCHED once sent; an inbox notification with no stream open stays
// PENDING until one opens (Inbox dispatches it then).
func (b *Bus) deliver(ctx context.Context, n Notification) (Notification, error) {
	switch n.Channel {
	case ChannelInbox:
		data, _ := json.Marshal(n)
		if b.hub.Publish(UserTopic(n.UserID), "notification", data) == 0 {
			return n, nil
		}
	case ChannelFloor:
		if _, err := b.core.RecordNotice(ctx, n.SessionID, notice(n)); err != nil {
			return n, err
		}
	default:
		if b.agent == nil {
			// no agent to hand it to: a notification never depends on the model
			if err := b.Escalate(ctx, n); err != nil {
				return n, err
			}
			return b.ledger.Get(ctx, n.ID)
		}
		if n.Target == TargetAgent && n.Handler == HandlerAgent {
			b.startInternal(ctx, n) // the agent handles it now, on its own
		}
		return n, nil // the agent's context: dispatched into its next prompt
	}
	d, err := b.ledger.Dispatch(ctx, n.ID)
	if errors.Is(err, ErrIllegal) || errors.Is(err, ErrStale) {
		// its owner acknowledged it first (an ack of a PENDING notice
		// dispatches it): it is past PENDING, as sending it was to make it
		return b.ledger.Get(ctx, n.ID)
	}
	return d, err
}

// startInternal starts the internal turn of an AGENT/AGENT notification
// in a slot of its own, once one is free. When none frees up before ctx
// ends or the bus closes, no turn starts: the notification stays on the
// agent's channel (its next prompt), and the watchdog escalates it at its
// TTL, as for an agent that did not handle it.
func (b *Bus) startInternal(ctx context.Context, n Notification) {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		b.log.Warn("internal turn not started: the emission's context ended while every slot was taken", "notification", n.ID)
		return
	case <-b.ctx.Done():
		return
	}
	b.closing.Lock()
	defer b.closing.Unlock()
	if b.closed {
		<-b.slots
		return
	}
	// the emission's values (its trace), the bus's cancellation
	ictx, stop := context.WithCancel(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(b.ctx, stop)
	b.turns.Go(func() {
		defer func() { unhook(); stop(); <-b.slots }()
		if err := b.Internal(ictx, n); err != nil && b.ctx.Err() == nil {
			b.log.Warn("internal turn", "notification", n.ID, "err", err)
		}
	})
}

// Close stops the bus's internal turns: none starts from now on, those
// running get up to drain to finish, then their context is cancelled
// (their notifications stay held; the watchdog takes them over at their
// lease), and Close returns once they have ended. The loops a caller runs
// (Follow, a Watchdog) stop with their own context. It is safe to call
// more than once.
func (b *Bus) Close(drain time.Duration) {
	b.closing.Lock()
	b.closed = true
	b.closing.Unlock()
	done := make(chan struct{})
	go func() { b.turns.Wait(); close(done) }()
	t := time.NewTimer(max(drain, 0))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	b.cancel()
	<-done
}

// notice is a notification as the floor shows it.
func notice(n Notification) *agentplane.Notice {
	return &agentplane.Notice{ID: n.ID, Title: n.Title, Body: n.Body, Urgency: string(n.Urgency), Payload: n.Payload}
}

// Inbox returns a page of a user's inbox (channel A), newest first, with
// how many of all are not delivered yet; the PENDING ones on the page are
// marked DISPATCHED in the same transaction (see Ledger.Inbox): a client
// that polls acknowledges what it was given as one holding a stream does.
func (b *Bus) Inbox(ctx context.Context, user string, limit int) ([]Notification, int, error) {
	list, unread, err := b.ledger.Inbox(ctx, user, limit)
	for _, n := range list {
		b.sentHere(n.ID) // a stream that opens shows the page; Follow does not send it again
	}
	return list, unread, err
}

// Describe maps the ledger's errors to the protocol's error codes, for
// front ends.
func Describe(err error) error {
	var inv *InvalidError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &inv):
		return agentplane.Errorf(agentplane.CodeInvalidInput, "%s", strings.TrimPrefix(err.Error(), "notification: "))
	case errors.Is(err, ErrUnknownSession):
		return agentplane.Errorf(agentplane.CodeInvalidInput, "%s", strings.TrimPrefix(err.Error(), ErrUnknownSession.Error()+": "))
	case errors.Is(err, ErrNotFound):
		return agentplane.Errorf(agentplane.CodeNotFound, "%s", err.Error())
	case errors.Is(err, ErrIllegal):
		return agentplane.Errorf(agentplane.CodeInvalidState, "%s", err.Error())
	case errors.Is(err, ErrStale):
		return agentplane.Errorf(agentplane.CodeVersionConflict, "%s", err.Error())
	}
	return err
}

// Notifier is what the built-in agent_notify_user emits through: a
// notification for the calling session's user, from the system, on the
// inbox (USER) or the session's floor (SESSION). bus returns the bus (it
// is made after the core the tool is built into); nil: not served here.
func Notifier(bus func() *Bus) tool.Notifier {
	return func(ctx context.Context, r tool.NotifyRequest) (json.RawMessage, error) {
		b := bus()
		if b == nil {
			return nil, tool.Errorf("unavailable", "notifications are served by agentplane serve, not here")
		}
		n := Notification{Address: Address(r.Address), UserID: r.UserID, Target: TargetUser, Handler: HandlerSystem,
			Title: r.Title, Body: r.Body, Urgency: Urgency(r.Urgency)}
		if n.Address == AddressSession {
			n.SessionID = r.SessionID
		}
		e, err := b.Emit(ctx, n, 0)
		if err != nil {
			return nil, tool.Errorf("invalid", "%s", agentplane.ErrorMessage(Describe(err)))
		}
		return json.Marshal(map[string]any{"id": e.ID, "channel": e.Channel, "state": e.State})
	}
}

// AgentFailed gives the user at once every agent-channel notification the
// agent holds for the session's user: the LLM failed to answer, and an
// alert must not wait for it (the watchdog would only at its TTL).
func (b *Bus) AgentFailed(ctx context.Context, sess *agentplane.Session) {
	held, err := b.ledger.List(ctx, Query{UserID: sess.Owner, Channel: ChannelAgent, States: []State{StateLocked}, Limit: 500})
	if err != nil {
		b.log.Warn("notifications held for a failed agent", "user", sess.Owner, "err", err)
		return
	}
	for _, n := range held {
		if n.Address == AddressSession && n.SessionID != sess.ID {
			continue
		}
		b.promote(ctx, n, "")
	}
}
