// Package sqlite is the embedded store: one SQLite file (pure-Go driver
// modernc.org/sqlite), WAL journal, synchronous=FULL by default. It
// implements gate.Store and the audit log's reading side; every Commit is
// atomic, and commits that wait together share one transaction (group
// commit).
//
//	s, err := sqlite.Open(".agentplane/agentplane.db", nil)
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite" // the database/sql driver "sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configure Open. nil means defaults.
type Options struct {
	// Synchronous is SQLite's synchronous setting: "FULL" (default: every
	// commit is on disk when Commit returns) or "NORMAL" (faster; a power
	// loss may lose the last commits, never corrupt the file).
	Synchronous string
}

// Store is a SQLite store. Safe for concurrent use. Commits are grouped:
// one committing goroutine at a time — the leader — takes every commit
// waiting and writes them in one transaction, so durability costs one
// fsync per group, not per commit. An uncontended commit leads itself,
// with no hand-off to another goroutine; a leader whose own commit is done
// hands the lead to the first commit still waiting.
type Store struct {
	db    *sql.DB
	path  string
	stmts map[string]*sql.Stmt // the leader's prepared statements
	reads map[string]*sql.Stmt // prepared reads, safe for concurrent use

	mu      sync.Mutex
	queue   []*request // commits waiting for a leader
	leading bool       // a goroutine is committing groups
	closed  bool
	idle    *sync.Cond   // signalled (with mu) when leading turns false
	txs     atomic.Int64 // transactions that committed groups

	// heads caches each session's last audit record (seq, hash) as
	// committed through this store, so a commit need not read it back.
	// Another process appending to the same chain makes an entry stale; the
	// primary key (session, seq) then refuses the insert, and the leader
	// reads the head and seals again. Only the leader uses it.
	heads map[string]chainHead
}

// chainHead is the last record of a session's audit chain.
type chainHead struct {
	seq  int64
	hash string
}

// The reads, prepared once at Open.
const (
	readSession      = `SELECT state FROM sessions WHERE id = ?`
	readResult       = `SELECT result FROM results WHERE request_id = ?`
	readConfirmation = `SELECT confirmation, used FROM confirmations WHERE token = ?`
	readRecords      = `SELECT record FROM audit WHERE session = ? ORDER BY seq`
)

// request is a commit waiting for a leader.
type request struct {
	c      *gate.Commit
	sealed audit.Record
	err    error
	// wake is sent to once: when the commit is decided, or when its
	// goroutine must lead (promoted, the commit still undecided).
	wake     chan struct{}
	promoted bool
}

// remember records the heads of the chains the requests appended to, once
// their transaction has committed.
func (s *Store) remember(group []*request) {
	if len(s.heads) >= maxHeads {
		clear(s.heads)
	}
	for _, r := range group {
		if r.err == nil && r.c.Record != nil {
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

// Open opens (creating if needed) the database file at path, applies the
// embedded migrations, and refuses a database whose schema is newer than
// this binary's. Errors name the file and what to do.
func Open(path string, opts *Options) (*Store, error) {
	mode := "FULL"
	if opts != nil && opts.Synchronous != "" {
		mode = strings.ToUpper(opts.Synchronous)
	}
	if mode != "FULL" && mode != "NORMAL" {
		return nil, fmt.Errorf("sqlite: synchronous %q: use FULL or NORMAL", mode)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sqlite: create directory for %s: %w", path, err)
		}
	}
	dsn := fmt.Sprintf("file:%s?_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_pragma=busy_timeout(10000)&_txlock=immediate", path, mode)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// Keep the connections: a new one re-runs the pragmas and re-prepares
	// every statement, which cost a quarter of a commit's CPU under load.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	s := &Store{db: db, path: path, stmts: map[string]*sql.Stmt{}, reads: map[string]*sql.Stmt{}, heads: map[string]chainHead{}}
	s.idle = sync.NewCond(&s.mu)
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, err
	}
	for _, q := range []string{readSession, readResult, readConfirmation, readRecords} {
		st, err := db.Prepare(q)
		if err != nil {
			s.closeReads()
			db.Close()
			return nil, fmt.Errorf("sqlite: %s: prepare: %w", path, err)
		}
		s.reads[q] = st
	}
	return s, nil
}

func (s *Store) closeReads() {
	for _, st := range s.reads {
		st.Close()
	}
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
	s.closeReads()
	return s.db.Close()
}

func (s *Store) migrate(ctx context.Context) error {
	files, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(files)
	latest := len(files)
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlite: %s is not a usable database (%v); move it aside or point --db elsewhere", s.path, err)
	}
	var have int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
		return fmt.Errorf("sqlite: read schema version of %s: %w", s.path, err)
	}
	if have > latest {
		return fmt.Errorf("sqlite: %s has schema version %d, newer than this agentplane's %d: use a newer agentplane, or another database", s.path, have, latest)
	}
	for v := have + 1; v <= latest; v++ {
		body, _ := migrations.ReadFile(files[v-1])
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sqlite: migrate %s: %w", s.path, err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlite: migrate %s to version %d: %w", s.path, v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, v); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlite: migrate %s: %w", s.path, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlite: migrate %s: %w", s.path, err)
		}
	}
	return nil
}

