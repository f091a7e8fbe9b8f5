// Package memstore keeps sessions, their audit chains, request results and
// confirmation tokens in memory: the store for tests, the route command and
// embedding without persistence. It implements gate.Store and audit's
// reading side.
package memstore

import (
	"context"
	"slices"
	"sync"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
)

// Store is an in-memory store, safe for concurrent use. Every Commit is
// applied under one lock, so it is atomic.
type Store struct {
	mu       sync.Mutex
	sessions map[string]*agentplane.Session
	chains   map[string][]audit.Record
	results  map[string]agentplane.ExecutionResult
	tokens   map[string]gate.Confirmation
}

// New returns an empty store.
func New() *Store {
	return &Store{
		sessions: map[string]*agentplane.Session{},
		chains:   map[string][]audit.Record{},
		results:  map[string]agentplane.ExecutionResult{},
		tokens:   map[string]gate.Confirmation{},
	}
}

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

// Result returns the result recorded for the request id.
func (s *Store) Result(_ context.Context, requestID string) (agentplane.ExecutionResult, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.results[requestID]
	return r, ok, nil
}

// Confirmation returns an issued confirmation token.
func (s *Store) Confirmation(_ context.Context, token string) (gate.Confirmation, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.tokens[token]
	return c, ok, nil
}

// Commit applies c atomically; see gate.Store.
func (s *Store) Commit(_ context.Context, c *gate.Commit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Session != nil {
		var have int64
		if old, ok := s.sessions[c.Session.ID]; ok {
			have = old.Version
		}
		if c.Session.Version != have+1 {
			return agentplane.Errorf(agentplane.CodeVersionConflict, "session %q is at version %d; cannot store version %d", c.Session.ID, have, c.Session.Version)
		}
	}
	if c.Use != "" {
		if t, ok := s.tokens[c.Use]; !ok || t.Used {
			return agentplane.Errorf(agentplane.CodeConfirmationInvalid, "confirmation token unknown or used")
		}
	}
	var rec audit.Record
	if c.Record != nil {
		rec = *c.Record
		if c.Session == nil && rec.State != nil {
			if cur, ok := s.sessions[c.SessionID]; ok {
				rec.State = cur.Clone()
			}
		}
		chain := s.chains[c.SessionID]
		var prevSeq int64
		var prevHash string
		if n := len(chain); n > 0 {
			prevSeq, prevHash = chain[n-1].Seq, chain[n-1].Hash
		}
		if err := audit.Seal(&rec, prevSeq, prevHash); err != nil {
			return err
		}
	}
	// every check passed: apply
	if c.Session != nil {
		s.sessions[c.Session.ID] = c.Session.Clone()
	}
	if c.Record != nil {
		s.chains[c.SessionID] = append(s.chains[c.SessionID], rec)
		*c.Record = rec // the caller sees the sealed record
	}
	if c.RequestID != "" && c.Result != nil {
		if _, seen := s.results[c.RequestID]; !seen {
			r := *c.Result
			r.Session = nil
			s.results[c.RequestID] = r
		}
	}
	if c.Issue != nil {
		s.tokens[c.Issue.Token] = *c.Issue
	}
	if c.Use != "" {
		t := s.tokens[c.Use]
		t.Used = true
		s.tokens[c.Use] = t
	}
	return nil
}

// Records returns a copy of the session's audit records, in order.
func (s *Store) Records(_ context.Context, session string) ([]audit.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.chains[session]), nil
}
