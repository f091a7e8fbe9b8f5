package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/store"
)

// PutCatalogVersion keeps a provider's answer by its version; see
// store.CatalogVersions.
func (s *Store) PutCatalogVersion(ctx context.Context, version string, body []byte) error {
	if err := store.CheckCatalogVersion(version, body); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO catalog_versions (version, body, created) VALUES ($1, $2, $3) ON CONFLICT (version) DO NOTHING`,
		version, body, time.Now().UnixNano())
	if err != nil {
		return s.fail("keep catalog version", err)
	}
	return nil
}

// CatalogVersion returns a provider's answer kept by its version; see
// store.CatalogVersions.
func (s *Store) CatalogVersion(ctx context.Context, version string) ([]byte, bool, error) {
	var body []byte
	err := s.pool.QueryRow(ctx, `SELECT body FROM catalog_versions WHERE version = $1`, version).Scan(&body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, s.fail("read catalog version", err)
	}
	return body, true, nil
}
