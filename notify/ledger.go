package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
)

// Errors of the ledger. A refused transition changes nothing.
var (
	// ErrNotFound: no such notification (for this user).
	ErrNotFound = errors.New("notify: no such notification")
	// ErrIllegal: the transition is not one §5.1 allows from the
	// notification's state (a terminal state never changes).
	ErrIllegal = errors.New("notify: transition not allowed")
	// ErrStale: the notification moved on, or its owner_lease is not the
	// one presented (another owner claimed it), or its lease has not run
	// out yet.
	ErrStale = errors.New("notify: stale owner_lease or state")
)

// Extension is the ledger's tables: the notifications with their state
// and fencing counter, and the per-address sequence counters; then
// (migration 2) how often an escalated notification was shown. Migration
// 3 drops notification_dispatch, a row per notification that repeated
// its id, channel, address and sequence number and that nothing read:
// one statement less per emit. Migration 4 (SQLite) drops
// notification_seqs: there an emit takes its address's highest sequence
// number plus one in its insert (one writer at a time; notifications are
// never deleted), one statement and one table less per emit. PostgreSQL
// keeps the counters: concurrent transactions there would read the same
// highest number, where the counter's row serializes them. Then, on both
// (the numbers SQLite's / PostgreSQL's), the indexes that let each read
// find only its own rows: sessionUsers (5 / 4), watchdogIndexes (6 / 5),
// lockedIndex (7 / 6), agentMineIndex (8 / 7), unreadIndex (9 / 8).
var Extension = store.Extension{
	Name: "notify",
	Migrations: map[string][]string{
		store.SQLite: {schema("INTEGER"), `ALTER TABLE notifications ADD COLUMN shows INTEGER NOT NULL DEFAULT 0`, `DROP TABLE notification_dispatch`,
			`DROP TABLE notification_seqs`, sessionUsers, watchdogIndexes, lockedIndex, agentMineIndex, unreadIndex},
		store.Postgres: {schema("BIGINT"), `ALTER TABLE notifications ADD COLUMN shows BIGINT NOT NULL DEFAULT 0`, `DROP TABLE notification_dispatch`,
			sessionUsers, watchdogIndexes, lockedIndex, agentMineIndex, unreadIndex},
	},
}

// unreadIndex holds the inbox's notifications not delivered yet (none
// but the unread are in it, so it stays small and its pages few: about 5 %
// more WAL writes with 32 producers on SQLite) by user and when they last
// changed: what the unread count reads on every inbox page and every LLM
// turn (Awareness), and what the inbox streams of instances sharing a
// database look for every poll (inboxSince, a subset of its states, which
// PostgreSQL proves) — each of which otherwise read every notification
// the user was ever sent.
const unreadIndex = `CREATE INDEX notifications_unread ON notifications (address_key, updated) WHERE channel = 'A' AND state IN (` + unreadStates + `)`

// unreadStates are the states of an inbox notification not delivered
// yet, quoted for SQL: every state but the terminal ones
// (TestUnreadStates holds it to the constants).
const unreadStates = `'` + string(StatePending) + `', '` + string(StateDispatched) + `', '` + string(StateLocked) + `', '` + string(StateEscalated) + `'`

// agentMineIndex holds the agent's notifications not delivered yet (to
// act on, or held in a prompt) by address: what a session's next prompt
// puts before the model (Awareness, every LLM turn), which otherwise read
// every notification the user and the session were ever sent. Partial:
// only the agent's channel writes it, never the inbox.
const agentMineIndex = `CREATE INDEX notifications_agent_mine ON notifications (address_key, created) WHERE channel = 'C' AND state IN ('PENDING', 'DISPATCHED', 'LOCKED')`

// watchdogIndexes hold only what the watchdog looks for (Due) and Dead
// lists: the agent's notifications not delivered yet, the escalated ones
// and the dead letters, each by the time it is due by or listed in. The
// state index found them by their states alone, and so read the inbox's
// whole backlog (every user's PENDING and DISPATCHED notifications, of
// every channel) on every sweep, and every dead letter ever to list the
// newest. Partial: an inbox notification's writes (emit, ack) write none
// of them.
const watchdogIndexes = `CREATE INDEX notifications_agent_live ON notifications (channel, state, created) WHERE channel = 'C' AND state IN ('PENDING', 'DISPATCHED');
CREATE INDEX notifications_escalated ON notifications (state, updated) WHERE state = 'ESCALATED';
CREATE INDEX notifications_dead ON notifications (state, updated) WHERE state = 'FAILED'`

