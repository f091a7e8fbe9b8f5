// Package postgres is the store for several agentplane instances sharing
// one PostgreSQL (pgx/v5). It implements store.Store and store.Querier;
// every Commit is one transaction, and sessions and audit chains are locked
// row by row, so instances on other machines never lose an update or fork
// a chain.
//
//	s, err := postgres.Open(ctx, "postgres://agentplane@db/agentplane", nil)
package postgres

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/internal/dsn"
	"github.com/agentplane/agentplane/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock that serializes migrations across
// instances starting together: with the hash of the schema migrated as
// its second key, so that instances on one schema take turns and those on
// different schemas (a database shared by several deployments or test
// runs, one schema each) do not wait for each other.
const migrationLock = 0x61676e74 // "agnt"

// Options configure Open. nil means defaults.
type Options struct {
	// Extensions are subsystems' tables, migrated at Open.
	Extensions []store.Extension
	// Notify makes every commit that appends to a session's audit chain
	// also NOTIFY channel agentplane_events with the session's id, in the
	// same transaction: other instances' event streams learn of it through
	// Listen.
	Notify bool
}

// Store is a PostgreSQL store, safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	url    string // for messages, without the password
	notify bool
	count  *counter // Stats
	// rebound are subsystems' queries with their ? placeholders rewritten
	// ($1, $2, …), once per text: at most maxRebound of them.
	rebound  sync.Map // query → rebound query
	nrebound atomic.Int64

	mu sync.Mutex
	// heads caches each session's last audit record (seq, hash) as this
	// store committed it, so a commit need not read it back. Another
	// instance appending to the chain makes an entry stale; the primary key
	// (session, seq) then refuses the commit, which reads the head and
	// tries again.
	heads map[string]chainHead
}

// chainHead is the last record of a session's audit chain.
type chainHead struct {
	seq  int64
	hash string
}

// SQLSTATEs that agentplane_check raises (migration 2).
const (
	stateVersion = "AP001" // the session is not at the version before the commit's
	stateToken   = "AP002" // the confirmation token is unknown or used
	stateRequest = "AP003" // the request key holds a finished request
	stateMoved   = "AP004" // a record snapshotting the caller's state: the session is no longer at its version
)

// staleRetries bounds how often a commit re-reads a stale chain head.
const staleRetries = 8

// Redact returns a PostgreSQL URL without its password, for messages.
func Redact(raw string) string { return dsn.Redact(raw) }

// Open connects, applies the embedded migrations and the extensions', and
// refuses a database whose schema is newer than this binary's. Errors name
// the server (never the password) and what to do.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: bad URL %s: %s", Redact(url), redactErr(err, url))
	}
	shown := fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	count := &counter{}
	cfg.ConnConfig.Tracer = count
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %s", shown, redactErr(err, url))
	}
	s := &Store{pool: pool, url: shown, heads: map[string]chainHead{}, notify: opts.Notify, count: count}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: cannot reach %s (%s): is the server running and the URL right?", shown, redactErr(err, url))
	}
	if err := s.migrate(ctx, opts.Extensions); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// redactErr is err's message with the URL's password hidden.
