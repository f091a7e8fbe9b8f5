// Package sqlite is the embedded store: one SQLite file (pure-Go driver
// modernc.org/sqlite), WAL journal, synchronous=FULL by default. It
// implements store.Store and store.Querier; every Commit is atomic, and
// commits that wait together share one transaction (group commit).
//
//	s, err := sqlite.Open(ctx, ".agentplane/agentplane.db", nil)
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // the database/sql driver "sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configure Open. nil means defaults.
type Options struct {
	// Synchronous is SQLite's synchronous setting: "FULL" (default: every
	// commit is on disk when Commit returns) or "NORMAL" (faster; a power
	// loss may lose the last commits, never corrupt the file).
	Synchronous string
	// ReadOnly opens an existing database for reading only: no file is
	// created, nothing is migrated, and Commit fails.
	ReadOnly bool
	// Extensions are subsystems' tables, migrated at Open.
	Extensions []store.Extension
	// BusyTimeout is how long a statement waits for a lock another process
	// holds; 0 means 10s.
	BusyTimeout time.Duration
}

// Store is a SQLite store. Safe for concurrent use. Commits are grouped:
// one committing goroutine at a time — the leader — takes every commit
// waiting and writes them in one transaction, so durability costs one
// fsync per group, not per commit. An uncontended commit leads itself,
// with no hand-off to another goroutine; a leader whose own commit is done
// hands the lead to the first commit still waiting.
type Store struct {
	db       *sql.DB
	path     string
	readOnly bool
	busy     time.Duration
	// writer is the leader's connection, its statements (stmts)
	// prepared on it: a transaction on it runs them as they are, where a
	// transaction from the pool bound each statement to itself anew
	writer *sql.Conn
	stmts  map[string]*sql.Stmt
	reads  map[string]*sql.Stmt // prepared reads, safe for concurrent use
	// queries are subsystems' reads (Query), prepared at their first use
	// and kept, at most maxStmts of them: preparing a read again on every
	// call cost more than running it.
	queries  sync.Map // query → *sql.Stmt
	nqueries atomic.Int64

	mu      sync.Mutex
	queue   []*request // commits waiting for a leader
	leading bool       // a goroutine is committing groups
	closed  bool
	idle    *sync.Cond   // signalled (with mu) when leading turns false
	txs     atomic.Int64 // transactions that committed groups
	ran     atomic.Int64 // statements run (Stats)

	// heads caches each session's last audit record (seq, hash) as
	// committed through this store, so a commit need not read it back.
	// Another process appending to the same chain makes an entry stale; the
	// primary key (session, seq) then refuses the insert, and the leader
	// reads the head and seals again. The leader changes it; committing
	// goroutines read it to seal their records before they queue.
	headsMu sync.Mutex
	heads   map[string]chainHead

	// trace, set only by tests (export_test.go), sees every statement the
	// store runs with its arguments, before it runs.
	trace func(query string, args []any)
}

// run counts a statement about to run (Stats; a savepoint's, transaction
// control, aside) and hands it to the test's trace, when there is one:
// one call before every statement, so that none is counted and not
// traced, or traced and not counted. A caller passes the slice it runs
// the statement with (args...), so the trace costs production no
// allocation.
func (s *Store) run(query string, args []any) {
	if !control(query) {
		s.ran.Add(1)
	}
	if s.trace != nil {
		s.trace(query, args)
	}
}

// chainHead is the last record of a session's audit chain.
type chainHead struct {
	seq  int64
	hash string
}

// The reads, prepared once at Open.
const (
	readSession = `SELECT state FROM sessions WHERE id = ?`
	readRequest = `SELECT digest, state, result, seq, claimed_at, running FROM requests WHERE session = ? AND principal = ? AND request_id = ?`
	// readSessionRequest is readSession and readRequest in one: a
	// request's columns are NULL when the key holds nothing
	readSessionRequest = `SELECT s.state, r.digest, r.state, r.result, r.seq, r.claimed_at, r.running FROM sessions s
		LEFT JOIN requests r ON r.session = s.id AND r.principal = ? AND r.request_id = ? WHERE s.id = ?`
	readConfirmation  = `SELECT confirmation, used FROM confirmations WHERE digest = ?`
	readRecords       = `SELECT record FROM audit WHERE session = ? AND seq > ? ORDER BY seq`
	readRecordsBefore = `SELECT record FROM (SELECT seq, record FROM audit WHERE session = ? AND seq < ? ORDER BY seq DESC LIMIT ?) ORDER BY seq`
	readRecordsAfter  = `SELECT record FROM audit WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?`
)

// request is a commit or a claim waiting for a leader.
type request struct {
	c      *store.Commit
	enc    store.Encoded // c's JSON, made before it was queued
	claim  *store.Claim
	sealed audit.Record
	// on is the head the record was sealed on before it was queued
	// (presealed): the leader seals it again only when the head moved.
	on        chainHead
	presealed bool
	err       error
	// a claim's outcome
	claimed bool
	holder  store.Request
	// wake is sent to once: when the commit is decided, or when its
	// goroutine must lead (promoted, the commit still undecided).
	wake     chan struct{}
	promoted bool
}

// remember records the heads of the chains the requests appended to, once
// their transaction has committed.
func (s *Store) remember(group []*request) {
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	if len(s.heads) >= maxHeads {
		clear(s.heads)
	}
	for _, r := range group {
		if r.err == nil && r.c != nil && r.c.Record != nil {
			s.heads[r.c.SessionID] = chainHead{r.sealed.Seq, r.sealed.Hash}
		}
	}
}