// lockedIndex replaces the state index, of every row by its state, with
// one of the locked rows by when their lease runs out: the one reader
// left that found its rows by state in it (Due's locks whose lease ran
// out; every other state Due and Dead look for has its own partial
// index). A user's rows read in some states (List, inboxSince) are found
// by the user: PostgreSQL's planner, over a user with a history, ANDed
// the state index in and read every user's PENDING and DISPATCHED
// notifications for it. Every write of a notification's state wrote the
// state index too; now only a lock's does.
const lockedIndex = `CREATE INDEX notifications_locked ON notifications (lease_until) WHERE state = 'LOCKED';
DROP INDEX notifications_by_state`

// sessionUsers replaces the index of every row by user with one of the
// rows addressed to a session by their user: the rows addressed to a
// user are in the address's index under USER:<user> (userKey).
const sessionUsers = `DROP INDEX notifications_by_user;
CREATE INDEX notifications_session_user ON notifications (user_id, channel, seq) WHERE address = 'SESSION'`

// sessionKey is the address key of what is addressed to the session.
func sessionKey(session string) string { return "SESSION:" + session }

// userKey is the address key of what is addressed to the user: every
// inbox notification's (Route sends nothing addressed to a session to
// the inbox, and Fallback nothing escalated).
func userKey(user string) string { return "USER:" + user }

// byUser is the condition, and its arguments, for a user's rows across
// both addresses: the user's own address, and the sessions' rows of the
// user (notifications_session_user).
func byUser(user string) (string, []any) {
	return `(address_key = ? OR address = 'SESSION' AND user_id = ?)`, []any{userKey(user), user}
}

func schema(integer string) string {
	return strings.ReplaceAll(`
CREATE TABLE notifications (
    id          TEXT PRIMARY KEY,
    address_key TEXT NOT NULL,       -- USER:<user> | SESSION:<session>: the scope of seq and dedup_key
    seq         INT NOT NULL,        -- per address, in emission order
    address     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    target      TEXT NOT NULL,
    handler     TEXT NOT NULL,
    title       TEXT NOT NULL,
    body        TEXT NOT NULL,
    payload     TEXT NOT NULL,       -- JSON, '' when none
    dedup_key   TEXT NOT NULL,
    directive   TEXT NOT NULL,
    ttl_seconds INT NOT NULL,
    urgency     TEXT NOT NULL,
    channel     TEXT NOT NULL,
    state       TEXT NOT NULL,
    owner_lease INT NOT NULL,        -- fencing counter: every claim increments it
    lease_until INT NOT NULL,        -- Unix nanoseconds; 0 when not locked
    attempts    INT NOT NULL,
    created     INT NOT NULL,
    updated     INT NOT NULL,
    UNIQUE (address_key, seq)
);
-- one live notification per dedup key and address
CREATE UNIQUE INDEX notifications_dedup ON notifications (address_key, dedup_key)
    WHERE dedup_key <> '' AND state <> 'DELIVERED' AND state <> 'FAILED';
CREATE INDEX notifications_by_user ON notifications (user_id, channel, seq);
CREATE INDEX notifications_by_state ON notifications (state, lease_until);
CREATE TABLE notification_dispatch (
    id          TEXT PRIMARY KEY,    -- the notification
    channel     TEXT NOT NULL,       -- where it was routed at emission
    address_key TEXT NOT NULL,
    seq         INT NOT NULL,
    created     INT NOT NULL
);
CREATE TABLE notification_seqs (
    address_key TEXT PRIMARY KEY,
    seq         INT NOT NULL
);`, "INT ", integer+" ")
}

// Options configure a Ledger. nil means defaults.
type Options struct {
	Now   func() time.Time // nil means time.Now
	NewID func() string    // nil means agentplane.OrderedID at Now
}

// Ledger keeps notifications in a SQL store opened with Extension.
type Ledger struct {
	st    store.Store
	q     store.Querier
	now   func() time.Time
	newID func() string
	acks  batcher[*ackReq]  // acks waiting to be committed together
	emits batcher[*emitReq] // emits waiting to be committed together
	// PostgreSQL: the batches of each kind in flight at once, at most
	// pgInFlight (a batch is taken once one of them has finished)
	ackSlots, emitSlots chan struct{}
}

// pgInFlight bounds the batches of emits, and of acks, a PostgreSQL
// ledger has in flight at once: while one commits, the next is sent, and
// the server flushes their commits together.
const pgInFlight = 2