func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if pw, has := u.User.Password(); has && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// Heads returns the sequence number of each session's last audit record
// (absent: no record), in one query: one index probe per session.
func (s *Store) Heads(ctx context.Context, sessions []string) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, (SELECT max(seq) FROM audit WHERE session = id) FROM unnest($1::text[]) AS id`, sessions)
	if err != nil {
		return nil, s.fail("read chain heads", err)
	}
	defer rows.Close()
	out := make(map[string]int64, len(sessions))
	for rows.Next() {
		var id string
		var seq *int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, s.fail("read chain heads", err)
		}
		if seq != nil {
			out[id] = *seq
		}
	}
	return out, rows.Err()
}

// EventsChannel is the channel commits notify when Options.Notify is set.
const EventsChannel = "agentplane_events"

// Listen calls fn with the session id of every commit any instance
// notifies on EventsChannel (see Options.Notify), until ctx ends. It holds
// one connection of its own; when the connection drops, it connects again
// (after a pause growing to 5s) and calls fn with "" so the caller can
// catch up on what it missed.
func (s *Store) Listen(ctx context.Context, fn func(session string)) error {
	pause := 100 * time.Millisecond
	for {
		s.listenOnce(ctx, fn) // returns when the connection fails or ctx ends
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
		fn("") // notifications may have been missed
	}
}

// listenOnce listens on one connection until it fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context, fn func(string)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "UNLISTEN "+EventsChannel)
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // do not return a broken connection to the pool
			return err
		}
		fn(n.Payload)
	}
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Name returns the server, for messages: no password.
func (s *Store) Name() string { return s.url }

func (s *Store) migrate(ctx context.Context, exts []store.Extension) error {
	files, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(files)
	latest := len(files)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.fail("begin migration", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, hashtext(current_schema()))`, migrationLock); err != nil {
		return fmt.Errorf("postgres: %s: lock for migration: %w", s.url, err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("postgres: %s: %w", s.url, err)
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
		return fmt.Errorf("postgres: %s: read schema version: %w", s.url, err)
	}
	if have > latest {
		return fmt.Errorf("postgres: %s has schema version %d, newer than this agentplane's %d: use a newer agentplane, or another database", s.url, have, latest)
	}
	for v := have + 1; v <= latest; v++ {
		body, _ := migrations.ReadFile(files[v-1])
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return fmt.Errorf("postgres: %s: migrate to version %d: %w", s.url, v, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES ($1)`, v); err != nil {
			return fmt.Errorf("postgres: %s: %w", s.url, err)
		}
	}
	for _, ext := range exts {
		steps := ext.Migrations[store.Postgres]
		var have int
		err := tx.QueryRow(ctx, `SELECT version FROM schema_extensions WHERE name = $1`, ext.Name).Scan(&have)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: %s: read extension versions: %w", s.url, err)
		}
		if have > len(steps) {
			return fmt.Errorf("postgres: %s has %s tables of version %d, newer than this agentplane's %d: use a newer agentplane", s.url, ext.Name, have, len(steps))
		}
		for v := have + 1; v <= len(steps); v++ {
			if _, err := tx.Exec(ctx, steps[v-1]); err != nil {
				return fmt.Errorf("postgres: %s: migrate %s tables to version %d: %w", s.url, ext.Name, v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_extensions (name, version) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET version = excluded.version`, ext.Name, v); err != nil {
				return fmt.Errorf("postgres: %s: %w", s.url, err)
			}
		}
	}
	return tx.Commit(ctx)
}

// Session returns a copy of the session, or an error with code not_found.
func (s *Store) Session(ctx context.Context, id string) (*agentplane.Session, error) {
	var state []byte
	var seq *int64
	var hash *string
	// The chain's head comes in the same read: a commit after it (the
	// turn's) finds the head fresh even when another instance appended
	// last, instead of failing on a stale one and trying again.
	err := s.pool.QueryRow(ctx, `SELECT s.state, a.seq, a.hash FROM sessions s
		LEFT JOIN LATERAL (SELECT seq, hash FROM audit WHERE session = s.id ORDER BY seq DESC LIMIT 1) a ON TRUE
		WHERE s.id = $1`, id).Scan(&state, &seq, &hash)
	return s.session(id, state, seq, hash, err)
}

// SessionRequest returns the session and what the key holds, in one
// round trip; see store.Store.
func (s *Store) SessionRequest(ctx context.Context, key store.RequestKey) (*agentplane.Session, store.Request, bool, error) {
	var state, result []byte
	var seq, rseq, claimed *int64
	var hash, digest, rstate, running *string
	err := s.pool.QueryRow(ctx, `SELECT s.state, a.seq, a.hash, r.digest, r.state, r.result, r.seq, r.claimed_at, r.running FROM sessions s
		LEFT JOIN LATERAL (SELECT seq, hash FROM audit WHERE session = s.id ORDER BY seq DESC LIMIT 1) a ON TRUE
		LEFT JOIN requests r ON r.session = s.id AND r.principal = $2 AND r.request_id = $3
		WHERE s.id = $1`, key.SessionID, key.Principal, key.RequestID).Scan(&state, &seq, &hash, &digest, &rstate, &result, &rseq, &claimed, &running)
	sess, err := s.session(key.SessionID, state, seq, hash, err)
	if err != nil || digest == nil {
		return sess, store.Request{}, false, err
	}
	// the request's columns are NOT NULL: with its digest, all are there
	r := store.Request{Key: key, Digest: *digest, State: *rstate, Seq: *rseq}
	if err := s.fillRequest(&r, result, *claimed, running); err != nil {
		return nil, store.Request{}, false, err
	}
	return sess, r, true, nil
}

