// Package memstore keeps sessions in memory: the store for tests, the
// route command and embedding without persistence.
package memstore

import (
	"context"
	"sync"

	"github.com/agentplane/agentplane"
)

// Store is an in-memory session and request-result store, safe for
// concurrent use.
type Store struct {
	mu       sync.Mutex
	sessions map[string]*agentplane.Session
	results  map[string]agentplane.ExecutionResult
}

// New returns an empty store.
func New() *Store {
	return &Store{sessions: map[string]*agentplane.Session{}, results: map[string]agentplane.ExecutionResult{}}
}

// Result returns the result recorded for the request id.
func (s *Store) Result(_ context.Context, requestID string) (agentplane.ExecutionResult, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.results[requestID]
	return r, ok, nil
}

// SaveResult records the result of a request id; the first save wins.
func (s *Store) SaveResult(_ context.Context, requestID string, res agentplane.ExecutionResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.results[requestID]; !ok {
		res.Session = nil // the session lives in the session map
		s.results[requestID] = res
	}
	return nil
}

// Get returns a copy of the session, or an error with code not_found.
func (s *Store) Get(_ context.Context, id string) (*agentplane.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return nil, agentplane.Errorf(agentplane.CodeNotFound, "no session %q", id)
	}
	return sess.Clone(), nil
}

// Put stores a copy of sess when its version is one more than the stored
// one (1 for a new session), else returns a version_conflict error.
func (s *Store) Put(_ context.Context, sess *agentplane.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var have int64
	if old, ok := s.sessions[sess.ID]; ok {
		have = old.Version
	}
	if sess.Version != have+1 {
		return agentplane.Errorf(agentplane.CodeVersionConflict, "session %q is at version %d; cannot store version %d", sess.ID, have, sess.Version)
	}
	s.sessions[sess.ID] = sess.Clone()
	return nil
}