// NewLedger returns the ledger over a SQL store (SQLite or PostgreSQL)
// opened with Extension.
func NewLedger(st store.Store, opts *Options) (*Ledger, error) {
	q, ok := st.(store.Querier)
	if !ok {
		return nil, errors.New("notify: the ledger needs a SQL store (SQLite or PostgreSQL), not an in-memory one")
	}
	l := &Ledger{st: st, q: q, now: time.Now,
		ackSlots: make(chan struct{}, pgInFlight), emitSlots: make(chan struct{}, pgInFlight)}
	// time-ordered ids: an emit adds to the last pages of the id's index,
	// where random ids wrote a page of it anywhere per notification
	l.newID = func() string { return agentplane.OrderedID(l.now()) }
	if opts != nil {
		if opts.Now != nil {
			l.now = opts.Now
		}
		if opts.NewID != nil {
			l.newID = opts.NewID
		}
	}
	return l, nil
}

const columns = `id, address, user_id, session_id, target, handler, title, body, payload, dedup_key, directive, ttl_seconds, urgency,
	seq, channel, state, owner_lease, lease_until, attempts, created, updated, shows`

func scanRow(scan func(...any) error) (Notification, error) {
	var n Notification
	var payload string
	var leaseUntil, created, updated int64
	err := scan(&n.ID, &n.Address, &n.UserID, &n.SessionID, &n.Target, &n.Handler, &n.Title, &n.Body, &payload, &n.DedupKey, &n.Directive,
		&n.TTLSeconds, &n.Urgency, &n.Seq, &n.Channel, &n.State, &n.OwnerLease, &leaseUntil, &n.Attempts, &created, &updated, &n.Shows)
	if payload != "" {
		n.Payload = []byte(payload)
	}
	if leaseUntil != 0 {
		n.LeaseUntil = time.Unix(0, leaseUntil).UTC()
	}
	n.CreatedAt, n.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return n, err
}

// Get returns a notification.
func (l *Ledger) Get(ctx context.Context, id string) (Notification, error) {
	return getOne(ctx, l.q, id)
}

// querier is a Querier or a Tx.
type querier interface {
	Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error
}

func getOne(ctx context.Context, q querier, id string) (Notification, error) {
	var n Notification
	found := false
	err := q.Query(ctx, `SELECT `+columns+` FROM notifications WHERE id = ?`, []any{id}, func(scan func(...any) error) error {
		var err error
		n, err = scanRow(scan)
		found = true
		return err
	})
	if err != nil {
		return Notification{}, err
	}
	if !found {
		return Notification{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return n, nil
}

// Emitted is what Emit did: the notification as stored, and whether it
// overwrote a live one with the same dedup key.
type Emitted struct {
	Notification
	Deduplicated bool `json:"deduplicated,omitempty"`
}

// Emit validates a notification, routes it to its one channel and stores
// it PENDING with its dispatch record, in one transaction. A dedup key
// that matches a live notification of the same address (§5.3)
// overwrites that one's content instead: when it is PENDING or
// DISPATCHED, always; when LOCKED or ESCALATED, only if lease is its
// current owner_lease (else ErrStale). After a terminal state, a new
// notification is created.
func (l *Ledger) Emit(ctx context.Context, n Notification, lease int64) (Emitted, error) {
	return l.emit(ctx, n, lease, false)
}

// emit is Emit; with dispatched, a new notification is stored DISPATCHED
// at once (PENDING → DISPATCHED in the same transaction): its sender has
// a live stream to send it on right after the commit (and a stream that
// opens later shows every notification not yet delivered).
func (l *Ledger) emit(ctx context.Context, n Notification, lease int64, dispatched bool) (Emitted, error) {
	if err := n.Validate(); err != nil {
		return Emitted{}, err
	}
	ch, _ := Route(n.Address, n.Target, n.Handler)
	if n.Urgency == "" {
		n.Urgency = UrgencyNormal
	}
	if n.DedupKey == "" {
		state := StatePending
		if dispatched {
			state = StateDispatched
		}
		if out, ok, err := l.emitBatched(ctx, &n, ch, state); ok || err != nil {
			return out, err
		}
		// the batch met a unique key another instance took first: alone
	}
	for attempt := 0; ; attempt++ {
		out, err := l.emitOnce(ctx, n, ch, lease, dispatched)
		if err != nil && attempt < 3 && uniqueViolation(err) {
			continue // a concurrent emit took the sequence number or the dedup key first
		}
		return out, err
	}
}

func (l *Ledger) emitOnce(ctx context.Context, n Notification, ch Channel, lease int64, dispatched bool) (Emitted, error) {
	now := l.now().UnixNano()
	key := n.addressKey()
	var out Emitted
	state := StatePending
	if dispatched {
		state = StateDispatched // PENDING → DISPATCHED inside the transaction: never seen PENDING
	}
	stored := func(id string, seq int64) {
		at := time.Unix(0, now).UTC()
		out.Notification = n // as stored: no need to read it back
		out.ID, out.Seq, out.Channel, out.State, out.CreatedAt, out.UpdatedAt = id, seq, ch, state, at, at
	}
	if n.DedupKey == "" && l.q.Dialect() == store.Postgres {
		// nothing to look up first: the one statement is the commit (one
		// round trip, no BEGIN and COMMIT around it)
		id := l.newID()
		query, args := pgInsert(id, key, &n, ch, state, now)
		var seq int64
		err := l.st.Commit(ctx, &store.Commit{Ops: []store.Op{store.Statement{Query: query, Args: args,
			Row: func(scan func(...any) error) error { var got string; return scan(&seq, &got) }}}})
		if err != nil {
			return Emitted{}, err
		}
		stored(id, seq)
		return out, nil
	}
	op := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		if n.DedupKey != "" {
			var live *Notification
			// the partial index's own condition, word for word: a
			// planner cannot tell that dedup_key = ? is not '', and
			// without it SQLite read every notification of the address
			err := tx.Query(ctx, `SELECT `+columns+` FROM notifications WHERE address_key = ? AND dedup_key = ? AND dedup_key <> '' AND state <> 'DELIVERED' AND state <> 'FAILED'`,
				[]any{key, n.DedupKey}, func(scan func(...any) error) error {
					m, err := scanRow(scan)
					live = &m
					return err
				})
			if err != nil {
				return err
			}
			if live != nil {
				return l.overwrite(ctx, tx, live, &n, lease, now, &out)
			}
		}
		id := l.newID()
		seq, err := insertNotification(ctx, tx, id, key, &n, ch, state, now)
		if err != nil {
			return err
		}
		stored(id, seq)
		return nil
	})
	if err := l.st.Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
		return Emitted{}, err
	}
	return out, nil
}

