package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentplane/agentplane/store"
)

// PutConfig keeps a configuration by its digest; see store.Configs.
func (s *Store) PutConfig(ctx context.Context, digest string, body []byte) error {
	if err := store.CheckConfig(digest, body); err != nil {
		return err
	}
	if s.readOnly {
		return s.wrap("keep configuration", errors.New("the database is open read-only"))
	}
	const query = `INSERT INTO configs (digest, body, created) VALUES (?, ?, ?) ON CONFLICT (digest) DO NOTHING`
	args := []any{digest, body, time.Now().UnixNano()}
	s.run(query, args)
	_, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return s.wrap("keep configuration", err)
	}
	return nil
}

// Config returns a configuration kept by its digest; see store.Configs.
func (s *Store) Config(ctx context.Context, digest string) ([]byte, bool, error) {
	var body []byte
	const query = `SELECT body FROM configs WHERE digest = ?`
	args := []any{digest}
	s.run(query, args)
	err := s.db.QueryRowContext(ctx, query, args...).Scan(&body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, s.wrap("read configuration", err)
	}
	return body, true, nil
}
