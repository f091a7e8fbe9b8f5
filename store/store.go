// Package store is the contract between agentplane and its databases:
// sessions with their versions, the audit chains, idempotency keys with
// the results they produced, and confirmation tokens (kept as digests).
// Every change is one unit of work, a Commit, applied whole or not at all.
//
// Drivers (store/memstore, store/sqlite, store/postgres) import the domain
// types, package audit and this package, nothing bigger; one conformance
// suite, store/storetest, is the contract they are held to.
//
// Subsystems with tables of their own (the notification ledger, workflows)
// extend the unit of work without touching a driver's core: they declare
// an Extension (their migrations, per SQL dialect) when the store is
// opened, put their writes in a Commit as Ops, which run in the commit's
// transaction, and read through the Querier a SQL driver also is.
//
//	st, _ := sqlite.Open(context.Background(), path, &sqlite.Options{Extensions: []store.Extension{notify.Extension}})
//	err := st.Commit(ctx, &store.Commit{SessionID: id, Session: next, Record: rec, Ops: []store.Op{op}})
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
)

// Store is what agentplane keeps. Implementations are safe for concurrent
// use; Commit is atomic.
type Store interface {
	// Session returns a copy of the session, or an error with code
	// not_found.
	Session(ctx context.Context, id string) (*agentplane.Session, error)
	// Records returns the session's audit records with sequence numbers
	// above after, in order, each with the bytes it is stored as (Raw).
	Records(ctx context.Context, session string, after int64) ([]audit.Record, error)
	// RecordsBefore returns the last limit (at least 1) audit records of
	// the session with sequence numbers below before (before ≤ 0: the
	// chain's end), in order: a page read from the end, whose cost does
	// not grow with the chain.
	RecordsBefore(ctx context.Context, session string, before int64, limit int) ([]audit.Record, error)
	// RecordsAfter returns the first limit (at least 1) audit records of
	// the session with sequence numbers above after, in order.
	RecordsAfter(ctx context.Context, session string, after int64, limit int) ([]audit.Record, error)
	// Head returns the head of the session's audit chain as the session
	// keeps it, moved in the same statement as each record is appended:
	// the chain read back must end there (a chain cut at its tail does
	// not). An error with code not_found when there is no such session.
	Head(ctx context.Context, session string) (Head, error)
	// Sessions returns a page of an owner's sessions, newest first. A
	// cursor that is not one Sessions returned is an error with code
	// invalid_input.
	Sessions(ctx context.Context, q SessionQuery) (SessionPage, error)
	// Request returns what is recorded under an idempotency key.
	Request(ctx context.Context, key RequestKey) (Request, bool, error)
	// Claim records that the request is running, before anything runs,
	// unless the key is taken: then it returns the request that holds it
	// and false. A running claim older than c.StaleBefore is taken over
	// (its holder died), and Claim returns true. A claim that consumes a
	// confirmation (c.Use) marks it used in the same transaction; when the
	// confirmation is unknown or used already, Claim fails with code
	// confirmation_invalid and writes nothing.
	Claim(ctx context.Context, c Claim) (Request, bool, error)
	// Stale returns up to limit requests still running that were claimed
	// before before, oldest first: what instances that stopped while they
	// ran left behind, for the gate to take over.
	Stale(ctx context.Context, before time.Time, limit int) ([]Request, error)
	// Confirmation returns an issued confirmation token by its digest.
	Confirmation(ctx context.Context, digest string) (Confirmation, bool, error)
	// Commit applies c atomically: all of it or, with an error, none.
	//
	// It fails with code version_conflict when c.Session's version is not
	// one more than the stored version (1 for a new session); with
	// ErrRequestDone when c.Request's key holds a finished request
	// already; with the error of an Op that fails; and with an error that
	// names the record when c.Record holds a value the audit reader would
	// refuse.
	Commit(ctx context.Context, c *Commit) error
	// Close releases the store. Commits already waiting are applied first.
	Close() error
}

// SessionRequester is a Store that reads a session and what one of its
// idempotency keys holds in one statement (SQLite, PostgreSQL): the
// session, or an error with code not_found, and the key's request.
type SessionRequester interface {
	SessionRequest(ctx context.Context, key RequestKey) (*agentplane.Session, Request, bool, error)
}