// insertNotification takes the address's next sequence number and stores
// the notification, in one statement.
func insertNotification(ctx context.Context, tx store.Tx, id, key string, n *Notification, ch Channel, state State, now int64) (int64, error) {
	query, args := pgInsert(id, key, n, ch, state, now)
	if tx.Dialect() != store.Postgres {
		query, args = sqliteInsert([]*emitReq{{n: n, key: key, ch: ch, state: state, id: id, now: now}})
	}
	var seq int64
	err := tx.Query(ctx, query, args, func(scan func(...any) error) error {
		var got string
		return scan(&seq, &got)
	})
	return seq, err
}

// pgInsert is PostgreSQL's one statement that takes the address's next
// sequence number and stores the notification, returning the sequence
// number and the id.
func pgInsert(id, key string, n *Notification, ch Channel, state State, now int64) (string, []any) {
	args := []any{key, id, n.Address, n.UserID, n.SessionID, n.Target, n.Handler, n.Title, n.Body, string(n.Payload), n.DedupKey, n.Directive, n.TTLSeconds, n.Urgency,
		ch, state, now, now, key}
	return pgInsertSQL, args
}

const pgInsertSQL = `WITH s AS (INSERT INTO notification_seqs (address_key, seq) VALUES (?, 1)
		ON CONFLICT (address_key) DO UPDATE SET seq = notification_seqs.seq + 1 RETURNING seq)
	INSERT INTO notifications (` + columns + `, address_key)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, s.seq, ?, ?, 0, 0, 0, ?, ?, 0, ? FROM s RETURNING seq, id`

// overwrite is a dedup emit's update of the live notification with the
// same key, fenced by its state and owner_lease.
func (l *Ledger) overwrite(ctx context.Context, tx store.Tx, live, n *Notification, lease, now int64, out *Emitted) error {
	if (live.State == StateLocked || live.State == StateEscalated) && lease != live.OwnerLease {
		return fmt.Errorf("%w: %s is %s with owner_lease %d; a dedup update must present it (got %d)", ErrStale, live.ID, live.State, live.OwnerLease, lease)
	}
	rows, err := tx.Exec(ctx, `UPDATE notifications SET title = ?, body = ?, payload = ?, directive = ?, ttl_seconds = ?, urgency = ?, updated = ?
		WHERE id = ? AND state = ? AND owner_lease = ?`,
		n.Title, n.Body, string(n.Payload), n.Directive, n.TTLSeconds, n.Urgency, now, live.ID, live.State, live.OwnerLease)
	if err != nil {
		return err
	}
	if rows != 1 {
		return fmt.Errorf("%w: %s changed during the dedup update", ErrStale, live.ID)
	}
	out.Deduplicated = true
	out.Notification, err = getOne(ctx, tx, live.ID)
	return err
}

// uniqueViolation reports a unique-constraint error of either driver.
func uniqueViolation(err error) bool {
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") || strings.Contains(s, "SQLSTATE 23505") || strings.Contains(s, "duplicate key value")
}