// session decodes a session read with its chain's head (or the read's
// error), keeping the head.
func (s *Store) session(id string, state []byte, seq *int64, hash *string, err error) (*agentplane.Session, error) {
	if err == nil {
		h := chainHead{}
		if seq != nil && hash != nil {
			h = chainHead{*seq, *hash}
		}
		s.setHead(id, h)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", id)
	}
	if err != nil {
		return nil, s.fail("load session "+id, err)
	}
	var sess agentplane.Session
	if err := json.Unmarshal(state, &sess); err != nil {
		return nil, fmt.Errorf("postgres: %s: session %s is corrupt: %w", s.url, id, err)
	}
	return &sess, nil
}

const readRequest = `SELECT digest, state, result, seq, claimed_at, running FROM requests WHERE session = $1 AND principal = $2 AND request_id = $3`

// Head returns the head of a session's audit chain as the session keeps
// it; see store.Store.
func (s *Store) Head(ctx context.Context, session string) (store.Head, error) {
	var h store.Head
	err := s.pool.QueryRow(ctx, `SELECT head_seq, head_hash FROM sessions WHERE id = $1`, session).Scan(&h.Seq, &h.Hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", session)
	}
	if err != nil {
		return h, s.fail("read chain head", err)
	}
	return h, nil
}

// Stale returns running requests claimed before before; see store.Store.
func (s *Store) Stale(ctx context.Context, before time.Time, limit int) ([]store.Request, error) {
	rows, err := s.pool.Query(ctx, `SELECT session, principal, request_id, digest, state, result, seq, claimed_at, running FROM requests
		WHERE state = 'running' AND claimed_at < $1 ORDER BY claimed_at, request_id LIMIT $2`, before.UnixNano(), max(limit, 0))
	if err != nil {
		return nil, s.fail("list stale requests", err)
	}
	defer rows.Close()
	var out []store.Request
	for rows.Next() {
		var key store.RequestKey
		r, _, err := s.scanRequest(keyed{rows, &key}, key)
		if err != nil {
			return nil, err
		}
		r.Key = key
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list stale requests", err)
	}
	return out, nil
}

// keyed scans a request row that starts with its key.
type keyed struct {
	row pgx.Row
	key *store.RequestKey
}

func (k keyed) Scan(dest ...any) error {
	return k.row.Scan(append([]any{&k.key.SessionID, &k.key.Principal, &k.key.RequestID}, dest...)...)
}

// Request returns what an idempotency key holds.
func (s *Store) Request(ctx context.Context, key store.RequestKey) (store.Request, bool, error) {
	return s.scanRequest(s.pool.QueryRow(ctx, readRequest, key.SessionID, key.Principal, key.RequestID), key)
}

func (s *Store) scanRequest(row pgx.Row, key store.RequestKey) (store.Request, bool, error) {
	r := store.Request{Key: key}
	var result []byte
	var running *string
	var claimed int64
	err := row.Scan(&r.Digest, &r.State, &result, &r.Seq, &claimed, &running)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Request{}, false, nil
	}
	if err != nil {
		return store.Request{}, false, s.fail("load request "+key.RequestID, err)
	}
	if err := s.fillRequest(&r, result, claimed, running); err != nil {
		return store.Request{}, false, err
	}
	return r, true, nil
}

