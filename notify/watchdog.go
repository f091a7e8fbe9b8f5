package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentplane/agentplane/store"
)

// DefaultTTL is how long the agent may hold a notification of its channel
// when the notification gives no ttl_seconds.
const DefaultTTL = 5 * time.Minute

// Due lists, across users, what the watchdog must act on at now: agent
// channel notifications not delivered within their TTL, locks whose lease
// ran out, and escalated notifications not acknowledged for retryAfter.
func (l *Ledger) Due(ctx context.Context, now time.Time, retryAfter time.Duration, limit int) ([]Notification, error) {
	n := now.UnixNano()
	var out []Notification
	err := l.q.Query(ctx, `SELECT `+columns+` FROM notifications WHERE
		(channel = 'C' AND state IN ('PENDING', 'DISPATCHED') AND created + (CASE WHEN ttl_seconds > 0 THEN ttl_seconds ELSE ? END) * 1000000000 <= ?)
		OR (state = 'LOCKED' AND lease_until <= ?)
		OR (state = 'ESCALATED' AND updated <= ?)
		ORDER BY created LIMIT ?`,
		[]any{int64(DefaultTTL / time.Second), n, n, n - int64(retryAfter), limit}, func(scan func(...any) error) error {
			m, err := scanRow(scan)
			out = append(out, m)
			return err
		})
	return out, err
}

// Dead lists the notifications that ended FAILED (dead letters), newest
// first.
func (l *Ledger) Dead(ctx context.Context, limit int) ([]Notification, error) {
	var out []Notification
	err := l.q.Query(ctx, `SELECT `+columns+` FROM notifications WHERE state = 'FAILED' ORDER BY updated DESC LIMIT ?`, []any{max(1, min(limit, 500))},
		func(scan func(...any) error) error {
			m, err := scanRow(scan)
			out = append(out, m)
			return err
		})
	return out, err
}

// Watchdog makes sure a notification never depends on the agent: what the
// agent did not deliver in time (its TTL, or its lock's lease, ran out) is
// claimed — a compare-and-swap, so it cannot overwrite a delivery that
// just happened — escalated to the user's inbox or the session's floor by
// its address, and shown there; one still not acknowledged is shown again
// every RetryAfter, and after MaxShows it ends FAILED, a dead letter.
// Several watchdogs (instances) may run at once: each notification is
// escalated, and shown again, by one.
type Watchdog struct {
	Bus        *Bus
	Every      time.Duration // how often Run sweeps; 0 means 1s
	RetryAfter time.Duration // an escalation not acknowledged is shown again after this; 0 means 1 minute
	MaxShows   int           // ... at most this many times, then it is FAILED; 0 means 5
	Logger     *slog.Logger
}

// Swept says what one sweep did.
type Swept struct {
	Escalated, Reshown, Failed, Lost int // Lost: another owner moved it first
}

// Run sweeps until ctx ends.
func (w *Watchdog) Run(ctx context.Context) {
	every := w.Every
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := w.Sweep(ctx); err != nil && w.Logger != nil {
			w.Logger.Error("notification watchdog", "err", err)
		}
	}
}

// Sweep acts once on everything due.
func (w *Watchdog) Sweep(ctx context.Context) (Swept, error) {
	retry, maxShows := w.RetryAfter, w.MaxShows
	if retry <= 0 {
		retry = time.Minute
	}
	if maxShows <= 0 {
		maxShows = 5
	}
	var s Swept
	l := w.Bus.ledger
	due, err := l.Due(ctx, l.now(), retry, 500)
	if err != nil {
		return s, err
	}
	for _, n := range due {
		var err error
		switch {
		case n.State == StateEscalated && n.Shows >= maxShows:
			_, err = l.Fail(ctx, n.ID, n.OwnerLease) // a dead letter
			if err == nil {
				s.Failed++
			}
		case n.State == StateEscalated:
			if n, err = l.reshow(ctx, n); err == nil {
				err = w.Bus.show(ctx, n)
				s.Reshown++
			}
		default:
			err = w.Bus.Escalate(ctx, n)
			if err == nil {
				s.Escalated++
			}
		}
		switch {
		case errors.Is(err, ErrStale) || errors.Is(err, ErrIllegal):
			s.Lost++ // delivered, claimed or escalated meanwhile: its owner has it
		case err != nil:
			return s, err
		}
	}
	return s, nil
}

// Escalate takes a notification from the agent and gives it to the
// system: claimed (PENDING is dispatched first), ESCALATED with its target
// promoted to the user, and delivered on the inbox or the floor by its
// address. It fails with ErrStale when another owner moved it first.
func (b *Bus) Escalate(ctx context.Context, n Notification) error {
	n, err := b.ledger.takeOver(ctx, n)
	if err != nil {
		return err
	}
	return b.show(ctx, n)
}

// takeOver claims a notification for the system and escalates it, in one
// transaction: it is never seen LOCKED by the watchdog (a LOCKED
// notification on the agent's channel is the agent's).
func (l *Ledger) takeOver(ctx context.Context, n Notification) (Notification, error) {
	var moves []move
	lease := n.OwnerLease
	if n.State == StatePending {
		moves = append(moves, move{id: n.ID, from: []State{StatePending}, lease: lease, to: StateDispatched})
	}
	until := l.now().Add(time.Minute).UnixNano()
	moves = append(moves,
		move{id: n.ID, from: []State{StateDispatched, StateLocked}, lease: lease, expired: true, to: StateLocked,
			nextLease: true, set: "lease_until = ?", args: []any{until}},
		move{id: n.ID, from: []State{StateLocked}, lease: lease + 1, to: StateEscalated,
			set: "channel = ?, target = ?, handler = ?, lease_until = 0", args: []any{Fallback(n.Address), TargetUser, HandlerSystem}})
	return l.run(ctx, n.ID, moves...)
}

// show puts a notification on its (system) channel: the inbox streams or
// the session's floor.
func (b *Bus) show(ctx context.Context, n Notification) error {
	switch n.Channel {
	case ChannelInbox:
		if data, err := json.Marshal(n); err == nil {
			b.hub.Publish(UserTopic(n.UserID), "notification", data)
		}
		return nil
	case ChannelFloor:
		_, err := b.core.RecordNotice(ctx, n.SessionID, notice(n))
		return err
	}
	return fmt.Errorf("notify: %s is not on a system channel", n.ID)
}

// reshow counts one more showing of an escalated notification that is
// still not acknowledged: a compare-and-swap on (state, owner_lease,
// shows), so two watchdogs show it once.
func (l *Ledger) reshow(ctx context.Context, n Notification) (Notification, error) {
	now := l.now().UnixNano()
	op := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		rows, err := tx.Exec(ctx, `UPDATE notifications SET shows = shows + 1, updated = ? WHERE id = ? AND state = 'ESCALATED' AND owner_lease = ? AND shows = ?`,
			now, n.ID, n.OwnerLease, n.Shows)
		if err == nil && rows != 1 {
			err = fmt.Errorf("%w: %s was acknowledged or shown meanwhile", ErrStale, n.ID)
		}
		return err
	})
	if err := l.st.Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
		return Notification{}, err
	}
	return l.Get(ctx, n.ID)
}