// maxGroup bounds how many commits share one transaction.
const maxGroup = 128

// maxHeads bounds the chain-head cache; it starts over when full.
const maxHeads = 100_000

// maxConns bounds the connections: readers (WAL lets them run beside the
// leader) and the leader's.
const maxConns = 64

// Open opens (creating if needed, readable by its owner only) the database
// file at path, applies the embedded migrations and the extensions', and
// refuses a database whose schema is newer than this binary's, and a
// SQLite database that agentplane did not create. path is a file path,
// never a SQLite URI. Errors name the file and what to do.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	mode := "FULL"
	if opts.Synchronous != "" {
		mode = strings.ToUpper(opts.Synchronous)
	}
	if mode != "FULL" && mode != "NORMAL" {
		return nil, fmt.Errorf("sqlite: synchronous %q: use FULL or NORMAL", mode)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("sqlite: no database at %s: %w", path, err)
		}
	} else if err := create(path); err != nil {
		return nil, err
	}
	// The path goes into a file: URI; escape what URIs give meaning to.
	uri := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	// busy_timeout first: the pragmas run in order, and switching a new
	// file to WAL takes a lock another opener may hold.
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_txlock=immediate",
		uri, busy.Milliseconds(), mode)
	if opts.ReadOnly {
		dsn = fmt.Sprintf("file:%s?mode=ro&_pragma=busy_timeout(%d)", uri, busy.Milliseconds())
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// Keep the connections: a new one re-runs the pragmas and re-prepares
	// every statement, which cost a quarter of a commit's CPU under load.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	s := &Store{db: db, path: path, readOnly: opts.ReadOnly, busy: busy, stmts: map[string]*sql.Stmt{}, reads: map[string]*sql.Stmt{}, heads: map[string]chainHead{}}
	s.idle = sync.NewCond(&s.mu)
	if err := s.migrate(ctx, opts.Extensions); err != nil {
		db.Close()
		return nil, err
	}
	for _, q := range []string{readSession, readRequest, readSessionRequest, readConfirmation, readRecords, readRecordsBefore, readRecordsAfter} {
		st, err := db.Prepare(q)
		if err != nil {
			s.closeReads()
			db.Close()
			return nil, s.wrap("prepare", err)
		}
		s.reads[q] = st
	}
	if !opts.ReadOnly {
		var err error
		if s.writer, err = db.Conn(ctx); err != nil {
			s.closeReads()
			db.Close()
			return nil, s.wrap("connect", err)
		}
	}
	return s, nil
}

// checkPath refuses what SQLite would read as something other than a file.
func checkPath(path string) error {
	switch {
	case path == "":
		return errors.New("sqlite: empty database path")
	case strings.HasPrefix(path, "file:"), strings.ContainsAny(path, "?#"):
		return fmt.Errorf("sqlite: %q: give a file path, not a SQLite URI (no file: prefix, ? or #)", path)
	case strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(filepath.Separator)):
		return fmt.Errorf("sqlite: %s names a directory; give a file path inside it", path)
	case path == ":memory:" || strings.HasPrefix(path, ":"):
		return fmt.Errorf("sqlite: %q: an in-memory database keeps nothing; give a file path", path)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("sqlite: %s is a directory; give a file path inside it", path)
	}
	return nil
}

// create makes the file and its directory, for the owner only (SQLite
// gives its -wal and -shm files the database file's permissions).
func create(path string) error {
	if dir := filepath.Dir(path); dir != "" {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("sqlite: create directory for %s: %w", path, err)
			}
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return f.Close()
}

func (s *Store) closeReads() {
	for _, st := range s.reads {
		st.Close()
	}
	s.queries.Range(func(_, st any) bool {
		st.(*sql.Stmt).Close()
		return true
	})
}

// prepared returns the read query prepared, or nil when maxStmts are
// kept already (then it runs unprepared).
func (s *Store) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.queries.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	if s.nqueries.Load() >= maxStmts {
		return nil, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.queries.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	s.nqueries.Add(1)
	return st, nil
}

// Close refuses new commits, waits for those already waiting, and closes
// the database.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	for s.leading {
		s.idle.Wait()
	}
	s.mu.Unlock()
	for _, st := range s.stmts {
		st.Close()
	}
	if s.writer != nil {
		s.writer.Close()
	}
	s.closeReads()
	return s.db.Close()
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// wrap names the file in an error, and says what a lock held by another
// process means.
func (s *Store) wrap(op string, err error) error {
	if locked(err) {
		return fmt.Errorf("sqlite: %s: %s: the database is locked by another process (waited %s); stop it or use another --db", s.path, op, s.busy)
	}
	return fmt.Errorf("sqlite: %s: %s: %w", s.path, op, err)
}

// locked reports an error of SQLite's that says another connection holds
// the lock asked for (SQLITE_BUSY, SQLITE_LOCKED).
func locked(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED)
}