// fillRequest sets a request's columns beyond its digest, state and seq.
func (s *Store) fillRequest(r *store.Request, result []byte, claimed int64, running *string) error {
	r.ClaimedAt = time.Unix(0, claimed).UTC()
	if running != nil {
		r.Running = json.RawMessage(*running)
	}
	if result != nil {
		r.Result = new(agentplane.ExecutionResult)
		if err := json.Unmarshal(result, r.Result); err != nil {
			return fmt.Errorf("postgres: %s: result of request %s is corrupt: %w", s.url, r.Key.RequestID, err)
		}
	}
	return nil
}

// Claim claims an idempotency key; see store.Store.
func (s *Store) Claim(ctx context.Context, c store.Claim) (store.Request, bool, error) {
	const claim = `INSERT INTO requests (session, principal, request_id, digest, state, result, claimed_at, running) VALUES ($1, $2, $3, $4, 'running', NULL, $5, $9)
		ON CONFLICT (session, principal, request_id) DO UPDATE SET claimed_at = excluded.claimed_at, running = COALESCE(excluded.running, requests.running)
		WHERE requests.state = 'running' AND requests.claimed_at < $6 AND requests.digest = excluded.digest RETURNING 1`
	var running *string
	if len(c.Running) > 0 {
		running = new(string(c.Running))
	}
	args := []any{c.Key.SessionID, c.Key.Principal, c.Key.RequestID, c.Digest, c.Now.UnixNano(), c.StaleBefore.UnixNano(), nil, nil, running}
	query := claim
	if c.Use != nil {
		// One statement: the key and the confirmation, or neither (the
		// check aborts it). A concurrent use of the same confirmation waits
		// for this one's row lock and then finds it used.
		column := "digest"
		key, pending := c.Use.Key()
		if pending {
			column = "pending"
		}
		query = `WITH c AS (` + claim + `),
			u AS (UPDATE confirmations SET used = TRUE WHERE ` + column + ` = $7 AND NOT used AND EXISTS (SELECT 1 FROM c) RETURNING 1)
			SELECT 1 FROM c WHERE agentplane_check(EXISTS (SELECT 1 FROM u), $8, 'the confirmation was used already')`
		args[6], args[7] = key, stateToken
	} else {
		query = strings.Replace(query, "$9", "$7", 1)
		args = append(args[:6], running)
	}
	var one int
	err := s.pool.QueryRow(ctx, query, args...).Scan(&one)
	if err == nil {
		s.count.txs.Add(1)
		return store.Request{}, true, nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == stateToken {
		return store.Request{}, false, store.ErrConfirmationUsed
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.Request{}, false, s.fail("claim request "+c.Key.RequestID, err)
	}
	r, _, err := s.Request(ctx, c.Key)
	return r, false, err
}

// Confirmation returns an issued confirmation token by its digest.
func (s *Store) Confirmation(ctx context.Context, digest string) (store.Confirmation, bool, error) {
	var raw []byte
	var used bool
	err := s.pool.QueryRow(ctx, `SELECT confirmation, used FROM confirmations WHERE digest = $1`, digest).Scan(&raw, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Confirmation{}, false, nil
	}
	if err != nil {
		return store.Confirmation{}, false, s.fail("load confirmation", err)
	}
	var c store.Confirmation
	if err := json.Unmarshal(raw, &c); err != nil {
		return store.Confirmation{}, false, fmt.Errorf("postgres: %s: confirmation is corrupt: %w", s.url, err)
	}
	c.Used = used
	return c, true, nil
}

// Records returns the session's audit records after a sequence number, in
// order.
func (s *Store) Records(ctx context.Context, session string, after int64) ([]audit.Record, error) {
	return s.auditRows(ctx, session, `SELECT record FROM audit WHERE session = $1 AND seq > $2 ORDER BY seq`, session, after)
}

// RecordsBefore returns the last limit audit records of the session
// below a sequence number (≤ 0: the end), in order.
func (s *Store) RecordsBefore(ctx context.Context, session string, before int64, limit int) ([]audit.Record, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	return s.auditRows(ctx, session, `SELECT record FROM (SELECT seq, record FROM audit WHERE session = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3) page ORDER BY seq`,
		session, before, max(limit, 1))
}

// RecordsAfter returns the first limit audit records of the session above
// a sequence number, in order.
func (s *Store) RecordsAfter(ctx context.Context, session string, after int64, limit int) ([]audit.Record, error) {
	return s.auditRows(ctx, session, `SELECT record FROM audit WHERE session = $1 AND seq > $2 ORDER BY seq LIMIT $3`, session, after, max(limit, 1))
}

// auditRows runs a query of a session's audit records.
func (s *Store) auditRows(ctx context.Context, session, query string, args ...any) ([]audit.Record, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.fail("read audit of "+session, err)
	}
	defer rows.Close()
	recs, err := audit.DecodeRows(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: audit of %s: %w", s.url, session, err)
	}
	return recs, nil
}

