package memstore

import (
	"bytes"
	"context"

	"github.com/agentplane/agentplane/store"
)

// PutConfig keeps a configuration by its digest; see store.Configs.
func (s *Store) PutConfig(_ context.Context, digest string, body []byte) error {
	if err := store.CheckConfig(digest, body); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.configs == nil {
		s.configs = map[string][]byte{}
	}
	if _, ok := s.configs[digest]; !ok {
		s.configs[digest] = bytes.Clone(body)
	}
	return nil
}

// Config returns a configuration kept by its digest; see store.Configs.
func (s *Store) Config(_ context.Context, digest string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.configs[digest]
	return bytes.Clone(b), ok, nil
}
