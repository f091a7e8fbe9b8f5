package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/store"
)

// Counters is the extension RunSQL opens stores with: one table of named
// counters, in two migrations.
var Counters = store.Extension{
	Name: "counters",
	Migrations: map[string][]string{
		store.SQLite:   {`CREATE TABLE counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL)`, `ALTER TABLE counters ADD COLUMN note TEXT`},
		store.Postgres: {`CREATE TABLE counters (name TEXT PRIMARY KEY, n BIGINT NOT NULL)`, `ALTER TABLE counters ADD COLUMN note TEXT`},
	},
}

// bump is an Op adding to a counter; with want > 0, it fails unless the
// counter was at want-1 (a compare-and-swap, as a ledger's transitions are).
func bump(name string, want int64) store.Op {
	return store.OpFunc(func(ctx context.Context, tx store.Tx) error {
		if want == 1 {
			_, err := tx.Exec(ctx, `INSERT INTO counters (name, n, note) VALUES (?, 1, ?)`, name, "created in "+tx.Dialect())
			return err
		}
		n, err := tx.Exec(ctx, `UPDATE counters SET n = n + 1 WHERE name = ? AND n = ?`, name, want-1)
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("counters: %s is not at %d", name, want-1)
		}
		return nil
	})
}

// RunSQL runs the extension suite, one subtest per area (statements,
// stats, ops, chain verification), every area and every case in parallel
// with the others: each case opens a store of its own. open returns a
// new, empty store opened with the extensions given (Counters, or none)
// and is called from several goroutines at once.
func RunSQL(t *testing.T, open func(t *testing.T, exts []store.Extension) store.Store) {
	areas(t, open, []area[func(t *testing.T, exts []store.Extension) store.Store]{
		{"Statements", runStatements},
		{"Stats", runStats},
		{"Ops", runOps},
		{"Verify", runVerify},
	})
}

// counter reads a counter of the Counters extension.
func counter(t *testing.T, s store.Store, name string) (int64, string) {
	t.Helper()
	q, ok := s.(store.Querier)
	if !ok {
		t.Fatalf("%T is not a store.Querier", s)
	}
	var n int64
	var note string
	err := q.Query(context.Background(), `SELECT n, note FROM counters WHERE name = ?`, []any{name}, func(scan func(...any) error) error { return scan(&n, &note) })
	if err != nil {
		t.Fatal(err)
	}
	return n, note
}

// runStatements is the suite's part on a commit of one store.Statement.
func runStatements(t *testing.T, open func(t *testing.T, exts []store.Extension) store.Store) {
	ctx := context.Background()
	t.Run("StatementAloneCommits", func(t *testing.T) {
		t.Parallel()
		s := open(t, []store.Extension{Counters})
		var n int64
		st := store.Statement{Query: `INSERT INTO counters (name, n, note) VALUES (?, ?, ?) RETURNING n`, Args: []any{"alone", 7, "one statement"},
			Row: func(scan func(...any) error) error { return scan(&n) }}
		if err := s.Commit(ctx, &store.Commit{Ops: []store.Op{st}}); err != nil || n != 7 {
			t.Fatalf("the statement returned %d, %v", n, err)
		}
		if got, note := counter(t, s, "alone"); got != 7 || note != "one statement" {
			t.Fatalf("stored %d %q", got, note)
		}
		// a failing statement changes nothing and says why
		err := s.Commit(ctx, &store.Commit{Ops: []store.Op{store.Statement{Query: `INSERT INTO counters (name, n) VALUES (?, ?)`, Args: []any{"alone", 8}}}})
		if err == nil {
			t.Fatal("a duplicate key committed")
		}
		if got, _ := counter(t, s, "alone"); got != 7 {
			t.Fatalf("the failed statement left %d", got)
		}
	})
}