// SessionRequest returns s.Session(key.SessionID) and s.Request(key): in
// one read when s is a SessionRequester, else in two. (Optional, so that
// a store that wraps another and answers Session itself — the replay's —
// is not read past.)
func SessionRequest(ctx context.Context, s Store, key RequestKey) (*agentplane.Session, Request, bool, error) {
	if sr, ok := s.(SessionRequester); ok {
		return sr.SessionRequest(ctx, key)
	}
	// the key first: a request finished by then has its effects in the
	// session read after it
	r, ok, err := s.Request(ctx, key)
	if err != nil {
		return nil, Request{}, false, err
	}
	sess, err := s.Session(ctx, key.SessionID)
	if err != nil {
		return nil, Request{}, false, err
	}
	return sess, r, ok, nil
}

// Commit is one unit of work.
type Commit struct {
	SessionID string
	// Session is the new state; nil when the state is unchanged.
	Session *agentplane.Session
	// Record is appended to the session's audit chain; the store seals it
	// (and the caller sees the sealed record, with Raw, afterwards). When
	// Session is nil and the record has a State, the record holds the
	// session as stored when the commit applies — the state after an event
	// that changed nothing, even if another writer moved it since it was
	// read: the caller's State when the stored session is still at its
	// version (a version names one state; nothing is read back), else the
	// stored one.
	Record *audit.Record
	// Request records the result under its idempotency key: it finishes a
	// claimed request, or records one that ran nothing outside the commit.
	// The store sets its Seq to the commit's record.
	Request *Request
	// Issue stores a new confirmation token (its digest). A token is used
	// up by the Claim of the invocation it confirms, never by a commit.
	Issue *Confirmation
	// Ops are writes of subsystems' own tables, run in order in the
	// commit's transaction after everything above.
	Ops []Op
}

// Head is where a session's audit chain ends: its last record's
// sequence number and hash (0 and "" before the first).
type Head struct {
	Seq  int64
	Hash string
}

// SessionQuery asks for a page of an owner's sessions.
type SessionQuery struct {
	Owner  string // whose sessions; "" lists the sessions nobody owns
	Cursor string // where the previous page ended (SessionPage.Next); "" for the first page
	Limit  int    // at most this many; 0 means DefaultSessionLimit, at most MaxSessionLimit
}

// Session page sizes.
const (
	DefaultSessionLimit = 50
	MaxSessionLimit     = 500
)

// SessionPage is a page of sessions, newest first.
type SessionPage struct {
	Sessions []SessionInfo
	Next     string // the cursor of the next page; "" when this is the last
}

// SessionInfo is a listed session with when it was created.
type SessionInfo struct {
	Session *agentplane.Session
	Created time.Time
}

// Add adds a session read from a driver's rows (its state as JSON and
// when it was created, Unix nanoseconds) to a page of at most n: a driver
// asks for n+1 rows, and the one past n only sets Next.
func (p *SessionPage) Add(state []byte, created int64, n int) error {
	if len(p.Sessions) == n {
		last := p.Sessions[n-1]
		p.Next = SessionCursor(last.Created.UnixNano(), last.Session.ID)
		return nil
	}
	var s agentplane.Session
	if err := json.Unmarshal(state, &s); err != nil {
		return fmt.Errorf("a session is corrupt: %w", err)
	}
	p.Sessions = append(p.Sessions, SessionInfo{Session: &s, Created: time.Unix(0, created).UTC()})
	return nil
}

// PageSize returns q.Limit within bounds.
func (q SessionQuery) PageSize() int {
	switch {
	case q.Limit <= 0:
		return DefaultSessionLimit
	case q.Limit > MaxSessionLimit:
		return MaxSessionLimit
	}
	return q.Limit
}

// SessionCursor is the cursor after a session created at created (Unix
// nanoseconds) with this id: sessions are ordered by creation, then id,
// newest first.
func SessionCursor(created int64, id string) string {
	return strconv.FormatInt(created, 10) + "." + id
}

// ParseSessionCursor reads a cursor SessionCursor made.
func ParseSessionCursor(c string) (created int64, id string, err error) {
	n, rest, ok := strings.Cut(c, ".")
	if ok {
		created, err = strconv.ParseInt(n, 10, 64)
	}
	if !ok || err != nil || rest == "" {
		return 0, "", agentplane.Errorf(agentplane.CodeInvalidInput, "cursor %q is not one a session listing returned", c)
	}
	return created, rest, nil
}

// RequestKey is an idempotency key: a request id means one request only
// within a session and for one principal.
type RequestKey struct {
	SessionID string
	Principal string
	RequestID string
}

// Request states.
const (
	RequestRunning = "running" // claimed: something may be running for it
	RequestDone    = "done"    // finished: Result is what it produced
)

