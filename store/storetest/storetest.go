// Package storetest is the conformance suite every store runs unchanged:
// storetest.Run(t, open) from the memstore, sqlite and postgres packages,
// and storetest.RunSQL for the stores that take subsystems' tables.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func sess(id string, v int64) *agentplane.Session {
	return &agentplane.Session{ID: id, Mode: "general", Version: v}
}

func rec(id string) *audit.Record {
	return &audit.Record{Session: id, Time: t0, Kind: audit.KindExecution}
}

func key(session, id string) store.RequestKey {
	return store.RequestKey{SessionID: session, Principal: "p", RequestID: id}
}

func done(k store.RequestKey, msg string) *store.Request {
	return &store.Request{Key: k, Digest: "d", ClaimedAt: t0, Result: &agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: msg}}
}

// Run runs the suite, one subtest per area (sessions, chains, requests,
// confirmations, concurrency, configurations, catalog versions), every
// area and every case in parallel with the others: each case opens a
// store of its own. open returns a new, empty store for each case and is
// called from several goroutines at once; the test closes the store.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	areas(t, open, []area[func(t *testing.T) store.Store]{
		{"Sessions", runSessions},
		{"Chains", runChains},
		{"Requests", runRequests},
		{"Confirmations", runConfirmations},
		{"Concurrency", runConcurrency},
		{"Configs", runConfigs},
		{"CatalogVersions", runCatalogVersions},
	})
}

// area is one part of a suite: its cases, run by run.
type area[O any] struct {
	name string
	run  func(t *testing.T, open O)
}

// areas runs each area as a parallel subtest.
func areas[O any](t *testing.T, open O, as []area[O]) {
	for _, a := range as {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			a.run(t, open)
		})
	}
}

// TwoStoresOnOneChain commits to one session's chain alternately through
// two stores on one database, as two processes or instances would: each
// store's cached chain head goes stale, and the chain must still verify
// with no gap.
func TwoStoresOnOneChain(t *testing.T, a, b store.Store) {
	ctx := context.Background()
	stores := [2]store.Store{a, b}
	for v := int64(1); v <= 8; v++ {
		s := stores[v%2]
		if v%3 == 0 {
			s = stores[(v+1)%2] // sometimes the same store twice in a row
		}
		c := &store.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Mode: "general", Version: v}, Record: rec("a")}
		if err := s.Commit(ctx, c); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if c.Record.Seq != v {
			t.Fatalf("version %d sealed as seq %d", v, c.Record.Seq)
		}
	}
	recs, err := a.Records(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 8 {
		t.Fatalf("%d records", len(recs))
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
}

func mustCommit(t *testing.T, s store.Store, c *store.Commit) {
	t.Helper()
	if err := s.Commit(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// RecordAlone commits a record alone (no new session state: a workflow
// task's, a confirmation question's) twice — holding the session's state
// at the version the caller read, then after another commit moved the
// session on — and fails t unless the first record holds the caller's
// state, the second the newer one, and the chain verifies. It returns
// what each commit cost by the store's counters, for the store's own
// test to hold to its figures.
func RecordAlone(t *testing.T, s interface {
	store.Store
	store.Counted
}) (atVersion, afterMove store.Stats) {
	t.Helper()
	ctx := context.Background()
	first := &agentplane.Session{ID: "a", Mode: "general", Version: 1}
	if err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: first, Record: &audit.Record{Session: "a", Kind: audit.KindOpen, State: first}}); err != nil {
		t.Fatal(err)
	}
	alone := func(state *agentplane.Session) (store.Stats, *agentplane.Session) {
		t.Helper()
		before := s.Stats()
		c := &store.Commit{SessionID: "a", Record: &audit.Record{Session: "a", Kind: audit.KindExecution, State: state}}
		if err := s.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
		after := s.Stats()
		return store.Stats{Statements: after.Statements - before.Statements, Transactions: after.Transactions - before.Transactions,
			RoundTrips: after.RoundTrips - before.RoundTrips}, c.Record.State
	}
	atVersion, got := alone(first)
	if got.Version != 1 || got.Mode != "general" {
		t.Fatalf("a record alone at the version read holds %+v", got)
	}
	if err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Mode: "ddr", Version: 2}}); err != nil {
		t.Fatal(err)
	}
	afterMove, got = alone(first)
	if got.Version != 2 || got.Mode != "ddr" {
		t.Fatalf("a record alone after the session moved on holds %+v, want the state at version 2", got)
	}
	recs, err := s.Records(ctx, "a", 0)
	if err != nil || len(recs) != 3 || audit.Verify(recs) != nil {
		t.Fatalf("%d records: %v", len(recs), err)
	}
	return atVersion, afterMove
}