// Sessions returns a page of an owner's sessions, newest first.
func (s *Store) Sessions(ctx context.Context, q store.SessionQuery) (store.SessionPage, error) {
	n := q.PageSize()
	query := `SELECT state, created FROM sessions WHERE owner = $1 ORDER BY created DESC, id DESC LIMIT $2`
	args := []any{q.Owner, n + 1}
	if q.Cursor != "" {
		created, id, err := store.ParseSessionCursor(q.Cursor)
		if err != nil {
			return store.SessionPage{}, err
		}
		query = `SELECT state, created FROM sessions WHERE owner = $1 AND (created, id) < ($3, $4) ORDER BY created DESC, id DESC LIMIT $2`
		args = append(args, created, id)
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return store.SessionPage{}, s.fail("list sessions", err)
	}
	defer rows.Close()
	var page store.SessionPage
	err = store.EachRow(rows, func(scan func(...any) error) error {
		var state []byte
		var created int64
		if err := scan(&state, &created); err != nil {
			return err
		}
		return page.Add(state, created, n)
	})
	if err != nil {
		return store.SessionPage{}, fmt.Errorf("postgres: %s: list sessions: %w", s.url, err)
	}
	return page, nil
}

// Dialect returns store.Postgres.
func (s *Store) Dialect() string { return store.Postgres }

// Query runs a read-only query of a subsystem's tables (? placeholders).
func (s *Store) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	return queryRows(ctx, s.pool, s.rebind(query), args, row, s.fail)
}

// rebind is store.Rebind(query), rewritten once per query text.
func (s *Store) rebind(query string) string {
	if q, ok := s.rebound.Load(query); ok {
		return q.(string)
	}
	q := store.Rebind(query)
	if s.nrebound.Load() < maxRebound {
		if _, loaded := s.rebound.LoadOrStore(query, q); !loaded {
			s.nrebound.Add(1)
		}
	}
	return q
}

// maxRebound bounds the rebound queries kept: the subsystems' are far
// fewer; queries built at run time beyond them are rewritten each time.
const maxRebound = 1024

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryRows runs a query whose placeholders are PostgreSQL's already.
func queryRows(ctx context.Context, q querier, query string, args []any, row func(scan func(dest ...any) error) error, fail func(string, error) error) error {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return fail("query", err)
	}
	defer rows.Close()
	return store.EachRow(rows, row)
}

