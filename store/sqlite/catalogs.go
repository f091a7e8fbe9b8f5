package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentplane/agentplane/store"
)

// PutCatalogVersion keeps a provider's answer by its version; see
// store.CatalogVersions.
func (s *Store) PutCatalogVersion(ctx context.Context, version string, body []byte) error {
	if err := store.CheckCatalogVersion(version, body); err != nil {
		return err
	}
	if s.readOnly {
		return s.wrap("keep catalog version", errors.New("the database is open read-only"))
	}
	const query = `INSERT INTO catalog_versions (version, body, created) VALUES (?, ?, ?) ON CONFLICT (version) DO NOTHING`
	args := []any{version, body, time.Now().UnixNano()}
	s.run(query, args)
	_, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return s.wrap("keep catalog version", err)
	}
	return nil
}

// CatalogVersion returns a provider's answer kept by its version; see
// store.CatalogVersions.
func (s *Store) CatalogVersion(ctx context.Context, version string) ([]byte, bool, error) {
	var body []byte
	const query = `SELECT body FROM catalog_versions WHERE version = ?`
	args := []any{version}
	s.run(query, args)
	err := s.db.QueryRowContext(ctx, query, args...).Scan(&body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, s.wrap("read catalog version", err)
	}
	return body, true, nil
}
