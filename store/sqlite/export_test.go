package sqlite

import (
	"context"
	"database/sql"
)

// OpenRaw opens the file without migrations, for tests that tamper with it.
func OpenRaw(path string) (*sql.DB, error) { return sql.Open("sqlite", "file:"+path) }

// Transactions returns how many transactions have committed groups.
func (s *Store) Transactions() int64 { return s.txs.Load() }

// BreakWriter closes the writer's connection under the store, as
// database/sql does with one that went bad.
func (s *Store) BreakWriter() { s.writer.Close() }

// Trace hands every statement the store runs, with its arguments, to f
// before it runs; nil stops. Set it before the store is used concurrently.
func (s *Store) Trace(f func(query string, args []any)) { s.trace = f }

// LeaveTransactionOpen begins a transaction on the writer's connection
// and leaves it there, as a group whose ROLLBACK failed would.
func (s *Store) LeaveTransactionOpen(ctx context.Context) error {
	_, err := s.writer.ExecContext(ctx, `BEGIN`)
	return err
}