// Commit applies c atomically; see store.Store. Its statements reach the
// server in one round trip (a batch) and run in one transaction: the
// request, version and token checks abort it when they fail, and the audit
// chain's primary key refuses a record sealed on a stale head (then the
// head is read again and the commit retried). Concurrent commits from any
// number of instances serialize per session on the session's row.
func (s *Store) Commit(ctx context.Context, c *store.Commit) error {
	enc, err := store.Encode(c)
	if err != nil {
		return err
	}
	read := false // whether a snapshotting record reads the state back
	for attempt := 0; ; attempt++ {
		sealed, err := s.commitOnce(ctx, c, enc, read)
		if err == nil {
			s.count.txs.Add(1)
			if c.Record != nil {
				s.setHead(c.SessionID, chainHead{sealed.Seq, sealed.Hash})
				*c.Record = sealed
			}
			return nil
		}
		s.dropHead(c.SessionID)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			switch {
			case pgErr.Code == stateVersion:
				return agentplane.Errorf(agentplane.CodeVersionConflict, "%s", pgErr.Message)
			case pgErr.Code == stateToken:
				return agentplane.Errorf(agentplane.CodeConfirmationInvalid, "%s", pgErr.Message)
			case pgErr.Code == stateRequest:
				return store.ErrRequestDone
			case pgErr.Code == stateMoved && !read:
				read = true // the session moved on: record it as stored
				attempt--
				continue
			case pgErr.Code == "23505" && pgErr.ConstraintName == "audit_pkey" && attempt < staleRetries:
				// the chain moved on: read its head and seal again; a record
				// snapshotting the state does so under the session's lock,
				// which concurrent ones then queue on instead of racing
				read = read || store.Snapshot(c)
				continue
			case pgErr.Code == "23505" && pgErr.ConstraintName == "audit_pkey":
				return agentplane.Errorf(agentplane.CodeVersionConflict, "the audit chain of %q moved concurrently", c.SessionID)
			}
		}
		var opErr opError
		if errors.As(err, &opErr) {
			return opErr.err
		}
		return s.fail("commit", err)
	}
}

// opError is a subsystem op's own error, passed through as it is.
type opError struct{ err error }

func (e opError) Error() string { return e.err.Error() }

// commitOnce seals c's record on the chain head it knows and sends c's
// statements as one batch. A record that snapshots the state the caller
// read is appended only while the session is at that version (else the
// batch fails with stateMoved); read, it snapshots the state as stored:
// in a transaction that locks the session's row and reads the state
// first, so no change of the session commits between the snapshot and the
// record. A commit with subsystem ops runs in a transaction too, the ops
// after the batch.
func (s *Store) commitOnce(ctx context.Context, c *store.Commit, enc store.Encoded, read bool) (audit.Record, error) {
	var sealed audit.Record
	if st, ok := alone(c); ok {
		var err error
		if st.Row == nil {
			_, err = s.pool.Exec(ctx, s.rebind(st.Query), st.Args...)
		} else {
			err = queryRows(ctx, s.pool, s.rebind(st.Query), st.Args, st.Row, func(_ string, err error) error { return err })
		}
		if err != nil {
			return sealed, opError{err}
		}
		return sealed, nil
	}
	send := func(b *pgx.Batch) error { return s.pool.SendBatch(ctx, b).Close() }
	var q rowQuerier = s.pool // a transaction reads through its own connection: never a second one while it holds the first
	snapshot := store.Snapshot(c)
	read = read && snapshot
	if read || len(c.Ops) > 0 {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return sealed, err
		}
		defer tx.Rollback(ctx)
		q = tx
		if read {
			var current []byte
			err = tx.QueryRow(ctx, `SELECT state FROM sessions WHERE id = $1 FOR UPDATE`, c.SessionID).Scan(&current)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return sealed, err
			}
			if current != nil {
				var cur agentplane.Session
				if json.Unmarshal(current, &cur) == nil {
					sealed.State = &cur
					enc.Record.State = nil
				}
			}
		}
		send = func(b *pgx.Batch) error {
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			t := &txn{s: s, tx: tx}
			for _, op := range c.Ops {
				if err := op.Apply(ctx, t); err != nil {
					return opError{err}
				}
			}
			return tx.Commit(ctx)
		}
	}
	if c.Record != nil {
		state := sealed.State
		sealed = *c.Record
		if state != nil {
			sealed.State = state
		}
		head, err := s.head(ctx, q, c.SessionID)
		if err != nil {
			return sealed, err
		}
		if err := audit.SealEncoded(&sealed, head.seq, head.hash, enc.Record); err != nil {
			return sealed, err
		}
	}
	b := s.batch(c, enc, &sealed, snapshot && !read)
	return sealed, send(b)
}

// alone reports a commit of one store.Statement and nothing else: it runs
// as that statement, with no transaction around it (one round trip).
func alone(c *store.Commit) (store.Statement, bool) {
	if c.Record != nil || c.Session != nil || c.Request != nil || c.Issue != nil || len(c.Ops) != 1 {
		return store.Statement{}, false
	}
	switch st := c.Ops[0].(type) {
	case store.Statement:
		return st, true
	case *store.Statement:
		return *st, st != nil
	}
	return store.Statement{}, false
}

