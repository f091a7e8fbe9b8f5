package memstore

import (
	"bytes"
	"context"

	"github.com/agentplane/agentplane/store"
)

// PutCatalogVersion keeps a provider's answer by its version; see
// store.CatalogVersions.
func (s *Store) PutCatalogVersion(_ context.Context, version string, body []byte) error {
	if err := store.CheckCatalogVersion(version, body); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.catalogs == nil {
		s.catalogs = map[string][]byte{}
	}
	if _, ok := s.catalogs[version]; !ok {
		s.catalogs[version] = bytes.Clone(body)
	}
	return nil
}

// CatalogVersion returns a provider's answer kept by its version; see
// store.CatalogVersions.
func (s *Store) CatalogVersion(_ context.Context, version string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.catalogs[version]
	return bytes.Clone(b), ok, nil
}