// deadlock reports PostgreSQL's refusal of a statement that waited for
// rows another transaction held while it held rows that one waited for
// (two batches in flight sharing rows): nothing of it was stored, and its
// requests are tried again one at a time.
func deadlock(err error) bool {
	return strings.Contains(err.Error(), "SQLSTATE 40P01")
}

// move is one compare-and-swap transition: from one of the states given,
// with the owner_lease presented, to a state, setting more columns. When
// no row matches, the current row says why: not found, illegal, stale.
type move struct {
	id        string
	from      []State
	lease     int64
	expired   bool // LOCKED → LOCKED only once the lease ran out
	to        State
	set       string // more "col = ?" assignments
	args      []any
	userID    string // not "": only this user's notification
	nextLease bool   // increment owner_lease (a claim)
}

// apply runs the move in tx; now is the transition's time.
func (m move) apply(ctx context.Context, tx store.Tx, now int64) error {
	q := `UPDATE notifications SET state = ?, updated = ?`
	args := []any{m.to, now}
	if m.nextLease {
		q += `, owner_lease = owner_lease + 1, attempts = attempts + 1`
	}
	if m.set != "" {
		q += ", " + m.set
		args = append(args, m.args...)
	}
	q += ` WHERE id = ? AND owner_lease = ? AND state IN (` + store.Params(len(m.from)) + `)`
	args = append(args, m.id, m.lease)
	for _, s := range m.from {
		args = append(args, s)
	}
	if m.expired {
		q += ` AND (state <> 'LOCKED' OR lease_until <= ?)`
		args = append(args, now)
	}
	if m.userID != "" {
		q += ` AND user_id = ?`
		args = append(args, m.userID)
	}
	rows, err := tx.Exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if rows == 1 {
		return nil
	}
	cur, err := getOne(ctx, tx, m.id)
	switch {
	case err != nil:
		return err
	case m.userID != "" && cur.UserID != m.userID:
		return fmt.Errorf("%w: %q", ErrNotFound, m.id)
	case !Allowed(cur.State, m.to):
		return fmt.Errorf("%w: %s is %s; it cannot become %s", ErrIllegal, m.id, cur.State, m.to)
	case cur.OwnerLease != m.lease:
		return fmt.Errorf("%w: %s has owner_lease %d, not %d", ErrStale, m.id, cur.OwnerLease, m.lease)
	case m.expired && cur.State == StateLocked:
		return fmt.Errorf("%w: %s is locked until %s", ErrStale, m.id, cur.LeaseUntil.Format(time.RFC3339Nano))
	}
	return fmt.Errorf("%w: %s is %s, not %v", ErrStale, m.id, cur.State, m.from)
}

