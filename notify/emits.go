package notify

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentplane/agentplane/store"
)

// Emits that arrive together are committed together, as acks are: one
// statement inserts all of them — each its own row, its own id, its own
// next sequence number of its address — and is the whole commit (one
// round trip on PostgreSQL; on SQLite one statement in the group commit's
// transaction). An emit that finds no batch's commit queued queues one;
// the others wait in line, and the commit takes them when it starts (see
// batcher). A batch holds each address once (two emits to one address
// take two sequence numbers one after the other: the second waits for the
// next batch), and only emits without a dedup key (one with a key reads
// the live notification it may overwrite: it commits alone). Every emit
// returns once its own row is committed, with its own result; a batch the
// database refused for a unique key (another instance took a sequence
// number first) is tried again one emit at a time.

// maxEmitBatch bounds how many emits one statement carries.
const maxEmitBatch = 128

type emitReq struct {
	n     *Notification // validated, its urgency set
	key   string        // its address key
	ch    Channel
	state State
	id    string
	now   int64
	line  turn
	seq   int64
	ok    bool // stored by the batch; false with no error: try alone
	err   error
}

func (r *emitReq) batchKey() string { return r.key }
func (r *emitReq) turn() *turn      { return &r.line }
func (r *emitReq) reset()           { r.ok = false }

// emitBatched stores a new notification (no dedup key) in a batch with
// the emits arriving meanwhile. ok false with no error: the batch could
// not store it (a unique key); the caller tries it alone.
func (l *Ledger) emitBatched(ctx context.Context, n *Notification, ch Channel, state State) (out Emitted, ok bool, err error) {
	r := &emitReq{n: n, key: n.addressKey(), ch: ch, state: state, id: l.newID(), now: l.now().UnixNano(), line: newTurn()}
	l.emits.run(r, maxEmitBatch, func(take func() []*emitReq) {
		err := l.commitEmits(context.WithoutCancel(ctx), take) // the followers' emits are not the leader's to cancel
		for _, r := range take() {
			switch {
			case err != nil && (uniqueViolation(err) || deadlock(err)):
				r.ok = false // nothing stored: each is tried alone
			case err != nil:
				r.ok, r.err = false, err
			case !r.ok:
				r.err = fmt.Errorf("notify: an emit batch did not return %s", r.id)
			}
		}
	})
	if r.err != nil || !r.ok {
		return Emitted{}, false, r.err
	}
	at := time.Unix(0, r.now).UTC()
	out.Notification = *n // as stored: no need to read it back
	out.ID, out.Seq, out.Channel, out.State, out.CreatedAt, out.UpdatedAt = r.id, r.seq, ch, state, at, at
	return out, true, nil
}

// commitEmits inserts a batch in one statement, each row with its
// address's next sequence number; the rows it returns are the emits
// stored. On SQLite the batch is taken when the group commit applies the
// statement (what arrived while it waited is in it); on PostgreSQL once
// one of the batches in flight has finished (slots).
func (l *Ledger) commitEmits(ctx context.Context, take func() []*emitReq) error {
	return commitBatch(ctx, l, l.emitSlots, take, l.emitStatement, emitted)
}

// emitStatement is the one statement that inserts a batch.
func (l *Ledger) emitStatement(batch []*emitReq) (string, []any) {
	switch {
	case l.q.Dialect() != store.Postgres:
		return sqliteInsert(batch)
	case len(batch) > 1:
		return pgInsertMany(batch)
	}
	r := batch[0]
	return pgInsert(r.id, r.key, r.n, r.ch, r.state, r.now)
}

// emitted is the row callback of a batch's insert: each row returned is
// an emit stored, its sequence number now known.
func emitted(batch []*emitReq) func(scan func(...any) error) error {
	byID := make(map[string]*emitReq, len(batch))
	for _, r := range batch {
		byID[r.id] = r
	}
	return func(scan func(...any) error) error {
		var seq int64
		var id string
		if err := scan(&seq, &id); err != nil {
			return err
		}
		r := byID[id]
		if r == nil {
			return fmt.Errorf("notify: an emit batch stored %s, which it did not hold", id)
		}
		r.seq, r.ok = seq, true
		return nil
	}
}

