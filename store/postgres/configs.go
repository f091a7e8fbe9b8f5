package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/store"
)

// PutConfig keeps a configuration by its digest; see store.Configs.
func (s *Store) PutConfig(ctx context.Context, digest string, body []byte) error {
	if err := store.CheckConfig(digest, body); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO configs (digest, body, created) VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING`,
		digest, body, time.Now().UnixNano())
	if err != nil {
		return s.fail("keep configuration", err)
	}
	return nil
}

// Config returns a configuration kept by its digest; see store.Configs.
func (s *Store) Config(ctx context.Context, digest string) ([]byte, bool, error) {
	var body []byte
	err := s.pool.QueryRow(ctx, `SELECT body FROM configs WHERE digest = $1`, digest).Scan(&body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, s.fail("read configuration", err)
	}
	return body, true, nil
}