// Request is what an idempotency key holds.
type Request struct {
	Key RequestKey
	// Digest identifies the invocation the key was used for (action and
	// canonical arguments); the same key with another digest is refused.
	Digest string
	State  string
	Result *agentplane.ExecutionResult // when done, and the request ran an action
	// Seq is the sequence number of the audit record the request
	// produced, when done; 0 when it produced none.
	Seq       int64
	ClaimedAt time.Time
	// Running, while the request runs, is what it runs, as the claim said
	// (Claim.Running): what a takeover records as having maybe acted.
	Running json.RawMessage
}

// Claim asks for an idempotency key before the request runs.
type Claim struct {
	Key         RequestKey
	Digest      string
	Now         time.Time
	StaleBefore time.Time // a running claim made before this is taken over
	// Use, when set, is the confirmation the request consumes: the claim
	// is its one use, so of concurrent requests presenting the same
	// confirmation exactly one runs.
	Use *Use
	// Running is what the request runs, as JSON the caller defines (the
	// gate: the intent, and a turn's input and decision), kept while it
	// runs. A claim taking over a stale one keeps the first claim's when
	// it brings none.
	Running json.RawMessage
}

// Use names the confirmation a claim consumes: the token presented (its
// digest), or, for the human's "yes" in a turn, the pending confirmation
// the session held at a version.
type Use struct {
	Digest    string
	SessionID string
	Version   int64
}

// PendingKey is how stores find the confirmation issued with a session's
// pending confirmation at a version (Confirmation.Pending).
func PendingKey(session string, version int64) string {
	return strconv.FormatInt(version, 10) + ":" + session
}

// Key returns the lookup the use asks for: its digest, or the pending
// key; pending reports which.
func (u *Use) Key() (key string, pending bool) {
	if u.Digest != "" {
		return u.Digest, false
	}
	return PendingKey(u.SessionID, u.Version), true
}

// ErrConfirmationUsed is Claim's error when the confirmation it would
// consume is unknown or used already.
var ErrConfirmationUsed = agentplane.Errorf(agentplane.CodeConfirmationInvalid, "the confirmation was used already")

// ErrRequestDone is Commit's error when the commit's request key holds a
// finished request: another execution with the same key finished first.
var ErrRequestDone = errors.New("store: the request was finished already")

// Confirmation is an issued confirmation token: the exact invocation it
// confirms. The token itself is never stored, only its digest.
type Confirmation struct {
	Digest    string    `json:"digest"` // SHA-256 of the token, hex
	SessionID string    `json:"session_id"`
	Action    string    `json:"action"`  // the command id or tool name
	Binding   string    `json:"binding"` // a command's resolved id, or a tool's arguments as canonical JSON
	Version   int64     `json:"version"` // the session version the invocation must run at
	ExpiresAt time.Time `json:"expires_at"`
	Used      bool      `json:"used"`
	// Pending says the token was issued with the session's pending
	// confirmation at Version: the human's "yes" in a turn uses it up as
	// the token would (Use with SessionID and Version).
	Pending bool `json:"pending,omitempty"`
}

// SQL dialects of Tx and of Extension migrations.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Op is a subsystem's write, run inside a commit's transaction. An error
// undoes the whole commit.
type Op interface {
	Apply(ctx context.Context, tx Tx) error
}

// OpFunc adapts a function to Op.
type OpFunc func(ctx context.Context, tx Tx) error

// Apply calls f.
func (f OpFunc) Apply(ctx context.Context, tx Tx) error { return f(ctx, tx) }

// Statement is an Op of one statement (? placeholders) whose result
// rows, if Row is set, are passed to Row. A commit of one Statement and
// nothing else may be run as that statement alone, with no transaction
// around it — one statement is atomic by itself: on PostgreSQL one round
// trip instead of three (BEGIN, the statement, COMMIT). Row must only
// read what the statement returns: an error it returns fails the commit
// but, run alone, does not undo the statement.
type Statement struct {
	Query string
	Args  []any
	Row   func(scan func(dest ...any) error) error // nil: no rows wanted
}

// Apply runs the statement in tx.
func (s Statement) Apply(ctx context.Context, tx Tx) error {
	if s.Row == nil {
		_, err := tx.Exec(ctx, s.Query, s.Args...)
		return err
	}
	return tx.Query(ctx, s.Query, s.Args, s.Row)
}

// Tx is the transaction an Op writes in. Queries use ? placeholders in
// either dialect.
type Tx interface {
	Dialect() string
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query and calls row for each result row.
	Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error
}

