// Package memstore keeps sessions, their audit chains, idempotency keys and
// confirmation tokens in memory: the store for tests, replay and embedding
// without persistence. It implements store.Store; it has no SQL, so a
// commit with subsystem Ops is refused (use store/sqlite).
package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store"
)

// Store is an in-memory store, safe for concurrent use. Every Commit is
// applied under one lock, so it is atomic.
type Store struct {
	mu       sync.Mutex
	sessions map[string]*agentplane.Session
	created  map[string]int64 // Unix nanoseconds, by session
	// chains keeps each session's records as stored (their bytes), with
	// the last record's hash: a record is decoded only when read
	chains   map[string]*chain
	requests map[store.RequestKey]store.Request
	tokens   map[string]store.Confirmation
	pending  map[string]string // store.PendingKey -> the digest of the token issued with it
	configs  map[string][]byte // configurations by digest (store.Configs)
	catalogs map[string][]byte // providers' answers by version (store.CatalogVersions)
}

// New returns an empty store.
func New() *Store {
	return &Store{
		sessions: map[string]*agentplane.Session{},
		created:  map[string]int64{},
		chains:   map[string]*chain{},
		requests: map[store.RequestKey]store.Request{},
		tokens:   map[string]store.Confirmation{},
		pending:  map[string]string{},
	}
}

// chain is one session's audit chain.
type chain struct {
	raw  [][]byte
	hash string // of the last record
}

// ErrNoSQL is Commit's error for a commit with Ops.
var ErrNoSQL = errors.New("memstore: subsystem tables need a SQL store (sqlite or postgres)")

// Session returns a copy of the session, or an error with code not_found.
func (s *Store) Session(_ context.Context, id string) (*agentplane.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", id)
	}
	return sess.Clone(), nil
}

// Request returns what the idempotency key holds.
func (s *Store) Request(_ context.Context, key store.RequestKey) (store.Request, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[key]
	return r, ok, nil
}

// Claim claims an idempotency key; see store.Store.
func (s *Store) Claim(_ context.Context, c store.Claim) (store.Request, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[c.Key]
	if ok && (r.State != store.RequestRunning || !r.ClaimedAt.Before(c.StaleBefore) || r.Digest != c.Digest) {
		return r, false, nil
	}
	if c.Use != nil {
		digest, pending := c.Use.Key()
		if pending {
			digest = s.pending[digest]
		}
		t, ok := s.tokens[digest]
		if !ok || t.Used {
			return store.Request{}, false, store.ErrConfirmationUsed
		}
		t.Used = true
		s.tokens[digest] = t
	}
	running := slices.Clone(c.Running)
	if running == nil && ok {
		running = r.Running // a takeover keeps what the first claim ran
	}
	s.requests[c.Key] = store.Request{Key: c.Key, Digest: c.Digest, State: store.RequestRunning, ClaimedAt: c.Now, Running: running}
	return store.Request{}, true, nil
}

// Head returns the head of a session's audit chain; see store.Store.
func (s *Store) Head(_ context.Context, session string) (store.Head, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[session]; !ok {
		return store.Head{}, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", session)
	}
	ch := s.chains[session]
	if ch == nil {
		return store.Head{}, nil
	}
	return store.Head{Seq: int64(len(ch.raw)), Hash: ch.hash}, nil
}

// Stale returns running requests claimed before before; see store.Store.
func (s *Store) Stale(_ context.Context, before time.Time, limit int) ([]store.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Request
	for _, r := range s.requests {
		if r.State == store.RequestRunning && r.ClaimedAt.Before(before) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b store.Request) int {
		if c := a.ClaimedAt.Compare(b.ClaimedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key.RequestID, b.Key.RequestID)
	})
	return out[:min(len(out), max(limit, 0))], nil
}

// Confirmation returns an issued confirmation token by its digest.
func (s *Store) Confirmation(_ context.Context, digest string) (store.Confirmation, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.tokens[digest]
	return c, ok, nil
}

// Commit applies c atomically; see store.Store. A record is sealed
// (canonical JSON, hash) outside the store's lock, on the chain's end
// and session version read under it; if either moved meanwhile it is
// sealed again on the new ones.
func (s *Store) Commit(_ context.Context, c *store.Commit) error {
	if len(c.Ops) > 0 {
		return ErrNoSQL
	}
	var rec audit.Record
	var sealed *basis
	for {
		s.mu.Lock()
		b, err := s.check(c)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		if c.Record == nil || (sealed != nil && *sealed == b) {
			break // s.mu held: apply
		}
		rec = *c.Record
		if c.Session == nil && rec.State != nil {
			if cur, ok := s.sessions[c.SessionID]; ok {
				rec.State = cur.Clone()
			}
		}
		s.mu.Unlock()
		if err := audit.Seal(&rec, b.seq, b.hash); err != nil {
			return err
		}
		sealed = &b
	}
	defer s.mu.Unlock()
	// every check passed: apply
	if c.Session != nil {
		if c.Session.Version == 1 {
			s.created[c.Session.ID] = store.CreatedAt(c).UnixNano()
		}
		s.sessions[c.Session.ID] = c.Session.Clone()
	}
	if c.Record != nil {
		ch := s.chains[c.SessionID]
		if ch == nil {
			ch = &chain{}
			s.chains[c.SessionID] = ch
		}
		ch.raw, ch.hash = append(ch.raw, rec.Raw), rec.Hash
		*c.Record = rec // the caller sees the sealed record
	}
	if r := c.Request; r != nil {
		done := store.Request{Key: r.Key, Digest: r.Digest, State: store.RequestDone, ClaimedAt: r.ClaimedAt}
		if r.Result != nil {
			res := *r.Result
			res.Session = nil
			done.Result = &res
		}
		if c.Record != nil {
			done.Seq = rec.Seq
		}
		s.requests[r.Key] = done
	}
	if c.Issue != nil {
		s.tokens[c.Issue.Digest] = *c.Issue
		if c.Issue.Pending {
			s.pending[store.PendingKey(c.Issue.SessionID, c.Issue.Version)] = c.Issue.Digest
		}
	}
	return nil
}

