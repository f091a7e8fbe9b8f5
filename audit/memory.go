package audit

import (
	"context"
	"slices"
	"sync"
)

// Memory is an in-memory Log, for tests and for sessions nothing needs to
// survive.
type Memory struct {
	mu       sync.Mutex
	sessions map[string][]Record
}

// NewMemory returns an empty log.
func NewMemory() *Memory { return &Memory{sessions: map[string][]Record{}} }

// Append seals and stores r.
func (m *Memory) Append(_ context.Context, r *Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	recs := m.sessions[r.Session]
	var prevSeq int64
	var prevHash string
	if n := len(recs); n > 0 {
		prevSeq, prevHash = recs[n-1].Seq, recs[n-1].Hash
	}
	if err := Seal(r, prevSeq, prevHash); err != nil {
		return err
	}
	m.sessions[r.Session] = append(recs, *r)
	return nil
}

// Records returns a copy of the session's records.
func (m *Memory) Records(_ context.Context, session string) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sessions[session]), nil
}