func (s *Store) migrate(ctx context.Context, exts []store.Extension) error {
	files, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(files)
	latest := len(files)
	if s.readOnly {
		ours, err := s.ours(ctx, s.db)
		if err != nil {
			return err
		}
		if !ours {
			return fmt.Errorf("sqlite: %s has no agentplane data", s.path)
		}
		var have int
		if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
			return s.wrap("read schema version", err)
		}
		if have > latest {
			return fmt.Errorf("sqlite: %s has schema version %d, newer than this agentplane's %d: use a newer agentplane", s.path, have, latest)
		}
		return nil
	}
	// Whether the file is ours, and its version table, in one write
	// transaction (BEGIN IMMEDIATE): another process opening the same new
	// file at once waits here, then finds the table this one created.
	if err := s.claim(ctx); err != nil {
		return err
	}
	var have int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
		return s.wrap("read schema version", err)
	}
	if have > latest {
		return fmt.Errorf("sqlite: %s has schema version %d, newer than this agentplane's %d: use a newer agentplane, or another database", s.path, have, latest)
	}
	for v := have + 1; v <= latest; v++ {
		body, _ := migrations.ReadFile(files[v-1])
		err := s.migrateTx(ctx, v, `SELECT COALESCE(MAX(version), 0) FROM schema_version`, nil, string(body), `INSERT INTO schema_version (version) VALUES (?)`, v)
		if err != nil {
			return fmt.Errorf("sqlite: migrate %s to version %d: %w", s.path, v, err)
		}
	}
	for _, ext := range exts {
		steps := ext.Migrations[store.SQLite]
		var have int
		err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_extensions WHERE name = ?`, ext.Name).Scan(&have)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return s.wrap("read extension versions", err)
		}
		if have > len(steps) {
			return fmt.Errorf("sqlite: %s has %s tables of version %d, newer than this agentplane's %d: use a newer agentplane", s.path, ext.Name, have, len(steps))
		}
		for v := have + 1; v <= len(steps); v++ {
			err := s.migrateTx(ctx, v, `SELECT COALESCE(MAX(version), 0) FROM schema_extensions WHERE name = ?`, []any{ext.Name},
				steps[v-1], `INSERT INTO schema_extensions (name, version) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET version = excluded.version`, ext.Name, v)
			if err != nil {
				return fmt.Errorf("sqlite: migrate %s tables of %s to version %d: %w", ext.Name, s.path, v, err)
			}
		}
	}
	return nil
}

// ours reports whether q's database has agentplane's version table;
// without it, a database with any table is refused as another program's.
func (s *Store) ours(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		return false, fmt.Errorf("sqlite: %s is not a usable database (%v); move it aside or point --db elsewhere", s.path, err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return false, fmt.Errorf("sqlite: %s is not a usable database (%v); move it aside or point --db elsewhere", s.path, err)
		}
		if name == "schema_version" {
			return true, nil
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("sqlite: %s is not a usable database (%v); move it aside or point --db elsewhere", s.path, err)
	}
	if len(tables) > 0 {
		return false, fmt.Errorf("sqlite: %s is a database agentplane did not create (tables %s); point --db at a new file", s.path, strings.Join(tables, ", "))
	}
	return false, nil
}

// claim checks that the database is agentplane's or empty and creates its
// version table, in one write transaction.
func (s *Store) claim(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: %s is not a usable database (%v); move it aside or point --db elsewhere", s.path, err)
	}
	defer tx.Rollback()
	ours, err := s.ours(ctx, tx)
	if err != nil || ours {
		return err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlite: %s is not a usable database (%v); move it aside or point --db elsewhere", s.path, err)
	}
	return tx.Commit()
}

// migrateTx applies migration step v in one write transaction (BEGIN
// IMMEDIATE: one writer at a time across processes), reading the version
// again inside it: a step another process applied meanwhile is skipped,
// never applied twice.
func (s *Store) migrateTx(ctx context.Context, v int, current string, currentArgs []any, body, record string, args ...any) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var have int
	if err := tx.QueryRowContext(ctx, current, currentArgs...).Scan(&have); err != nil {
		return err
	}
	switch {
	case have >= v:
		return nil // another process applied it
	case have != v-1:
		return fmt.Errorf("the database is at version %d, not %d", have, v-1)
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, record, args...); err != nil {
		return err
	}
	return tx.Commit()
}

// Session returns a copy of the session, or an error with code not_found.
func (s *Store) Session(ctx context.Context, id string) (*agentplane.Session, error) {
	var state []byte
	args := []any{id} // the trace's and the query's: one slice
	s.run(readSession, args)
	err := s.reads[readSession].QueryRowContext(ctx, args...).Scan(&state)
	return s.session(id, state, err)
}

// session decodes a session read (its state, or the read's error).
func (s *Store) session(id string, state []byte, err error) (*agentplane.Session, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", id)
	}
	if err != nil {
		return nil, s.wrap("load session "+id, err)
	}
	var sess agentplane.Session
	if err := json.Unmarshal(state, &sess); err != nil {
		return nil, fmt.Errorf("sqlite: %s: session %s is corrupt: %w", s.path, id, err)
	}
	return &sess, nil
}

// SessionRequest returns the session and what the key holds, in one
// statement; see store.Store.
func (s *Store) SessionRequest(ctx context.Context, key store.RequestKey) (*agentplane.Session, store.Request, bool, error) {
	var state []byte
	var digest, rstate, result, running sql.NullString
	var seq, claimed sql.NullInt64
	args := []any{key.Principal, key.RequestID, key.SessionID}
	s.run(readSessionRequest, args)
	err := s.reads[readSessionRequest].QueryRowContext(ctx, args...).Scan(&state, &digest, &rstate, &result, &seq, &claimed, &running)
	sess, err := s.session(key.SessionID, state, err)
	if err != nil || !digest.Valid {
		return sess, store.Request{}, false, err
	}
	r := store.Request{Key: key, Digest: digest.String, State: rstate.String, Seq: seq.Int64}
	if err := s.fillRequest(&r, result, claimed.Int64, running); err != nil {
		return nil, store.Request{}, false, err
	}
	return sess, r, true, nil
}

// Head returns the head of a session's audit chain as the session keeps
// it; see store.Store.
func (s *Store) Head(ctx context.Context, session string) (store.Head, error) {
	var h store.Head
	const query = `SELECT head_seq, head_hash FROM sessions WHERE id = ?`
	args := []any{session}
	s.run(query, args)
	err := s.db.QueryRowContext(ctx, query, args...).Scan(&h.Seq, &h.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return h, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", session)
	}
	if err != nil {
		return h, s.wrap("read chain head", err)
	}
	return h, nil
}

// Stale returns running requests claimed before before; see store.Store.
func (s *Store) Stale(ctx context.Context, before time.Time, limit int) ([]store.Request, error) {
	const query = `SELECT session, principal, request_id, digest, state, result, seq, claimed_at, running FROM requests
		WHERE state = 'running' AND claimed_at < ? ORDER BY claimed_at, request_id LIMIT ?`
	args := []any{before.UnixNano(), max(limit, 0)}
	s.run(query, args)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap("list stale requests", err)
	}
	defer rows.Close()
	var out []store.Request
	for rows.Next() {
		var key store.RequestKey
		r, _, err := s.readRequest(ctx, keyed{rows, &key}, key)
		if err != nil {
			return nil, err
		}
		r.Key = key
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list stale requests", err)
	}
	return out, nil
}

// keyed scans a request row that starts with its key.
type keyed struct {
	row scanner
	key *store.RequestKey
}

func (k keyed) Scan(dest ...any) error {
	return k.row.Scan(append([]any{&k.key.SessionID, &k.key.Principal, &k.key.RequestID}, dest...)...)
}

// nullText is b as a SQL text, or NULL when b is empty.
func nullText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// Request returns what an idempotency key holds.
func (s *Store) Request(ctx context.Context, key store.RequestKey) (store.Request, bool, error) {
	args := []any{key.SessionID, key.Principal, key.RequestID}
	s.run(readRequest, args)
	return s.readRequest(ctx, s.reads[readRequest].QueryRowContext(ctx, args...), key)
}

func (s *Store) readRequest(_ context.Context, row scanner, key store.RequestKey) (store.Request, bool, error) {
	r := store.Request{Key: key}
	var result, running sql.NullString
	var claimed int64
	err := row.Scan(&r.Digest, &r.State, &result, &r.Seq, &claimed, &running)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Request{}, false, nil
	}
	if err != nil {
		return store.Request{}, false, s.wrap("load request "+key.RequestID, err)
	}
	if err := s.fillRequest(&r, result, claimed, running); err != nil {
		return store.Request{}, false, err
	}
	return r, true, nil
}

// fillRequest sets a request's columns beyond its digest, state and seq.
func (s *Store) fillRequest(r *store.Request, result sql.NullString, claimed int64, running sql.NullString) error {
	r.ClaimedAt = time.Unix(0, claimed).UTC()
	if running.Valid {
		r.Running = json.RawMessage(running.String)
	}
	if result.Valid {
		r.Result = new(agentplane.ExecutionResult)
		if err := json.Unmarshal([]byte(result.String), r.Result); err != nil {
			return fmt.Errorf("sqlite: %s: result of request %s is corrupt: %w", s.path, r.Key.RequestID, err)
		}
	}
	return nil
}

// Confirmation returns an issued confirmation token by its digest.
func (s *Store) Confirmation(ctx context.Context, digest string) (store.Confirmation, bool, error) {
	var raw string
	var used bool
	args := []any{digest}
	s.run(readConfirmation, args)
	err := s.reads[readConfirmation].QueryRowContext(ctx, args...).Scan(&raw, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Confirmation{}, false, nil
	}
	if err != nil {
		return store.Confirmation{}, false, s.wrap("load confirmation", err)
	}
	var c store.Confirmation
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return store.Confirmation{}, false, fmt.Errorf("sqlite: %s: confirmation is corrupt: %w", s.path, err)
	}
	c.Used = used
	return c, true, nil
}

// Records returns the session's audit records after a sequence number, in
// order.
func (s *Store) Records(ctx context.Context, session string, after int64) ([]audit.Record, error) {
	return s.auditRows(ctx, session, readRecords, session, after)
}

// RecordsBefore returns the last limit audit records of the session
// below a sequence number (≤ 0: the end), in order.
func (s *Store) RecordsBefore(ctx context.Context, session string, before int64, limit int) ([]audit.Record, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	return s.auditRows(ctx, session, readRecordsBefore, session, before, max(limit, 1))
}

// RecordsAfter returns the first limit audit records of the session above
// a sequence number, in order.
func (s *Store) RecordsAfter(ctx context.Context, session string, after int64, limit int) ([]audit.Record, error) {
	return s.auditRows(ctx, session, readRecordsAfter, session, after, max(limit, 1))
}

// auditRows runs one of the prepared reads of a session's audit records.
func (s *Store) auditRows(ctx context.Context, session, read string, args ...any) ([]audit.Record, error) {
	s.run(read, args)
	rows, err := s.reads[read].QueryContext(ctx, args...)
	if err != nil {
		return nil, s.wrap("read audit of "+session, err)
	}
	defer rows.Close()
	recs, err := audit.DecodeRows(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: audit of %s: %w", s.path, session, err)
	}
	return recs, nil
}

// Sessions returns a page of an owner's sessions, newest first.
func (s *Store) Sessions(ctx context.Context, q store.SessionQuery) (store.SessionPage, error) {
	n := q.PageSize()
	query := `SELECT state, created FROM sessions WHERE owner = ? ORDER BY created DESC, id DESC LIMIT ?`
	args := []any{q.Owner, n + 1}
	if q.Cursor != "" {
		created, id, err := store.ParseSessionCursor(q.Cursor)
		if err != nil {
			return store.SessionPage{}, err
		}
		// a row value, as on PostgreSQL: the index's range starts at the
		// cursor, where created < ? OR created = ? AND id < ? walked the
		// owner's sessions from the newest and skipped every earlier page
		query = `SELECT state, created FROM sessions WHERE owner = ? AND (created, id) < (?, ?) ORDER BY created DESC, id DESC LIMIT ?`
		args = []any{q.Owner, created, id, n + 1}
	}
	s.run(query, args)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return store.SessionPage{}, s.wrap("list sessions", err)
	}
	defer rows.Close()
	var page store.SessionPage
	err = store.EachRow(rows, func(scan func(...any) error) error {
		var state string
		var created int64
		if err := scan(&state, &created); err != nil {
			return err
		}
		return page.Add([]byte(state), created, n)
	})
	if err != nil {
		return store.SessionPage{}, fmt.Errorf("sqlite: %s: list sessions: %w", s.path, err)
	}
	return page, nil
}

// Dialect returns store.SQLite.
func (s *Store) Dialect() string { return store.SQLite }

// Query runs a read-only query of a subsystem's tables.
func (s *Store) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	s.run(query, args)
	st, err := s.prepared(ctx, query)
	if err != nil {
		return s.wrap("query", err)
	}
	var rows *sql.Rows
	if st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = s.db.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return s.wrap("query", err)
	}
	defer rows.Close()
	return store.EachRow(rows, row)
}

// Commit applies c atomically; see store.Store. It may be committed
// together with other commits in one transaction, by this goroutine or by
// the one leading when it arrived; once queued, it is decided whatever ctx
// does.
func (s *Store) Commit(ctx context.Context, c *store.Commit) error {
	enc, err := store.Encode(c) // here, not on the leader
	if err != nil {
		return err
	}
	req := &request{c: c, enc: enc}
	s.preseal(req)
	req, err = s.enqueue(req)
	if err == nil && c.Record != nil {
		*c.Record = req.sealed
	}
	return err
}

// Claim claims an idempotency key; see store.Store. It is written like a
// commit (grouped, durable).
func (s *Store) Claim(ctx context.Context, c store.Claim) (store.Request, bool, error) {
	req, err := s.enqueue(&request{claim: &c})
	if err != nil {
		return store.Request{}, false, err
	}
	return req.holder, req.claimed, nil
}

// enqueue queues a commit or claim and waits until it is decided, leading
// the group commit when no one else is.
func (s *Store) enqueue(req *request) (*request, error) {
	if s.readOnly {
		return req, fmt.Errorf("sqlite: %s is open read-only", s.path)
	}
	req.wake = make(chan struct{}, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return req, fmt.Errorf("sqlite: %s: store is closed", s.path)
	}
	s.queue = append(s.queue, req)
	lead := !s.leading
	s.leading = true
	s.mu.Unlock()
	if !lead {
		<-req.wake
		lead = req.promoted
	}
	if lead {
		s.lead(req)
	}
	return req, req.err
}

// lead commits the waiting commits, up to maxGroup at a time, until its
// own is decided; then it hands the lead to the first commit still
// waiting, or ends it when none is.
func (s *Store) lead(self *request) {
	for {
		s.mu.Lock()
		n := min(len(s.queue), maxGroup)
		group := slices.Clone(s.queue[:n])
		s.queue = append(s.queue[:0], s.queue[n:]...)
		s.mu.Unlock()

		s.commitGroup(group)
		done := false
		for _, r := range group {
			if r == self {
				done = true
				continue
			}
			r.wake <- struct{}{}
		}

		s.mu.Lock()
		if len(s.queue) == 0 {
			s.leading = false
			s.idle.Broadcast()
			s.mu.Unlock()
			return
		}
		if done {
			next := s.queue[0]
			next.promoted = true
			s.mu.Unlock()
			next.wake <- struct{}{}
			return
		}
		s.mu.Unlock()
	}
}

// reconnect replaces the writer's connection, which database/sql closed
// (it went bad), and forgets the statements prepared on it. Only the
// leader calls it.
func (s *Store) reconnect(ctx context.Context) error {
	for _, st := range s.stmts {
		st.Close()
	}
	clear(s.stmts)
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	s.writer.Close()
	s.writer = c
	return nil
}

// statement is a query the leader runs on the writer's connection, where
// the group's transaction is: prepared once and kept (st), or, beyond
// maxStmts, its text run as it is.
type statement struct {
	st    *sql.Stmt
	c     *sql.Conn
	query string
}

func (p statement) exec(ctx context.Context, args ...any) (sql.Result, error) {
	if p.st == nil {
		return p.c.ExecContext(ctx, p.query, args...)
	}
	return p.st.ExecContext(ctx, args...)
}

func (p statement) rows(ctx context.Context, args ...any) (*sql.Rows, error) {
	if p.st == nil {
		return p.c.QueryContext(ctx, p.query, args...)
	}
	return p.st.QueryContext(ctx, args...)
}

func (p statement) row(ctx context.Context, args ...any) *sql.Row {
	if p.st == nil {
		return p.c.QueryRowContext(ctx, p.query, args...)
	}
	return p.st.QueryRowContext(ctx, args...)
}

// stmt returns the leader's statement for query. Preparing each statement
// once, not per commit, saves about a third of a commit's CPU; queries
// built at run time beyond the known ones (maxStmts) are not kept.
func (s *Store) stmt(ctx context.Context, query string) (statement, error) {
	st, ok := s.stmts[query]
	if !ok && len(s.stmts) >= maxStmts {
		return statement{c: s.writer, query: query}, nil
	}
	if !ok {
		var err error
		if st, err = s.writer.PrepareContext(ctx, query); err != nil {
			return statement{}, s.wrap("prepare", err)
		}
		s.stmts[query] = st
	}
	return statement{st: st}, nil
}

// The group's transaction control (BEGIN IMMEDIATE: it takes the write
// lock at once, as the connection's _txlock asks of database/sql's).
const (
	beginTx    = `BEGIN IMMEDIATE`
	commitTx   = `COMMIT`
	rollbackTx = `ROLLBACK`
)

// control reports transaction control — the group's, a savepoint's — not
// counted in Stats.
func control(query string) bool {
	switch query {
	case beginTx, commitTx, rollbackTx, `SAVEPOINT c`, `ROLLBACK TO c`, `RELEASE c`:
		return true
	}
	return false
}

// Stats returns the store's counters; see store.Stats.
func (s *Store) Stats() store.Stats {
	return store.Stats{Statements: s.ran.Load(), Transactions: s.txs.Load()}
}

// maxStmts bounds the prepared statements kept: the store's own and its
// extensions' are far fewer.
const maxStmts = 1024

func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s.run(query, args)
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.exec(ctx, args...)
}

// scanner is a row to scan: a *sql.Row, or an error.
type scanner interface{ Scan(dest ...any) error }

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

func (s *Store) queryRow(ctx context.Context, query string, args ...any) scanner {
	s.run(query, args)
	st, err := s.stmt(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return st.row(ctx, args...)
}

func (s *Store) commitGroup(group []*request) {
	if s.tryGroup(group, false) {
		return
	}
	for _, r := range group {
		r.err, r.sealed, r.presealed, r.claimed, r.holder = nil, audit.Record{}, false, false, store.Request{}
	}
	s.tryGroup(group, true)
}

// tryGroup commits the group in one transaction. Without savepoints (the
// fast path: a commit whose check fails has written nothing), it gives up
// and reports false when a commit failed after writing; with savepoints,
// each commit that fails rolls back alone.
func (s *Store) tryGroup(group []*request, savepoints bool) bool {
	// The transaction carries every commit of the group: no one caller's
	// context may cancel it (a queued commit is decided whatever its ctx
	// does).
	ctx := context.Background()
	fail := func(err error) {
		for _, r := range group {
			if r.err == nil {
				r.err = err
			}
		}
	}
	// BEGIN and COMMIT are statements prepared once on the writer, as the
	// commits' are: a database/sql transaction would prepare them each time
	// and watch its context on a goroutine of its own
	_, err := s.exec(ctx, beginTx)
	switch {
	case errors.Is(err, sql.ErrConnDone): // the connection went bad: a new one
		if err = s.reconnect(ctx); err == nil {
			_, err = s.exec(ctx, beginTx)
		}
	case err != nil && !locked(err):
		// a transaction left open on the writer (only the leader begins
		// one there, so it is a group's that did not end: its ROLLBACK
		// failed, or its connection was closed under it and came back
		// from the pool): end it and begin again
		if _, rerr := s.exec(ctx, rollbackTx); rerr == nil {
			_, err = s.exec(ctx, beginTx)
		}
	}
	if err != nil {
		fail(s.wrap("begin", err))
		return true
	}
	committed := false
	defer func() {
		if !committed { // a commit that fails may leave the transaction open
			s.exec(ctx, rollbackTx)
		}
	}()
	for _, r := range group {
		if !savepoints {
			var partial bool
			if partial, r.err = s.apply(ctx, r); partial {
				return false
			}
			continue
		}
		if _, err := s.exec(ctx, `SAVEPOINT c`); err != nil {
			fail(s.wrap("savepoint", err))
			return true
		}
		if _, r.err = s.apply(ctx, r); r.err != nil {
			if _, err := s.exec(ctx, `ROLLBACK TO c`); err != nil {
				fail(s.wrap("rollback to savepoint", err))
				return true
			}
		}
		if _, err := s.exec(ctx, `RELEASE c`); err != nil {
			fail(s.wrap("release savepoint", err))
			return true
		}
	}
	if _, err := s.exec(ctx, commitTx); err != nil {
		for _, r := range group {
			r.err = s.wrap("commit", err)
		}
		s.headsMu.Lock()
		clear(s.heads)
		s.headsMu.Unlock()
		return true
	}
	committed = true
	s.txs.Add(1)
	s.remember(group)
	return true
}

// preseal seals the request's record, before it is queued, on the head
// its chain has as this store last committed it: work the committing
// goroutine does instead of the leader, which keeps the sealed record
// when the head is still the same (sealedOnHead) — a session's commits
// come one after the other — and seals it again otherwise.
func (s *Store) preseal(r *request) {
	c := r.c
	if c.Record == nil {
		return
	}
	h, ok := s.cachedHead(c.SessionID)
	if !ok {
		return
	}
	r.sealed = *c.Record
	if audit.SealEncoded(&r.sealed, h.seq, h.hash, r.enc.Record) != nil {
		return // the leader seals it and reports the error
	}
	r.on, r.presealed = h, true
}

// sealedOnHead reports whether the request's record was sealed before it
// was queued on the head its chain has now.
func (s *Store) sealedOnHead(r *request) bool {
	if !r.presealed {
		return false
	}
	h, ok := s.cachedHead(r.c.SessionID)
	return ok && h == r.on
}

// cachedHead returns the cached head of a session's chain.
func (s *Store) cachedHead(session string) (chainHead, bool) {
	s.headsMu.Lock()
	h, ok := s.heads[session]
	s.headsMu.Unlock()
	return h, ok
}

// seal seals the commit's record onto its session's chain, from the
// cached head when there is one, else the session's, or — resealing
// after the cached one proved stale, when this commit may have written the
// session's head already — the chain's own last record. The record holds
// the state after the commit: a record-only commit's is the caller's
// (appendRecord checks that the session is still at its version).
func (s *Store) seal(ctx context.Context, c *store.Commit, enc audit.Encoded, sealed *audit.Record, again bool) error {
	state := sealed.State
	*sealed = *c.Record
	if again && state != nil {
		sealed.State = state // the state read back (appendRecord), when it was
	}
	head, cached := s.cachedHead(c.SessionID)
	if !cached {
		query := `SELECT head_seq, head_hash FROM sessions WHERE id = ?`
		if again {
			query = `SELECT seq, hash FROM audit WHERE session = ? ORDER BY seq DESC LIMIT 1`
		}
		err := s.queryRow(ctx, query, c.SessionID).Scan(&head.seq, &head.hash)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return s.wrap("read chain head", err)
		}
	}
	return audit.SealEncoded(sealed, head.seq, head.hash, enc)
}

// appendRecord inserts the sealed record. When the cached head it was
// sealed on is stale (another process appended; the key refuses the
// insert), it seals again on the stored head and moves the request's seq
// and the session's head written before it to where it lands. A record
// that snapshots the state the caller read lands only while the session
// is at that version (or has no row); when another commit moved it on, the
// record is sealed again on the state as stored, read back in this
// transaction.
func (s *Store) appendRecord(ctx context.Context, c *store.Commit, enc audit.Encoded, sealed *audit.Record) error {
	snapshot := store.Snapshot(c)
	for retried := false; ; {
		var res sql.Result
		var err error
		if snapshot {
			res, err = s.exec(ctx, `INSERT INTO audit (session, seq, hash, record) SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = ? AND version <> ?)`,
				c.SessionID, sealed.Seq, sealed.Hash, sealed.Raw, c.SessionID, c.Record.State.Version)
		} else {
			res, err = s.exec(ctx, `INSERT INTO audit (session, seq, hash, record) VALUES (?, ?, ?, ?)`,
				c.SessionID, sealed.Seq, sealed.Hash, sealed.Raw)
		}
		var se *sqlite.Error
		if !retried && errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
			retried = true
			s.headsMu.Lock()
			delete(s.heads, c.SessionID)
			s.headsMu.Unlock()
			if err := s.seal(ctx, c, enc, sealed, true); err != nil {
				return err
			}
			if q := c.Request; q != nil {
				if _, err := s.exec(ctx, `UPDATE requests SET seq = ? WHERE session = ? AND principal = ? AND request_id = ?`,
					sealed.Seq, q.Key.SessionID, q.Key.Principal, q.Key.RequestID); err != nil {
					return s.wrap("store request", err)
				}
			}
			continue // the trigger moves the session's head with the insert
		}
		if err != nil {
			return s.wrap("append audit record", err)
		}
		if !snapshot {
			return nil
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		// the session moved on from the caller's state: record it as stored
		snapshot = false
		var state string
		if err := s.queryRow(ctx, readSession, c.SessionID).Scan(&state); err != nil {
			return s.wrap("load session "+c.SessionID, err)
		}
		var cur agentplane.Session
		if err := json.Unmarshal([]byte(state), &cur); err != nil {
			return fmt.Errorf("sqlite: %s: session %s is corrupt: %w", s.path, c.SessionID, err)
		}
		enc.State, sealed.State = nil, &cur
		// on the same head: nothing was appended
		if err := audit.SealEncoded(sealed, sealed.Seq-1, sealed.Prev, enc); err != nil {
			return err
		}
	}
}

// apply writes one commit or claim in tx. Its checks come first and write
// nothing when they fail; partial reports whether it may have written
// something before failing (then only a savepoint or the whole
// transaction can undo it).
func (s *Store) apply(ctx context.Context, r *request) (partial bool, err error) {
	if r.claim != nil {
		return s.applyClaim(ctx, r)
	}
	c := r.c
	wrote := false
	// The record is sealed first: the rows the commit changes name where
	// it lands (the request its seq, the session its head).
	if c.Record != nil && !s.sealedOnHead(r) {
		if err := s.seal(ctx, c, r.enc.Record, &r.sealed, false); err != nil {
			return false, err
		}
	}
	if q := c.Request; q != nil {
		var result any // NULL
		if r.enc.Result != nil {
			result = string(r.enc.Result)
		}
		res, err := s.exec(ctx, `INSERT INTO requests (session, principal, request_id, digest, state, result, claimed_at, seq) VALUES (?, ?, ?, ?, 'done', ?, ?, ?)
			ON CONFLICT (session, principal, request_id) DO UPDATE SET state = 'done', result = excluded.result, seq = excluded.seq, running = NULL WHERE requests.state = 'running'`,
			q.Key.SessionID, q.Key.Principal, q.Key.RequestID, q.Digest, result, q.ClaimedAt.UnixNano(), r.sealed.Seq)
		if err != nil {
			return false, s.wrap("store request", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return false, store.ErrRequestDone
		}
		wrote = true
	}
	if c.Session != nil {
		state := r.enc.Session
		var err error
		// One statement writes the session only if it is at the version
		// before this one (absent, for version 1).
		// and its chain's head, when the commit appends a record (the
		// trigger of migration 7 moves it for a record alone)
		var res sql.Result
		switch {
		case c.Session.Version == 1:
			res, err = s.exec(ctx, `INSERT INTO sessions (id, version, state, owner, created, head_seq, head_hash) VALUES (?, 1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
				c.Session.ID, string(state), c.Session.Owner, store.CreatedAt(c).UnixNano(), r.sealed.Seq, r.sealed.Hash)
		case c.Record != nil:
			res, err = s.exec(ctx, `UPDATE sessions SET version = ?, state = ?, head_seq = ?, head_hash = ? WHERE id = ? AND version = ?`,
				c.Session.Version, string(state), r.sealed.Seq, r.sealed.Hash, c.Session.ID, c.Session.Version-1)
		default:
			res, err = s.exec(ctx, `UPDATE sessions SET version = ?, state = ? WHERE id = ? AND version = ?`,
				c.Session.Version, string(state), c.Session.ID, c.Session.Version-1)
		}
		if err != nil {
			return wrote, s.wrap("store session", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			var have int64
			s.queryRow(ctx, `SELECT version FROM sessions WHERE id = ?`, c.Session.ID).Scan(&have)
			return wrote, agentplane.Errorf(agentplane.CodeVersionConflict, "session %q is at version %d; cannot store version %d", c.Session.ID, have, c.Session.Version)
		}
	}
	if err := s.write(ctx, r); err != nil {
		return true, err
	}
	return false, nil
}