// basis is what a commit's record is sealed on: the end of the session's
// chain and the session's version.
type basis struct {
	seq     int64
	hash    string
	version int64
}

// check refuses c if it cannot apply now and returns the basis a record
// of c is sealed on; s.mu is held.
func (s *Store) check(c *store.Commit) (basis, error) {
	var b basis
	if c.Request != nil {
		if r, ok := s.requests[c.Request.Key]; ok && r.State == store.RequestDone {
			return b, store.ErrRequestDone
		}
	}
	if old, ok := s.sessions[c.SessionID]; ok {
		b.version = old.Version
	}
	if c.Session != nil {
		var have int64
		if old, ok := s.sessions[c.Session.ID]; ok {
			have = old.Version
		}
		if c.Session.Version != have+1 {
			return b, agentplane.Errorf(agentplane.CodeVersionConflict, "session %q is at version %d; cannot store version %d", c.Session.ID, have, c.Session.Version)
		}
	}
	if ch := s.chains[c.SessionID]; ch != nil {
		b.seq, b.hash = int64(len(ch.raw)), ch.hash
	}
	return b, nil
}

// RecordsBefore returns copies of the last limit audit records of the
// session below a sequence number (≤ 0: the end), in order.
func (s *Store) RecordsBefore(_ context.Context, session string, before int64, limit int) ([]audit.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.chainLen(session) // records 1..n are raw[0..n-1]
	end := n
	if before > 0 {
		end = min(n, before-1)
	}
	return s.decode(session, max(end-int64(max(limit, 1)), 0), end)
}

// RecordsAfter returns copies of the first limit audit records of the
// session above a sequence number, in order.
func (s *Store) RecordsAfter(_ context.Context, session string, after int64, limit int) ([]audit.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := max(after, 0)
	return s.decode(session, start, min(start+int64(max(limit, 1)), s.chainLen(session)))
}

// Records returns copies of the session's audit records after a sequence
// number, in order.
func (s *Store) Records(_ context.Context, session string, after int64) ([]audit.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decode(session, max(after, 0), s.chainLen(session))
}

// chainLen is how many records the session's chain holds; s.mu is held.
func (s *Store) chainLen(session string) int64 {
	if ch := s.chains[session]; ch != nil {
		return int64(len(ch.raw))
	}
	return 0
}

// decode returns copies of the session's records raw[start:end] (none
// when the range is empty); s.mu is held.
func (s *Store) decode(session string, start, end int64) ([]audit.Record, error) {
	if start >= end {
		return nil, nil
	}
	out := make([]audit.Record, 0, end-start)
	for _, raw := range s.chains[session].raw[start:end] {
		r, err := audit.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("memstore: record of %s: %w", session, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Sessions returns a page of an owner's sessions, newest first.
func (s *Store) Sessions(_ context.Context, q store.SessionQuery) (store.SessionPage, error) {
	type entry struct {
		created int64
		id      string
	}
	var afterCreated int64
	var afterID string
	if q.Cursor != "" {
		var err error
		if afterCreated, afterID, err = store.ParseSessionCursor(q.Cursor); err != nil {
			return store.SessionPage{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []entry
	for id, sess := range s.sessions {
		e := entry{s.created[id], id}
		if sess.Owner != q.Owner || q.Cursor != "" && !before(e.created, e.id, afterCreated, afterID) {
			continue
		}
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b entry) int {
		if before(a.created, a.id, b.created, b.id) {
			return 1
		}
		if a == b {
			return 0
		}
		return -1
	})
	n := q.PageSize()
	var page store.SessionPage
	for i, e := range all {
		if i == n {
			last := all[n-1]
			page.Next = store.SessionCursor(last.created, last.id)
			break
		}
		page.Sessions = append(page.Sessions, store.SessionInfo{Session: s.sessions[e.id].Clone(), Created: time.Unix(0, e.created).UTC()})
	}
	return page, nil
}

// before reports whether (c1, id1) comes before (c2, id2) in creation
// order.
func before(c1 int64, id1 string, c2 int64, id2 string) bool {
	return c1 < c2 || c1 == c2 && id1 < id2
}

// Close does nothing: there is nothing to release.
func (s *Store) Close() error { return nil }
