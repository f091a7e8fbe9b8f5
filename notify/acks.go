package notify

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/store"
)

// Acks that arrive together are committed together: one transaction and
// one UPDATE … RETURNING for all of them, each row changed only if, at
// that moment, it is the user's and in a state an ack may leave (PENDING
// or DISPATCHED off the agent's channel, or ESCALATED) — a compare-and-
// swap on the row, with no read before it. The first ack to arrive leads:
// it commits every ack waiting, then hands the lead to the first that
// arrived meanwhile. An ack the statement did not apply to is tried again
// alone (the unbatched, lease-fenced moves on a fresh read), which says
// why it cannot be — another user's, already delivered, claimed — or
// applies it, as if it had never been batched.

// maxAckBatch bounds how many acks one statement carries.
const maxAckBatch = 128

type ackReq struct {
	id   string
	user string
	line turn
	out  Notification
	ok   bool // delivered by the batch; false: try alone
	err  error
}

func (r *ackReq) batchKey() string { return r.id }
func (r *ackReq) turn() *turn      { return &r.line }

// ackBatched delivers the user's notification id in a batch with the acks
// arriving meanwhile.
func (l *Ledger) ackBatched(ctx context.Context, id, user string) (Notification, error) {
	r := &ackReq{id: id, user: user, line: newTurn()}
	l.acks.run(r, maxAckBatch, func(batch []*ackReq) {
		if err := l.commitAcks(context.WithoutCancel(ctx), batch); err != nil { // the followers' acks are not the leader's to cancel
			for _, r := range batch {
				r.err = err
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

// commitAcks delivers the batch in one statement; the rows it changed are
// the acks that succeeded.
func (l *Ledger) commitAcks(ctx context.Context, batch []*ackReq) error {
	now := l.now().UnixNano()
	var where []string
	args := []any{string(StateDelivered), now, string(StateEscalated), string(StateEscalated),
		string(StatePending), string(StateDispatched), string(ChannelAgent), string(StateEscalated)}
	for _, r := range batch {
		where = append(where, `(id = ? AND user_id = ?)`)
		args = append(args, r.id, r.user)
	}
	// DISPATCHED → LOCKED (a claim: owner_lease and attempts + 1) → DELIVERED;
	// PENDING → DISPATCHED first; ESCALATED → DELIVERED directly
	q := `UPDATE ` + orFail(l.q.Dialect()) + `notifications SET state = ?, updated = ?,
		owner_lease = owner_lease + (CASE WHEN state = ? THEN 0 ELSE 1 END),
		attempts = attempts + (CASE WHEN state = ? THEN 0 ELSE 1 END)
		WHERE (state IN (?, ?) AND channel <> ? OR state = ?)
		AND (` + strings.Join(where, " OR ") + `) RETURNING ` + columns
	byID := make(map[string]*ackReq, len(batch))
	for _, r := range batch {
		byID[r.id] = r
	}
	// one statement, the whole commit (on PostgreSQL one round trip); its
	// WHERE names only the batch's ids, so every row it returns is one
	op := store.Statement{Query: q, Args: args, Row: func(scan func(...any) error) error {
		n, err := scanRow(scan)
		if err != nil {
			return err
		}
		r := byID[n.ID]
		if r == nil {
			return fmt.Errorf("notify: an ack batch changed %s, which it did not hold", n.ID)
		}
		r.out, r.ok = n, true
		return nil
	}}
	if err := l.st.Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
		for _, r := range batch {
			r.ok = false
		}
		return err
	}
	return nil
}