// Session returns a copy of the session, or an error with code not_found.
func (s *Store) Session(ctx context.Context, id string) (*agentplane.Session, error) {
	var state string
	err := s.reads[readSession].QueryRowContext(ctx, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: load session %s: %w", s.path, id, err)
	}
	var sess agentplane.Session
	if err := json.Unmarshal([]byte(state), &sess); err != nil {
		return nil, fmt.Errorf("sqlite: %s: session %s is corrupt: %w", s.path, id, err)
	}
	return &sess, nil
}

// Result returns the result recorded for a request id.
func (s *Store) Result(ctx context.Context, requestID string) (agentplane.ExecutionResult, bool, error) {
	var raw string
	err := s.reads[readResult].QueryRowContext(ctx, requestID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return agentplane.ExecutionResult{}, false, nil
	}
	if err != nil {
		return agentplane.ExecutionResult{}, false, fmt.Errorf("sqlite: %s: load result %s: %w", s.path, requestID, err)
	}
	var r agentplane.ExecutionResult
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return agentplane.ExecutionResult{}, false, fmt.Errorf("sqlite: %s: result %s is corrupt: %w", s.path, requestID, err)
	}
	return r, true, nil
}

// Confirmation returns an issued confirmation token.
func (s *Store) Confirmation(ctx context.Context, token string) (gate.Confirmation, bool, error) {
	var raw string
	var used bool
	err := s.reads[readConfirmation].QueryRowContext(ctx, token).Scan(&raw, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return gate.Confirmation{}, false, nil
	}
	if err != nil {
		return gate.Confirmation{}, false, fmt.Errorf("sqlite: %s: load confirmation: %w", s.path, err)
	}
	var c gate.Confirmation
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return gate.Confirmation{}, false, fmt.Errorf("sqlite: %s: confirmation is corrupt: %w", s.path, err)
	}
	c.Used = used
	return c, true, nil
}

// Records returns the session's audit records in order.
func (s *Store) Records(ctx context.Context, session string) ([]audit.Record, error) {
	rows, err := s.reads[readRecords].QueryContext(ctx, session)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: read audit of %s: %w", s.path, session, err)
	}
	defer rows.Close()
	recs, err := audit.DecodeRows(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: audit of %s: %w", s.path, session, err)
	}
	return recs, nil
}

// Commit applies c atomically; see gate.Store. It may be committed
// together with other commits in one transaction, by this goroutine or by
// the one leading when it arrived; once queued, it is decided whatever ctx
// does.
func (s *Store) Commit(ctx context.Context, c *gate.Commit) error {
	req := &request{c: c, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("sqlite: %s: store is closed", s.path)
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
	if req.err == nil && c.Record != nil {
		*c.Record = req.sealed
	}
	return req.err
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

// stmt returns the leader's prepared statement for query, bound to tx.
// Preparing each statement once, not per commit, saves about a third of a
// commit's CPU.
func (s *Store) stmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	st, ok := s.stmts[query]
	if !ok {
		var err error
		if st, err = s.db.PrepareContext(ctx, query); err != nil {
			return nil, fmt.Errorf("sqlite: %s: prepare: %w", s.path, err)
		}
		s.stmts[query] = st
	}
	return tx.StmtContext(ctx, st), nil
}

func (s *Store) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	st, err := s.stmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// scanner is a row to scan: a *sql.Row, or an error.
type scanner interface{ Scan(dest ...any) error }

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

func (s *Store) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) scanner {
	st, err := s.stmt(ctx, tx, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

func (s *Store) commitGroup(group []*request) {
	if s.tryGroup(group, false) {
		return
	}
	for _, r := range group {
		r.err, r.sealed = nil, audit.Record{}
	}
	s.tryGroup(group, true)
}

// tryGroup commits the group in one transaction. Without savepoints (the
// fast path: a commit whose check fails has written nothing), it gives up
// and reports false when a commit failed after writing; with savepoints,
// each commit that fails rolls back alone.
func (s *Store) tryGroup(group []*request, savepoints bool) bool {
	ctx := context.Background()
	fail := func(err error) {
		for _, r := range group {
			if r.err == nil {
				r.err = err
			}
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("sqlite: %s: begin: %w", s.path, err))
		return true
	}
	defer tx.Rollback()
	for _, r := range group {
		if !savepoints {
			var partial bool
			if partial, r.err = s.apply(ctx, tx, r.c, &r.sealed); partial {
				return false
			}
			continue
		}
		if _, err := s.exec(ctx, tx, `SAVEPOINT c`); err != nil {
			fail(fmt.Errorf("sqlite: %s: %w", s.path, err))
			return true
		}
		if _, r.err = s.apply(ctx, tx, r.c, &r.sealed); r.err != nil {
			if _, err := s.exec(ctx, tx, `ROLLBACK TO c`); err != nil {
				fail(fmt.Errorf("sqlite: %s: %w", s.path, err))
				return true
			}
		}
		if _, err := s.exec(ctx, tx, `RELEASE c`); err != nil {
			fail(fmt.Errorf("sqlite: %s: %w", s.path, err))
			return true
		}
	}
	if err := tx.Commit(); err != nil {
		for _, r := range group {
			r.err = fmt.Errorf("sqlite: %s: commit: %w", s.path, err)
		}
		clear(s.heads)
		return true
	}
	s.txs.Add(1)
	s.remember(group)
	return true
}

// appendRecord seals the record onto its session's chain and inserts it, from
// the cached head when there is one; when the cache is stale (another
// process appended), the key refuses the insert and it reads the head.
func (s *Store) appendRecord(ctx context.Context, tx *sql.Tx, session string, sealed *audit.Record) error {
	unsealed := *sealed
	head, cached := s.heads[session]
	for {
		if !cached {
			err := s.queryRow(ctx, tx, `SELECT seq, hash FROM audit WHERE session = ? ORDER BY seq DESC LIMIT 1`, session).Scan(&head.seq, &head.hash)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sqlite: %s: %w", s.path, err)
			}
		}
		*sealed = unsealed
		if err := audit.Seal(sealed, head.seq, head.hash); err != nil {
			return err
		}
		raw, err := json.Marshal(sealed)
		if err != nil {
			return err
		}
		_, err = s.exec(ctx, tx, `INSERT INTO audit (session, seq, hash, record) VALUES (?, ?, ?, ?)`,
			session, sealed.Seq, sealed.Hash, string(raw))
		var se *sqlite.Error
		if cached && errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
			delete(s.heads, session)
			cached = false
			continue
		}
		if err != nil {
			return fmt.Errorf("sqlite: %s: append audit record: %w", s.path, err)
		}
		return nil
	}
}