// applyClaim takes an idempotency key that is free, or whose running claim
// is stale, and otherwise reads who holds it. A claim that uses a
// confirmation marks it used; when it cannot, the claim fails after its
// key was written (partial).
func (s *Store) applyClaim(ctx context.Context, r *request) (partial bool, err error) {
	c := r.claim
	res, err := s.exec(ctx, `INSERT INTO requests (session, principal, request_id, digest, state, result, claimed_at, running) VALUES (?, ?, ?, ?, 'running', NULL, ?, ?)
		ON CONFLICT (session, principal, request_id) DO UPDATE SET claimed_at = excluded.claimed_at, running = COALESCE(excluded.running, requests.running)
		WHERE requests.state = 'running' AND requests.claimed_at < ? AND requests.digest = excluded.digest`,
		c.Key.SessionID, c.Key.Principal, c.Key.RequestID, c.Digest, c.Now.UnixNano(), nullText(c.Running), c.StaleBefore.UnixNano())
	if err != nil {
		return false, s.wrap("claim request", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		r.holder, _, err = s.readRequest(ctx, s.queryRow(ctx, readRequest, c.Key.SessionID, c.Key.Principal, c.Key.RequestID), c.Key)
		return false, err
	}
	if c.Use != nil {
		query := `UPDATE confirmations SET used = 1 WHERE digest = ? AND used = 0`
		key, pending := c.Use.Key()
		if pending {
			query = `UPDATE confirmations SET used = 1 WHERE pending = ? AND used = 0`
		}
		res, err := s.exec(ctx, query, key)
		if err != nil {
			return true, s.wrap("use confirmation", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return true, store.ErrConfirmationUsed
		}
	}
	r.claimed = true
	return false, nil
}

// write writes what a commit adds once its checks have passed: the audit
// record, an issued confirmation token, the subsystems' ops.
func (s *Store) write(ctx context.Context, r *request) error {
	c := r.c
	if c.Record != nil {
		if err := s.appendRecord(ctx, c, r.enc.Record, &r.sealed); err != nil {
			return err
		}
	}
	if c.Issue != nil {
		raw := r.enc.Issue
		var pending any // NULL
		if c.Issue.Pending {
			pending = store.PendingKey(c.Issue.SessionID, c.Issue.Version)
		}
		if _, err := s.exec(ctx, `INSERT INTO confirmations (digest, used, confirmation, pending) VALUES (?, 0, ?, ?)`, c.Issue.Digest, string(raw), pending); err != nil {
			return s.wrap("store confirmation", err)
		}
	}
	if len(c.Ops) > 0 {
		t := &txn{s: s}
		for _, op := range c.Ops {
			if err := op.Apply(ctx, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// txn is the store.Tx of a group's transaction, for subsystems' ops.
type txn struct{ s *Store }

func (t *txn) Dialect() string { return store.SQLite }

// Exec and Query run an extension's statements prepared once, as the
// store's own (Store.stmt): the leader runs every commit.
func (t *txn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	t.s.run(query, args)
	st, err := t.s.stmt(ctx, query)
	if err != nil {
		return 0, err
	}
	res, err := st.exec(ctx, args...)
	if err != nil {
		return 0, t.s.wrap("exec", err)
	}
	return res.RowsAffected()
}

func (t *txn) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	t.s.run(query, args)
	st, err := t.s.stmt(ctx, query)
	if err != nil {
		return err
	}
	rows, err := st.rows(ctx, args...)
	if err != nil {
		return t.s.wrap("query", err)
	}
	defer rows.Close()
	return store.EachRow(rows, row)
}