// batch queues c's statements: the request, token and version checks, the
// sealed record and an issued confirmation token. With check, the record
// (one that snapshots the caller's state) lands only while the session
// is at the state's version.
func (s *Store) batch(c *store.Commit, enc store.Encoded, sealed *audit.Record, check bool) *pgx.Batch {
	b := &pgx.Batch{}
	if q := c.Request; q != nil {
		b.Queue(`WITH u AS (INSERT INTO requests (session, principal, request_id, digest, state, result, seq, claimed_at) VALUES ($1, $2, $3, $4, 'done', $5, $6, $7)
			ON CONFLICT (session, principal, request_id) DO UPDATE SET state = 'done', result = excluded.result, seq = excluded.seq, running = NULL WHERE requests.state = 'running' RETURNING 1)
			SELECT agentplane_check(EXISTS (SELECT 1 FROM u), $8, 'request finished already')`,
			q.Key.SessionID, q.Key.Principal, q.Key.RequestID, q.Digest, enc.Result, sealed.Seq, q.ClaimedAt.UnixNano(), stateRequest)
	}
	if c.Session != nil {
		state := enc.Session
		msg := fmt.Sprintf("session %q is not at version %d; cannot store version %d", c.Session.ID, c.Session.Version-1, c.Session.Version)
		// with its chain's head when the commit appends a record
		if c.Session.Version == 1 {
			b.Queue(`WITH u AS (INSERT INTO sessions (id, version, state, owner, created, head_seq, head_hash) VALUES ($1, 1, $2, $3, $4, $7, $8) ON CONFLICT (id) DO NOTHING RETURNING 1)
				SELECT agentplane_check(EXISTS (SELECT 1 FROM u), $5, $6)`, c.Session.ID, state, c.Session.Owner, store.CreatedAt(c).UnixNano(), stateVersion, msg, sealed.Seq, sealed.Hash)
		} else if c.Record != nil {
			b.Queue(`WITH u AS (UPDATE sessions SET version = $2, state = $3, head_seq = $6, head_hash = $7 WHERE id = $1 AND version = $2 - 1 RETURNING 1)
				SELECT agentplane_check(EXISTS (SELECT 1 FROM u), $4, $5)`, c.Session.ID, c.Session.Version, state, stateVersion, msg, sealed.Seq, sealed.Hash)
		} else {
			b.Queue(`WITH u AS (UPDATE sessions SET version = $2, state = $3 WHERE id = $1 AND version = $2 - 1 RETURNING 1)
				SELECT agentplane_check(EXISTS (SELECT 1 FROM u), $4, $5)`, c.Session.ID, c.Session.Version, state, stateVersion, msg)
		}
	}
	if c.Record != nil {
		switch {
		case c.Session != nil: // the session's write above moved its head
			b.Queue(`INSERT INTO audit (session, seq, hash, record) VALUES ($1, $2, $3, $4)`, c.SessionID, sealed.Seq, sealed.Hash, string(sealed.Raw))
		case check: // the record and the head, while the session is at the record's state (its row locked)
			b.Queue(`WITH u AS (UPDATE sessions SET head_seq = $2, head_hash = $3 WHERE id = $1 AND version = $5 RETURNING 1),
				a AS (INSERT INTO audit (session, seq, hash, record) SELECT $1, $2, $3, $4 FROM u)
				SELECT agentplane_check(EXISTS (SELECT 1 FROM u), $6, 'the session moved on')`,
				c.SessionID, sealed.Seq, sealed.Hash, string(sealed.Raw), c.Record.State.Version, stateMoved)
		default: // the record and the session's head, in one statement
			b.Queue(`WITH a AS (INSERT INTO audit (session, seq, hash, record) VALUES ($1, $2, $3, $4))
				UPDATE sessions SET head_seq = $2, head_hash = $3 WHERE id = $1`, c.SessionID, sealed.Seq, sealed.Hash, string(sealed.Raw))
		}
		if s.notify {
			b.Queue(`SELECT pg_notify($1, $2)`, EventsChannel, c.SessionID)
		}
	}
	if c.Issue != nil {
		var pending *string // NULL
		if c.Issue.Pending {
			k := store.PendingKey(c.Issue.SessionID, c.Issue.Version)
			pending = &k
		}
		b.Queue(`INSERT INTO confirmations (digest, used, confirmation, pending) VALUES ($1, FALSE, $2, $3)`, c.Issue.Digest, enc.Issue, pending)
	}
	return b
}

