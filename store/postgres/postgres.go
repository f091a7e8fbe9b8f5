// Package postgres is the store for several agentplane instances sharing
// one PostgreSQL (pgx/v5). It implements gate.Store and the audit log's
// reading side; every Commit is one transaction, and sessions and audit
// chains are locked row by row, so instances on other machines never lose
// an update or fork a chain.
//
//	s, err := postgres.Open(ctx, "postgres://agentplane@db/agentplane")
package postgres

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock that serializes migrations across
// instances starting together.
const migrationLock = 0x61676e74 // "agnt"

// Store is a PostgreSQL store, safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	url  string // for messages, without the password

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
)

// staleRetries bounds how often a commit re-reads a stale chain head.
const staleRetries = 8

// Open connects, applies the embedded migrations, and refuses a database
// whose schema is newer than this binary's. Errors name the server and
// what to do.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: bad URL: %w", err)
	}
	shown := fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", shown, err)
	}
	s := &Store{pool: pool, url: shown, heads: map[string]chainHead{}}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: cannot reach %s (%v): is the server running and the URL right?", shown, err)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

func (s *Store) migrate(ctx context.Context) error {
	files, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(files)
	latest := len(files)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", s.url, err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
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
	return tx.Commit(ctx)
}

// Session returns a copy of the session, or an error with code not_found.
func (s *Store) Session(ctx context.Context, id string) (*agentplane.Session, error) {
	var state []byte
	err := s.pool.QueryRow(ctx, `SELECT state FROM sessions WHERE id = $1`, id).Scan(&state)
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

// Result returns the result recorded for a request id.
func (s *Store) Result(ctx context.Context, requestID string) (agentplane.ExecutionResult, bool, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT result FROM results WHERE request_id = $1`, requestID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return agentplane.ExecutionResult{}, false, nil
	}
	if err != nil {
		return agentplane.ExecutionResult{}, false, s.fail("load result", err)
	}
	var r agentplane.ExecutionResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return agentplane.ExecutionResult{}, false, fmt.Errorf("postgres: %s: result %s is corrupt: %w", s.url, requestID, err)
	}
	return r, true, nil
}

// Confirmation returns an issued confirmation token.
func (s *Store) Confirmation(ctx context.Context, token string) (gate.Confirmation, bool, error) {
	var raw []byte
	var used bool
	err := s.pool.QueryRow(ctx, `SELECT confirmation, used FROM confirmations WHERE token = $1`, token).Scan(&raw, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return gate.Confirmation{}, false, nil
	}
	if err != nil {
		return gate.Confirmation{}, false, s.fail("load confirmation", err)
	}
	var c gate.Confirmation
	if err := json.Unmarshal(raw, &c); err != nil {
		return gate.Confirmation{}, false, fmt.Errorf("postgres: %s: confirmation is corrupt: %w", s.url, err)
	}
	c.Used = used
	return c, true, nil
}

// Records returns the session's audit records in order.
func (s *Store) Records(ctx context.Context, session string) ([]audit.Record, error) {
	rows, err := s.pool.Query(ctx, `SELECT record FROM audit WHERE session = $1 ORDER BY seq`, session)
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

// Commit applies c atomically; see gate.Store. Its statements reach the
// server in one round trip (a batch) and run in one transaction: the
// version and token checks abort it when they fail, and the audit chain's
// primary key refuses a record sealed on a stale head (then the head is
// read again and the commit retried). Concurrent commits from any number
// of instances serialize per session on the session's row.
func (s *Store) Commit(ctx context.Context, c *gate.Commit) error {
	for attempt := 0; ; attempt++ {
		sealed, err := s.commitOnce(ctx, c)
		if err == nil {
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
			case pgErr.Code == "23505" && pgErr.ConstraintName == "audit_pkey" && attempt < staleRetries:
				continue // the chain moved on: read its head and seal again
			case pgErr.Code == "23505" && pgErr.ConstraintName == "audit_pkey":
				return agentplane.Errorf(agentplane.CodeVersionConflict, "the audit chain of %q moved concurrently", c.SessionID)
			}
		}
		return s.fail("commit", err)
	}
}

// commitOnce seals c's record on the chain head it knows and sends c's
// statements as one batch. A record-only commit that snapshots the
// session's current state runs in a transaction that locks the session's
// row and reads the state first, so no change of the session commits
// between the snapshot and the record.
func (s *Store) commitOnce(ctx context.Context, c *gate.Commit) (audit.Record, error) {
	var sealed audit.Record
	send := func(b *pgx.Batch) error { return s.pool.SendBatch(ctx, b).Close() }
	if c.Record != nil {
		sealed = *c.Record
		if c.Session == nil && sealed.State != nil {
			tx, err := s.pool.Begin(ctx)
			if err != nil {
				return sealed, err
			}
			defer tx.Rollback(ctx)
			var current []byte
			err = tx.QueryRow(ctx, `SELECT state FROM sessions WHERE id = $1 FOR UPDATE`, c.SessionID).Scan(&current)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return sealed, err
			}
			var cur agentplane.Session
			if current != nil && json.Unmarshal(current, &cur) == nil {
				sealed.State = &cur
			}
			send = func(b *pgx.Batch) error {
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return err
				}
				return tx.Commit(ctx)
			}
		}
		head, err := s.head(ctx, c.SessionID)
		if err != nil {
			return sealed, err
		}
		if err := audit.Seal(&sealed, head.seq, head.hash); err != nil {
			return sealed, err
		}
	}
	b, err := s.batch(c, &sealed)
	if err != nil {
		return sealed, err
	}
	return sealed, send(b)
}

// batch queues c's statements: the token and version checks, the sealed
// record, the request's result and an issued confirmation token.
func (s *Store) batch(c *gate.Commit, sealed *audit.Record) (*pgx.Batch, error) {
	b := &pgx.Batch{}
	if c.Use != "" {
		b.Queue(`WITH u AS (UPDATE confirmations SET used = TRUE WHERE token = $1 AND NOT used RETURNING 1)
			SELECT agentplane_check(EXISTS (SELECT 1 FROM u), $2, 'confirmation token unknown or used')`, c.Use, stateToken)
	}
	if c.Session != nil {
		state, err := json.Marshal(c.Session)
		if err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("session %q is not at version %d; cannot store version %d", c.Session.ID, c.Session.Version-1, c.Session.Version)
		if c.Session.Version == 1 {
			b.Queue(`WITH u AS (INSERT INTO sessions (id, version, state) VALUES ($1, 1, $2) ON CONFLICT (id) DO NOTHING RETURNING 1)
				SELECT agentplane_check(EXISTS (SELECT 1 FROM u), $3, $4)`, c.Session.ID, state, stateVersion, msg)
		} else {
			b.Queue(`WITH u AS (UPDATE sessions SET version = $2, state = $3 WHERE id = $1 AND version = $2 - 1 RETURNING 1)
				SELECT agentplane_check(EXISTS (SELECT 1 FROM u), $4, $5)`, c.Session.ID, c.Session.Version, state, stateVersion, msg)
		}
	}
	if c.Record != nil {
		raw, err := json.Marshal(sealed)
		if err != nil {
			return nil, err
		}
		b.Queue(`INSERT INTO audit (session, seq, hash, record) VALUES ($1, $2, $3, $4)`, c.SessionID, sealed.Seq, sealed.Hash, string(raw))
	}
	if c.RequestID != "" && c.Result != nil {
		r := *c.Result
		r.Session = nil
		raw, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		b.Queue(`INSERT INTO results (request_id, result) VALUES ($1, $2) ON CONFLICT DO NOTHING`, c.RequestID, raw)
	}
	if c.Issue != nil {
		raw, err := json.Marshal(c.Issue)
		if err != nil {
			return nil, err
		}
		b.Queue(`INSERT INTO confirmations (token, used, confirmation) VALUES ($1, FALSE, $2)`, c.Issue.Token, raw)
	}
	return b, nil
}

// head returns the session's chain head, from the cache or the database.
func (s *Store) head(ctx context.Context, session string) (chainHead, error) {
	s.mu.Lock()
	h, ok := s.heads[session]
	s.mu.Unlock()
	if ok {
		return h, nil
	}
	err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM audit WHERE session = $1 ORDER BY seq DESC LIMIT 1`, session).Scan(&h.seq, &h.hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return h, err // Commit names the server
	}
	return h, nil
}

func (s *Store) setHead(session string, h chainHead) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
