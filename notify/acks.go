package notify

import (
	"context"
	"fmt"
	"strings"
)

// Acks that arrive together are committed together: one transaction and
// one UPDATE … RETURNING for all of them, each row changed only if, at
// that moment, it is the user's and in a state an ack may leave (PENDING
// or DISPATCHED off the agent's channel, or ESCALATED) — a compare-and-
// swap on the row, with no read before it. An ack that finds no batch's
// commit queued queues one; the others wait in line, and the commit takes
// them when it starts (see batcher). An ack the statement did not apply to
// is tried again alone (the unbatched, lease-fenced moves on a fresh
// read), which says why it cannot be — another user's, already delivered,
// claimed — or applies it, as if it had never been batched.

// maxAckBatch bounds how many acks one statement carries.
const maxAckBatch = 128

type ackReq struct {
	id    string
	user  string
	whole bool // the caller wants the notification back (Ack; Acknowledge does not)
	line  turn
	out   Notification
	ok    bool // delivered by the batch; false: try alone
	err   error
}

func (r *ackReq) batchKey() string { return r.id }
func (r *ackReq) turn() *turn      { return &r.line }
func (r *ackReq) reset()           { r.ok = false }

// ackBatched delivers the user's notification id in a batch with the acks
// arriving meanwhile; whole: with the notification as delivered.
func (l *Ledger) ackBatched(ctx context.Context, id, user string, whole bool) (Notification, error) {
	r := &ackReq{id: id, user: user, whole: whole, line: newTurn()}
	l.acks.run(r, maxAckBatch, func(take func() []*ackReq) {
		if err := l.commitAcks(context.WithoutCancel(ctx), take); err != nil { // the followers' acks are not the leader's to cancel
			for _, r := range take() {
				r.ok = false
				if !deadlock(err) { // nothing delivered: each is tried alone
					r.err = err
				}
			}
		}
	})
	if r.err != nil {
		return Notification{}, r.err
	}
	if r.ok {
		return r.out, nil
	}
	return l.ackAlone(ctx, id, user) // not applicable as it stood: alone, on a fresh read
}

// commitAcks delivers a batch in one statement; the rows it changed are
// the acks that succeeded. The batch is taken as emits' are (commitBatch).
func (l *Ledger) commitAcks(ctx context.Context, take func() []*ackReq) error {
	return commitBatch(ctx, l, l.ackSlots, take, l.ackStatement, acked)
}

// ackStatement is the one statement that delivers a batch: each row
// changed only if it is the user's and in a state an ack may leave.
func (l *Ledger) ackStatement(batch []*ackReq) (string, []any) {
	now := l.now().UnixNano()
	var where strings.Builder
	args := make([]any, 0, 8+2*len(batch))
	args = append(args, string(StateDelivered), now, string(StateEscalated), string(StateEscalated),
		string(StatePending), string(StateDispatched), string(ChannelAgent), string(StateEscalated))
	for i, r := range batch {
		if i > 0 {
			where.WriteString(" OR ")
		}
		where.WriteString(`(id = ? AND user_id = ?)`)
		args = append(args, r.id, r.user)
	}
	// DISPATCHED → LOCKED (a claim: owner_lease and attempts + 1) → DELIVERED;
	// PENDING → DISPATCHED first; ESCALATED → DELIVERED directly. One
	// statement, the whole commit (on PostgreSQL one round trip); its WHERE
	// names only the batch's ids, so every row it returns is one: every
	// column when an ack of the batch wants its notification back, else
	// the id alone (SQLite copied every column of every row it changed
	// into the statement's result, a third of the statement's time).
	// SQLite, knowing no state's share of the table, once planned it over
	// an index of every row by state (since dropped) from 16 acks a batch:
	// every live notification of every user read per batch
	// (TestAcksFindTheirRows holds the plan to the ids at every size).
	return `UPDATE ` + orFail(l.q.Dialect()) + `notifications SET state = ?, updated = ?,
		owner_lease = owner_lease + (CASE WHEN state = ? THEN 0 ELSE 1 END),
		attempts = attempts + (CASE WHEN state = ? THEN 0 ELSE 1 END)
		WHERE (state IN (?, ?) AND channel <> ? OR state = ?)
		AND (` + where.String() + `) RETURNING ` + returning(batch), args
}

// returning is what a batch's statement returns of each row it changed:
// every column when one of its acks wants the notification back, else
// the id.
func returning(batch []*ackReq) string {
	for _, r := range batch {
		if r.whole {
			return columns
		}
	}
	return "id"
}

// acked is the row callback of a batch's update: each row returned is an
// ack delivered.
func acked(batch []*ackReq) func(scan func(...any) error) error {
	byID := make(map[string]*ackReq, len(batch))
	for _, r := range batch {
		byID[r.id] = r
	}
	whole := returning(batch) == columns
	return func(scan func(...any) error) error {
		var n Notification
		var err error
		if whole {
			n, err = scanRow(scan)
		} else {
			err = scan(&n.ID)
		}
		if err != nil {
			return err
		}
		r := byID[n.ID]
		if r == nil {
			return fmt.Errorf("notify: an ack batch changed %s, which it did not hold", n.ID)
		}
		r.out, r.ok = n, true
		return nil
	}
}