// run commits the moves as one transaction and returns the notification
// after them.
func (l *Ledger) run(ctx context.Context, id string, moves ...move) (Notification, error) {
	now := l.now().UnixNano()
	op := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		for _, m := range moves {
			if err := m.apply(ctx, tx, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err := l.st.Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
		return Notification{}, err
	}
	return l.Get(ctx, id)
}

// Dispatch records that a notification was sent on its channel (a
// stream, the agent's prompt): PENDING → DISPATCHED.
func (l *Ledger) Dispatch(ctx context.Context, id string) (Notification, error) {
	n, err := l.Get(ctx, id)
	if err != nil {
		return Notification{}, err
	}
	return l.run(ctx, id, move{id: id, from: []State{StatePending}, lease: n.OwnerLease, to: StateDispatched})
}

// Claim takes ownership for hold: a DISPATCHED notification with
// owner_lease lease, or a LOCKED one whose lease ran out (a new owner
// taking over), becomes LOCKED with owner_lease lease+1 until now+hold.
// The new owner presents lease+1 afterwards.
func (l *Ledger) Claim(ctx context.Context, id string, lease int64, hold time.Duration) (Notification, error) {
	until := l.now().Add(hold).UnixNano()
	return l.run(ctx, id, move{id: id, from: []State{StateDispatched, StateLocked}, lease: lease, expired: true, to: StateLocked,
		nextLease: true, set: "lease_until = ?", args: []any{until}})
}

// Deliver is a delivery its owner confirms: LOCKED or ESCALATED with
// owner_lease lease → DELIVERED.
func (l *Ledger) Deliver(ctx context.Context, id string, lease int64) (Notification, error) {
	return l.run(ctx, id, move{id: id, from: []State{StateLocked, StateEscalated}, lease: lease, to: StateDelivered, set: "lease_until = 0"})
}

// Escalate reverts a LOCKED notification to the system: ESCALATED,
// re-routed to the inbox or the floor by its address, its target promoted
// to the user and its handler the system.
func (l *Ledger) Escalate(ctx context.Context, id string, lease int64) (Notification, error) {
	n, err := l.Get(ctx, id)
	if err != nil {
		return Notification{}, err
	}
	return l.run(ctx, id, move{id: id, from: []State{StateLocked}, lease: lease, to: StateEscalated,
		set: "channel = ?, target = ?, handler = ?, lease_until = 0", args: []any{Fallback(n.Address), TargetUser, HandlerSystem}})
}

// Fail ends a LOCKED or ESCALATED notification as a dead letter.
func (l *Ledger) Fail(ctx context.Context, id string, lease int64) (Notification, error) {
	return l.run(ctx, id, move{id: id, from: []State{StateLocked, StateEscalated}, lease: lease, to: StateFailed, set: "lease_until = 0"})
}

// Ack is the user's client acknowledging a notification shown on a
// system channel: DISPATCHED → LOCKED → DELIVERED, or ESCALATED →
// DELIVERED, in one transaction. A PENDING one is acknowledged the same
// way, PENDING → DISPATCHED first: its owner saw it somewhere (a list, a
// page of the inbox) that did not dispatch it. Each step is a fenced
// compare-and-swap, so of two acks, or an ack and a stream's dispatch,
// racing, one wins and the other is told why. Another user's
// notification is ErrNotFound.
func (l *Ledger) Ack(ctx context.Context, id, userID string) (Notification, error) {
	return l.ackBatched(ctx, id, userID, true) // with the acks arriving meanwhile; alone when it does not apply
}

// Acknowledge is Ack for a client that does not read the answer, such as
// an ack sent on a stream: the same moves, in the same batches, refused
// for the same reasons, without the notification sent back — a batch of
// them returns the ids it delivered alone, where Ack's returns every
// column of every row.
func (l *Ledger) Acknowledge(ctx context.Context, id, userID string) error {
	_, err := l.ackBatched(ctx, id, userID, false)
	return err
}

// ackAlone is Ack in a transaction of its own, on the state read now.
func (l *Ledger) ackAlone(ctx context.Context, id, userID string) (Notification, error) {
	n, err := l.Get(ctx, id)
	if err != nil {
		return Notification{}, err
	}
	if n.UserID != userID {
		return Notification{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if n.Channel == ChannelAgent && n.State != StateEscalated {
		return Notification{}, fmt.Errorf("%w: %s is on the agent's channel; the agent acknowledges it", ErrIllegal, id)
	}
	switch n.State {
	case StateEscalated:
		return l.run(ctx, id, move{id: id, from: []State{StateEscalated}, lease: n.OwnerLease, to: StateDelivered, userID: userID})
	case StatePending:
		return l.run(ctx, id,
			move{id: id, from: []State{StatePending}, lease: n.OwnerLease, to: StateDispatched, userID: userID},
			move{id: id, from: []State{StateDispatched}, lease: n.OwnerLease, to: StateLocked, nextLease: true, userID: userID},
			move{id: id, from: []State{StateLocked}, lease: n.OwnerLease + 1, to: StateDelivered, userID: userID})
	}
	return l.run(ctx, id,
		move{id: id, from: []State{StateDispatched}, lease: n.OwnerLease, to: StateLocked, nextLease: true, userID: userID},
		move{id: id, from: []State{StateLocked}, lease: n.OwnerLease + 1, to: StateDelivered, userID: userID})
}

// Inbox returns a page of a user's inbox (channel A), newest first, with
// how many of all are not delivered yet, and marks the PENDING ones on
// the page DISPATCHED in the same transaction: what the user's client is
// given has been dispatched to it, whether it holds a stream or polls, so
// its ack delivers. Each mark is a fenced compare-and-swap; one another
// writer moved first is returned as that writer left it.
func (l *Ledger) Inbox(ctx context.Context, userID string, limit int) ([]Notification, int, error) {
	limit = min(max(limit, 1), 500)
	var list []Notification
	unread := 0
	now := l.now().UnixNano()
	op := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		list, unread = list[:0], 0
		err := tx.Query(ctx, inboxSQL, []any{userKey(userID), limit}, func(scan func(...any) error) error {
			n, err := scanRow(scan)
			list = append(list, n)
			return err
		})
		if err != nil {
			return err
		}
		for i, n := range list {
			if n.State != StatePending {
				continue
			}
			rows, err := tx.Exec(ctx, `UPDATE notifications SET state = ?, updated = ? WHERE id = ? AND owner_lease = ? AND state = ?`,
				StateDispatched, now, n.ID, n.OwnerLease, StatePending)
			if err != nil {
				return err
			}
			if rows == 1 {
				list[i].State, list[i].UpdatedAt = StateDispatched, time.Unix(0, now).UTC()
			} else if list[i], err = getOne(ctx, tx, n.ID); err != nil {
				return err
			}
		}
		return tx.Query(ctx, unreadSQL, []any{userKey(userID)}, func(scan func(...any) error) error { return scan(&unread) })
	})
	if err := l.st.Commit(ctx, &store.Commit{Ops: []store.Op{op}}); err != nil {
		return nil, 0, err
	}
	return list, unread, nil
}

// inboxSince returns the inbox notifications of the users that are
// PENDING or DISPATCHED and changed at or after since, oldest first, at
// most 500.
func (l *Ledger) inboxSince(ctx context.Context, users []string, since time.Time) ([]Notification, error) {
	var out []Notification
	for len(users) > 0 {
		batch := users[:min(len(users), 100)]
		users = users[len(batch):]
		args := make([]any, 0, len(batch)+1)
		for _, u := range batch {
			args = append(args, userKey(u))
		}
		args = append(args, since.UnixNano())
		err := l.q.Query(ctx, inboxSinceSQL(len(batch)), args,
			func(scan func(...any) error) error {
				n, err := scanRow(scan)
				out = append(out, n)
				return err
			})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// inboxSQL is a page of a user's inbox, newest first — in the order of
// the address's sequence numbers, the order the ledger stored them in,
// so the page walks the address's index back from its end and stops once
// it holds enough, where an order by time read every notification the
// user was ever sent; its arguments are the user's address key (userKey)
// and the page's size.
const inboxSQL = `SELECT ` + columns + ` FROM notifications WHERE address_key = ? AND channel = 'A' ORDER BY seq DESC LIMIT ?`

// inboxSinceSQL is inboxSince's statement for n users: their address keys
// (userKey), then the time. (Only PostgreSQL runs it, for the instances
// sharing it.) Its states are a subset of notifications_unread's, which
// PostgreSQL's planner proves, so it finds the rows in that index.
func inboxSinceSQL(n int) string {
	return `SELECT ` + columns + ` FROM notifications WHERE channel = 'A' AND state IN ('PENDING', 'DISPATCHED') AND address_key IN (` +
		store.Params(n) + `) AND updated >= ? ORDER BY created, seq LIMIT 500`
}

// unreadSQL counts a user's inbox notifications not delivered yet, in
// notifications_unread (its condition word for word); its argument is the
// user's address key (userKey).
const unreadSQL = `SELECT COUNT(*) FROM notifications WHERE address_key = ? AND channel = 'A' AND state IN (` + unreadStates + `)`

// Unread returns how many of a user's inbox notifications are not
// delivered yet (one count, not a listing).
func (l *Ledger) Unread(ctx context.Context, userID string) (int, error) {
	n := 0
	err := l.q.Query(ctx, unreadSQL, []any{userKey(userID)}, func(scan func(...any) error) error { return scan(&n) })
	return n, err
}

// Query lists notifications.
type Query struct {
	UserID  string  // required
	Channel Channel // "" for every channel
	States  []State // nil for every state
	Limit   int     // 0 means 50, at most 500
}

// List returns a user's notifications, newest first.
func (l *Ledger) List(ctx context.Context, q Query) ([]Notification, error) {
	sql, args := listSQL(q)
	return l.list(ctx, sql, args)
}

// listSQL is List's statement and its arguments: the user's rows (by
// address and session user), the channel and states a filter.
func listSQL(q Query) (string, []any) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	cond, args := byUser(q.UserID)
	sql := `SELECT ` + columns + ` FROM notifications WHERE ` + cond
	if q.Channel != "" {
		sql += ` AND channel = ?`
		args = append(args, q.Channel)
	}
	if len(q.States) > 0 {
		sql += ` AND state IN (` + store.Params(len(q.States)) + `)`
		for _, s := range q.States {
			args = append(args, s)
		}
	}
	sql += ` ORDER BY created DESC, seq DESC LIMIT ?`
	return sql, append(args, limit)
}

// The agent's hold on what reaches its prompt lives in the ledger, not in
// a process: an agent-channel notification that is LOCKED is the agent
// runtime's (the watchdog escalates in the same transaction as it claims,
// and the inbox's acks never lock the agent's channel), so any instance,
// or this one restarted, knows what the agent holds and acknowledges it
// with the lease the row carries.

// maxAware bounds the awareness lines of a prompt.
const maxAware = 8

// Awareness is the LLM's awareness of notifications for a session's next
// prompt (llm.Options.Awareness): the agent's own (channel C, for the
// session or its user) to act on, dispatched and held by being put there;
// [SEEN] lines for what the system showed on the floor (read-only: never
// to be announced again); and a one-sentence digest of the inbox.
func (l *Ledger) Awareness(ctx context.Context, sess *agentplane.Session) []string {
	if sess.Owner == "" {
		return nil
	}
	var lines []string
	mine, err := l.list(ctx, agentMineSQL, []any{userKey(sess.Owner), sessionKey(sess.ID), sess.Owner, maxAware})
	if err == nil {
		for _, n := range mine {
			if held, err := l.hold(ctx, n); err == nil {
				n = held
			} else {
				continue // the watchdog took it meanwhile
			}
			line := fmt.Sprintf("[NOTIFICATION %s] %s", n.ID, n.Title)
			if n.Body != "" {
				line += ": " + n.Body
			}
			if n.Directive != "" {
				line += " (instructions: " + n.Directive + ")"
			}
			lines = append(lines, line)
		}
		if len(lines) > 0 {
			lines = append(lines, "When you have handled a notification, write [ack:ID] with its id in your reply (the user does not see it).")
		}
	}
	seen, err := l.list(ctx, seenSQL, []any{sessionKey(sess.ID), sess.Owner, maxAware})
	if err == nil {
		for _, n := range seen {
			if len(lines) < 2*maxAware {
				lines = append(lines, "[SEEN] "+n.Title+" (the user has seen this; do not announce it again)")
			}
		}
	}
	if unread, err := l.Unread(ctx, sess.Owner); err == nil && unread > 0 {
		lines = append(lines, fmt.Sprintf("The user has %d unread notification%s in their inbox.", unread, map[bool]string{true: "", false: "s"}[unread == 1]))
	}
	return lines
}

// agentMineSQL is the agent's notifications a session's prompt holds or
// may take, newest first: the owner's addressed to the owner (any of the
// owner's sessions may act on them) and to the session, on the agent's
// channel and not delivered yet — notifications_agent_mine's condition,
// word for word. Its arguments: the owner's and the session's address
// keys, the owner, how many at most.
const agentMineSQL = `SELECT ` + columns + ` FROM notifications WHERE address_key IN (?, ?) AND user_id = ? AND channel = 'C'
	AND state IN ('PENDING', 'DISPATCHED', 'LOCKED') ORDER BY created DESC, seq DESC LIMIT ?`

// seenSQL is what the system showed on a session's floor, newest first by
// the session address's sequence numbers (its index walked back from the
// end); its arguments: the session's address key, the owner, how many at
// most.
const seenSQL = `SELECT ` + columns + ` FROM notifications WHERE address_key = ? AND user_id = ? AND channel = 'B'
	AND state IN ('DISPATCHED', 'DELIVERED') ORDER BY seq DESC LIMIT ?`

// list runs a read of whole notifications.
func (l *Ledger) list(ctx context.Context, query string, args []any) ([]Notification, error) {
	var out []Notification
	err := l.q.Query(ctx, query, args, func(scan func(...any) error) error {
		n, err := scanRow(scan)
		out = append(out, n)
		return err
	})
	return out, err
}

// hold makes the agent runtime the owner of an agent-channel notification
// it puts in a prompt: dispatched, then LOCKED with a lease for its TTL.
// One the agent holds already (LOCKED, its lease running) is kept as it
// is; one whose lease ran out is claimed again (the watchdog may have
// escalated it meanwhile: then ErrStale or ErrIllegal).
func (l *Ledger) hold(ctx context.Context, n Notification) (Notification, error) {
	if n.Channel != ChannelAgent {
		return n, fmt.Errorf("%w: %s is not on the agent's channel", ErrIllegal, n.ID)
	}
	if n.State == StateLocked && l.now().Before(n.LeaseUntil) {
		return n, nil
	}
	var err error
	if n.State == StatePending {
		if n, err = l.Dispatch(ctx, n.ID); err != nil {
			return n, err
		}
	}
	ttl := DefaultTTL
	if n.TTLSeconds > 0 {
		ttl = time.Duration(n.TTLSeconds) * time.Second
	}
	return l.Claim(ctx, n.ID, n.OwnerLease, ttl)
}

// AgentAck delivers the agent-channel notifications of the user that the
// model acknowledged (llm.Options.Acknowledged), with the lease their rows
// carry: only what the agent holds (LOCKED on its channel); one the
// watchdog took over meanwhile is escalated, and stays the watchdog's.
func (l *Ledger) AgentAck(ctx context.Context, user string, ids []string) {
	for _, id := range ids {
		n, err := l.Get(ctx, id)
		if err != nil || n.UserID != user || n.Channel != ChannelAgent || n.State != StateLocked {
			continue
		}
		l.run(ctx, id, move{id: id, from: []State{StateLocked}, lease: n.OwnerLease, to: StateDelivered, set: "lease_until = 0"})
	}
}
