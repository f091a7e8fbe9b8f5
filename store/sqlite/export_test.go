package sqlite

import "database/sql"

// OpenRaw opens the file without migrations, for tests that tamper with it.
func OpenRaw(path string) (*sql.DB, error) { return sql.Open("sqlite", "file:"+path) }

// Transactions returns how many transactions have committed groups.
func (s *Store) Transactions() int64 { return s.txs.Load() }