// sqliteInsert is SQLite's one statement that stores the notifications
// of a batch (one per address; a dedup emit is a batch of one), each with its address's next sequence
// number: the highest stored plus one (the unique index on (address_key,
// seq) finds it; notifications are never deleted, so it only grows, and
// the group commit's one writer is alone in its transaction). It returns
// each row's sequence number and id. OR FAIL: see orFail.
func sqliteInsert(batch []*emitReq) (string, []any) {
	var b strings.Builder
	b.WriteString(`INSERT OR FAIL INTO notifications (` + columns + `, address_key) VALUES `)
	args := make([]any, 0, 20*len(batch))
	for i, r := range batch {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE((SELECT MAX(seq) FROM notifications WHERE address_key = ?), 0) + 1, ?, ?, 0, 0, 0, ?, ?, 0, ?)`)
		n := r.n
		args = append(args, r.id, n.Address, n.UserID, n.SessionID, n.Target, n.Handler, n.Title, n.Body, string(n.Payload), n.DedupKey, n.Directive, n.TTLSeconds, n.Urgency,
			r.key, r.ch, r.state, r.now, r.now, r.key)
	}
	b.WriteString(` RETURNING seq, id`)
	return b.String(), args
}

// pgInsertMany is PostgreSQL's one statement that stores the
// notifications of a batch (one per address): their columns as arrays
// (one statement text, prepared once, whatever the batch's size), the
// addresses' next sequence numbers taken in one upsert, in the order of
// their keys (two batches in flight lock the counters they share in the
// same order: neither waits for the other while it holds what the other
// waits for). It returns each row's sequence number and id.
func pgInsertMany(batch []*emitReq) (string, []any) {
	k := len(batch)
	text := func(f func(r *emitReq) string) []string {
		out := make([]string, k)
		for i, r := range batch {
			out[i] = f(r)
		}
		return out
	}
	ttl, created := make([]int64, k), make([]int64, k)
	for i, r := range batch {
		ttl[i], created[i] = int64(r.n.TTLSeconds), r.now
	}
	args := []any{
		text(func(r *emitReq) string { return r.id }),
		text(func(r *emitReq) string { return string(r.n.Address) }),
		text(func(r *emitReq) string { return r.n.UserID }),
		text(func(r *emitReq) string { return r.n.SessionID }),
		text(func(r *emitReq) string { return string(r.n.Target) }),
		text(func(r *emitReq) string { return string(r.n.Handler) }),
		text(func(r *emitReq) string { return r.n.Title }),
		text(func(r *emitReq) string { return r.n.Body }),
		text(func(r *emitReq) string { return string(r.n.Payload) }),
		text(func(r *emitReq) string { return r.n.Directive }),
		ttl,
		text(func(r *emitReq) string { return string(r.n.Urgency) }),
		text(func(r *emitReq) string { return string(r.ch) }),
		text(func(r *emitReq) string { return string(r.state) }),
		created,
		text(func(r *emitReq) string { return r.key }),
	}
	return pgInsertManySQL, args
}

const pgInsertManySQL = `WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[],
		?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::text[])
		AS v(id, address, user_id, session_id, target, handler, title, body, payload, directive, ttl_seconds, urgency, channel, state, created, address_key)),
	s AS (INSERT INTO notification_seqs (address_key, seq) SELECT address_key, 1 FROM v ORDER BY address_key
		ON CONFLICT (address_key) DO UPDATE SET seq = notification_seqs.seq + 1 RETURNING address_key, seq)
	INSERT INTO notifications (` + columns + `, address_key)
		SELECT v.id, v.address, v.user_id, v.session_id, v.target, v.handler, v.title, v.body, v.payload, '', v.directive, v.ttl_seconds, v.urgency,
			s.seq, v.channel, v.state, 0, 0, 0, v.created, v.created, 0, v.address_key
		FROM v JOIN s ON s.address_key = v.address_key RETURNING seq, id`

// orFail is SQLite's OR FAIL for a statement that writes several rows in
// the group commit's transaction: with SQLite's default (ABORT), such a
// statement first copies every page it changes to a statement journal, to
// undo itself alone if a row fails — a copy and a temporary file's writes
// per page, about a fifth of the writer's time with 32 producers. The
// store undoes a failed op itself (the group's transaction, or the
// commit's savepoint), so what a failed statement wrote never commits
// either way. PostgreSQL has no such clause (nor journal): "".
func orFail(dialect string) string {
	if dialect == store.SQLite {
		return "OR FAIL "
	}
	return ""
}