// runStats is the suite's part on the statements and transactions a store
// counts (store.Counted).
func runStats(t *testing.T, open func(t *testing.T, exts []store.Extension) store.Store) {
	ctx := context.Background()
	t.Run("StatsCountStatementsAndTransactions", func(t *testing.T) {
		t.Parallel()
		s := open(t, []store.Extension{Counters})
		counted, ok := s.(store.Counted)
		if !ok {
			t.Fatalf("%T keeps no store.Stats", s)
		}
		before := counted.Stats()
		if err := s.Commit(ctx, &store.Commit{Ops: []store.Op{bump("stats", 1)}}); err != nil {
			t.Fatal(err)
		}
		counter(t, s, "stats")
		after := counted.Stats()
		// the insert and the read; the store may add its own statements, never fewer
		if got := after.Statements - before.Statements; got < 2 {
			t.Errorf("a commit of one statement and a read counted %d statements", got)
		}
		if got := after.Transactions - before.Transactions; got != 1 {
			t.Errorf("one commit counted %d transactions", got)
		}
		if s.(store.Querier).Dialect() == store.Postgres && after.RoundTrips-before.RoundTrips < 2 {
			t.Errorf("a commit and a read on PostgreSQL counted %d round trips", after.RoundTrips-before.RoundTrips)
		}
	})
}

// runOps is the suite's part on subsystems' Ops: with a session's commit,
// undone with it, and alone.
func runOps(t *testing.T, open func(t *testing.T, exts []store.Extension) store.Store) {
	ctx := context.Background()
	t.Run("OpsCommitWithTheSession", func(t *testing.T) {
		t.Parallel()
		s := open(t, []store.Extension{Counters})
		err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a"), Ops: []store.Op{bump("x", 1), bump("x", 2)}})
		if err != nil {
			t.Fatal(err)
		}
		if n, note := counter(t, s, "x"); n != 2 || note == "" {
			t.Fatalf("counter %d %q", n, note)
		}
	})

	t.Run("AFailingOpUndoesTheCommit", func(t *testing.T) {
		t.Parallel()
		s := open(t, []store.Extension{Counters})
		if err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: sess("a", 1), Ops: []store.Op{bump("x", 1)}}); err != nil {
			t.Fatal(err)
		}
		err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: sess("a", 2), Record: rec("a"), Request: done(key("a", "r"), "x"),
			Ops: []store.Op{bump("x", 2), bump("x", 2)}})
		if err == nil || err.Error() != "counters: x is not at 1" {
			t.Fatalf("the op's own error: %v", err)
		}
		cur, _ := s.Session(ctx, "a")
		recs, _ := s.Records(ctx, "a", 0)
		_, reqOK, _ := s.Request(ctx, key("a", "r"))
		if n, _ := counter(t, s, "x"); n != 1 || cur.Version != 1 || len(recs) != 0 || reqOK {
			t.Fatalf("a failed op left counter %d, version %d, %d records, request %v", n, cur.Version, len(recs), reqOK)
		}
	})

	t.Run("OpsAlone", func(t *testing.T) {
		t.Parallel()
		s := open(t, []store.Extension{Counters})
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for g := range errs {
			wg.Go(func() { errs[g] = s.Commit(ctx, &store.Commit{Ops: []store.Op{bump(fmt.Sprint("c", g), 1)}}) })
		}
		wg.Wait()
		for g, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := counter(t, s, fmt.Sprint("c", g)); n != 1 {
				t.Fatalf("counter c%d is %d", g, n)
			}
		}
	})
}

// runVerify is the suite's part on store.Verify finding a chain cut in
// the database.
func runVerify(t *testing.T, open func(t *testing.T, exts []store.Extension) store.Store) {
	ctx := context.Background()
	t.Run("ACutChainIsFound", func(t *testing.T) {
		t.Parallel()
		for _, cut := range []struct {
			name  string
			where string
			seq   int64 // the first bad record
			why   string
		}{
			{"tail", "seq > 3", 4, "removed"},
			{"last", "seq = 5", 5, "removed"},
			{"middle", "seq = 2", 3, "sequence number"}, // the record found where 2 was due
		} {
			t.Run(cut.name, func(t *testing.T) {
				t.Parallel()
				s := open(t, nil)
				mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1)})
				for range 5 {
					mustCommit(t, s, &store.Commit{SessionID: "a", Record: rec("a")})
				}
				mustCommit(t, s, &store.Commit{Ops: []store.Op{store.OpFunc(func(ctx context.Context, tx store.Tx) error {
					_, err := tx.Exec(ctx, `DELETE FROM audit WHERE session = 'a' AND `+cut.where)
					return err
				})}})
				v, err := store.Verify(ctx, s, "a")
				if err != nil || v.FirstBad == nil || v.FirstBad.Seq != cut.seq || !strings.Contains(v.FirstBad.Reason, cut.why) {
					t.Fatalf("a chain cut at %s (%s): %+v %+v %v", cut.name, cut.where, v, v.FirstBad, err)
				}
			})
		}
	})
}