// apply writes one commit in tx. Its checks come first and write nothing
// when they fail; partial reports whether the commit may have written
// something before failing (then only a savepoint or the whole
// transaction can undo it).
func (s *Store) apply(ctx context.Context, tx *sql.Tx, c *gate.Commit, sealed *audit.Record) (partial bool, err error) {
	wrote := false
	if c.Use != "" {
		res, err := s.exec(ctx, tx, `UPDATE confirmations SET used = 1 WHERE token = ? AND used = 0`, c.Use)
		if err != nil {
			return false, fmt.Errorf("sqlite: %s: %w", s.path, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return false, agentplane.Errorf(agentplane.CodeConfirmationInvalid, "confirmation token unknown or used")
		}
		wrote = true
	}
	if c.Session != nil {
		state, err := json.Marshal(c.Session)
		if err != nil {
			return wrote, err
		}
		// One statement writes the session only if it is at the version
		// before this one (absent, for version 1).
		var res sql.Result
		if c.Session.Version == 1 {
			res, err = s.exec(ctx, tx, `INSERT INTO sessions (id, version, state) VALUES (?, 1, ?) ON CONFLICT (id) DO NOTHING`,
				c.Session.ID, string(state))
		} else {
			res, err = s.exec(ctx, tx, `UPDATE sessions SET version = ?, state = ? WHERE id = ? AND version = ?`,
				c.Session.Version, string(state), c.Session.ID, c.Session.Version-1)
		}
		if err != nil {
			return wrote, fmt.Errorf("sqlite: %s: store session: %w", s.path, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			var have int64
			s.queryRow(ctx, tx, `SELECT version FROM sessions WHERE id = ?`, c.Session.ID).Scan(&have)
			return wrote, agentplane.Errorf(agentplane.CodeVersionConflict, "session %q is at version %d; cannot store version %d", c.Session.ID, have, c.Session.Version)
		}
	}
	if err := s.write(ctx, tx, c, sealed); err != nil {
		return true, err
	}
	return false, nil
}

// write writes what a commit adds once its checks have passed: the audit
// record, the request's result, an issued confirmation token.
func (s *Store) write(ctx context.Context, tx *sql.Tx, c *gate.Commit, sealed *audit.Record) error {
	if c.Record != nil {
		*sealed = *c.Record
		if c.Session == nil && sealed.State != nil {
			var state string
			if err := s.queryRow(ctx, tx, `SELECT state FROM sessions WHERE id = ?`, c.SessionID).Scan(&state); err == nil {
				var cur agentplane.Session
				if json.Unmarshal([]byte(state), &cur) == nil {
					sealed.State = &cur
				}
			}
		}
		if err := s.appendRecord(ctx, tx, c.SessionID, sealed); err != nil {
			return err
		}
	}
	if c.RequestID != "" && c.Result != nil {
		r := *c.Result
		r.Session = nil
		raw, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, `INSERT INTO results (request_id, result) VALUES (?, ?) ON CONFLICT DO NOTHING`, c.RequestID, string(raw)); err != nil {
			return fmt.Errorf("sqlite: %s: store result: %w", s.path, err)
		}
	}
	if c.Issue != nil {
		raw, err := json.Marshal(c.Issue)
		if err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, `INSERT INTO confirmations (token, used, confirmation) VALUES (?, 0, ?)`, c.Issue.Token, string(raw)); err != nil {
			return fmt.Errorf("sqlite: %s: store confirmation: %w", s.path, err)
		}
	}
	return nil
}