// Querier reads subsystems' tables outside a commit; the SQL drivers are
// Queriers (check with a type assertion).
type Querier interface {
	Dialect() string
	// Query runs a read-only query (? placeholders) and calls row for each
	// result row.
	Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error
}

// Stats are a SQL store's counters since it opened: what its callers
// have cost the database. make cost reads them (bench/cost).
type Stats struct {
	// Statements is how many SQL statements the store ran, reads and
	// writes, its subsystems' included; transaction control (BEGIN,
	// COMMIT, savepoints) is not counted.
	Statements int64
	// Transactions is how many write transactions committed (SQLite: a
	// group of commits shares one).
	Transactions int64
	// RoundTrips is how many times the client waited for the server
	// (PostgreSQL: a query, a batch, a BEGIN or a COMMIT each); 0 for
	// SQLite, which runs in the process.
	RoundTrips int64
}

// Counted is a store that keeps Stats (the SQL stores do).
type Counted interface {
	Stats() Stats
}

// Rows is a result set: database/sql's and pgx's rows both are.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// EachRow calls row for each row of rows, with the row's Scan, and returns
// the first error: row's or the result set's. Drivers use it to implement
// Querier and Tx.Query.
func EachRow(rows Rows, row func(scan func(dest ...any) error) error) error {
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Extension is a subsystem's tables: its migrations, in order, for each
// dialect it supports. A store applies the ones it has not applied yet
// when it opens and refuses a database whose extension is newer.
type Extension struct {
	Name       string
	Migrations map[string][]string // dialect -> statements, one migration each
}

// Rebind rewrites ? placeholders to PostgreSQL's $1, $2, …, leaving
// question marks inside quoted strings and identifiers alone.
func Rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// CreatedAt is when the session a commit creates was created: the time of
// its record, or now.
func CreatedAt(c *Commit) time.Time {
	if c.Record != nil && !c.Record.Time.IsZero() {
		return c.Record.Time
	}
	return time.Now()
}

// Encoded is a commit's JSON, made once and before the commit is applied
// (by the committing goroutine, not a group commit's leader): the new
// state and the request's result, each in the canonical form its audit
// record holds it in, so the record is sealed with the rows' bytes
// (audit.SealEncoded) instead of encoding them again; and the issued
// token. SQL drivers store these.
type Encoded struct {
	// Session is c.Session as JSON, for its row; nil when none.
	Session []byte
	// Result is the request's result as JSON, without the session (the
	// caller's); nil (SQL NULL) for a request that ran no action or when
	// the commit finishes none.
	Result []byte
	// Issue is c.Issue as JSON; nil when none.
	Issue []byte
	// Record is the record's state and result, encoded: the rows' bytes
	// where the record holds the same values, its own where not.
	Record audit.Encoded
}

// Encode encodes c's JSON; see Encoded.
func Encode(c *Commit) (Encoded, error) {
	var e Encoded
	var err error
	if c.Session != nil {
		if e.Session, err = audit.Canonical(c.Session); err != nil {
			return e, fmt.Errorf("store: encode session %s: %w", c.Session.ID, err)
		}
	}
	if c.Request != nil && c.Request.Result != nil {
		// the result's session is json:"-": not in its JSON
		if e.Result, err = audit.Canonical(c.Request.Result); err != nil {
			return e, fmt.Errorf("store: encode the result of request %s: %w", c.Request.Key.RequestID, err)
		}
	}
	if c.Issue != nil {
		if e.Issue, err = json.Marshal(c.Issue); err != nil {
			return e, err
		}
	}
	if r := c.Record; r != nil {
		switch {
		case r.State == nil:
		case r.State == c.Session:
			e.Record.State = e.Session
		default:
			if e.Record.State, err = audit.Canonical(r.State); err != nil {
				return e, fmt.Errorf("store: encode the state of record %s: %w", r.Session, err)
			}
		}
		switch {
		case r.Result == nil:
		case c.Request != nil && r.Result == c.Request.Result:
			e.Record.Result = e.Result
		default:
			if e.Record.Result, err = audit.Canonical(r.Result); err != nil {
				return e, fmt.Errorf("store: encode the result of record %s: %w", r.Session, err)
			}
		}
	}
	return e, nil
}

// Snapshot reports a commit whose record snapshots the session's state
// without changing it (Commit.Record): the record holds the caller's
// State when the stored session is still at State.Version when the commit
// applies — a version names one state — and the stored state otherwise.
func Snapshot(c *Commit) bool {
	return c.Record != nil && c.Session == nil && c.Record.State != nil
}

// Params returns n query placeholders separated by commas ("?, ?, ?"),
// for an IN list.
func Params(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
