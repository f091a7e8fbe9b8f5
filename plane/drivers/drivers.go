// Package drivers links the SQL drivers (SQLite, PostgreSQL) and opens the
// store a database string names with the subsystems' tables
// (plane.Extensions). Package plane links no driver: the program that
// opens a store imports this package — the agentplane command, a test —
// and the runtime is given its opener, or an opened store to use and
// leave open.
//
//	rt, err := plane.Open(ctx, plane.Options{Config: src, DB: "agentplane.db", OpenStore: drivers.Open})
//	st, err := drivers.Open(ctx, "postgres://…", nil) // an embedder's, closed by it: plane.Options{Store: st}
package drivers

import (
	"context"
	"errors"

	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/sqlite"
)

// Open opens the database db names — a SQLite file, a postgres:// URL,
// or "" for memory — with the subsystems' tables (plane.Extensions). The
// caller closes it. nil o means defaults.
func Open(ctx context.Context, db string, o *plane.StoreOptions) (store.Store, error) {
	if o == nil {
		o = &plane.StoreOptions{}
	}
	// each case returns a nil Store, never a nil pointer in one, on error
	switch {
	case db == "":
		return memstore.New(), nil
	case plane.IsPostgres(db):
		if o.ReadOnly {
			return nil, errors.New("drivers: a read-only store is a SQLite file; PostgreSQL is read with a read-only role")
		}
		st, err := postgres.Open(ctx, db, &postgres.Options{Notify: o.PGNotify, Extensions: plane.Extensions})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	so := &sqlite.Options{Extensions: plane.Extensions}
	if o.ReadOnly {
		so = &sqlite.Options{ReadOnly: true}
	}
	st, err := sqlite.Open(ctx, db, so)
	if err != nil {
		return nil, err
	}
	return st, nil
}