// txn is the store.Tx of a commit's transaction, for subsystems' ops.
type txn struct {
	s  *Store
	tx pgx.Tx
}

func (t *txn) Dialect() string { return store.Postgres }

func (t *txn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, t.s.rebind(query), args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (t *txn) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	return queryRows(ctx, t.tx, t.s.rebind(query), args, row, func(_ string, err error) error { return err })
}

// head returns the session's chain head, from the cache or the database.
// rowQuerier reads one row: the pool, or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) head(ctx context.Context, q rowQuerier, session string) (chainHead, error) {
	s.mu.Lock()
	h, ok := s.heads[session]
	s.mu.Unlock()
	if ok {
		return h, nil
	}
	err := q.QueryRow(ctx, `SELECT seq, hash FROM audit WHERE session = $1 ORDER BY seq DESC LIMIT 1`, session).Scan(&h.seq, &h.hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return h, err // Commit names the server
	}
	return h, nil
}

// setHead caches a session's head, as committed or read, unless the cache
// holds a later one (this store's own commit since the read).
func (s *Store) setHead(session string, h chainHead) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.heads[session]; ok && cur.seq >= h.seq {
		return // a later one is known: a commit or read since h was seen
	}
	if len(s.heads) >= maxHeads {
		clear(s.heads)
	}
	s.heads[session] = h
}

func (s *Store) dropHead(session string) {
	s.mu.Lock()
	delete(s.heads, session)
	s.mu.Unlock()
}

// fail wraps an error of an operation, naming the server; when the
// connection itself failed, it says what to check.
func (s *Store) fail(op string, err error) error {
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("postgres: %s: %s: %w (the connection failed: check that the server is running and reachable at that address)", s.url, op, err)
	}
	return fmt.Errorf("postgres: %s: %s: %w", s.url, op, err)
}

// maxHeads bounds the chain-head cache; it starts over when full.
const maxHeads = 100_000

// counter counts what the store's connections send (Stats): every query
// and every batch is a round trip, every statement in them a statement
// unless it is transaction control. It is the pool's tracer.
type counter struct {
	statements, roundTrips, txs atomic.Int64

	// trace, set only by tests (export_test.go), sees every statement the
	// store's connections run with its arguments: before a query runs, as
	// a batch's statement is read back.
	trace func(query string, args []any)
}

// TraceQueryStart counts a query: a round trip, and a statement unless it
// begins or ends a transaction.
func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.roundTrips.Add(1)
	if !control(data.SQL) {
		c.statements.Add(1)
		if c.trace != nil {
			c.trace(data.SQL, data.Args)
		}
	}
	return ctx
}

// TraceQueryEnd does nothing.
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts a batch: one round trip.
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}

// TraceBatchQuery counts a statement of a batch.
func (c *counter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	c.statements.Add(1)
	if c.trace != nil {
		c.trace(data.SQL, data.Args)
	}
}

// TraceBatchEnd does nothing.
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// control reports transaction control: BEGIN, COMMIT, ROLLBACK.
func control(sql string) bool {
	if len(sql) > 8 {
		return false
	}
	switch strings.ToLower(sql) {
	case "begin", "commit", "rollback":
		return true
	}
	return false
}

// Stats returns the store's counters; see store.Stats.
func (s *Store) Stats() store.Stats {
	return store.Stats{Statements: s.count.statements.Load(), Transactions: s.count.txs.Load(), RoundTrips: s.count.roundTrips.Load()}
}
