// Package storetest is the conformance suite every store runs unchanged:
// storetest.Run(t, open) from the memstore, sqlite and postgres packages.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
)

// Store is what a store implements: the gate's Store and the audit log's
// reading side.
type Store interface {
	gate.Store
	Records(ctx context.Context, session string) ([]audit.Record, error)
}

// Run runs the suite. open returns a new, empty store for each subtest.
func Run(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	sess := func(id string, v int64) *agentplane.Session {
		return &agentplane.Session{ID: id, Mode: "general", Version: v}
	}
	rec := func(id string) *audit.Record {
		return &audit.Record{Session: id, Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Kind: audit.KindExecution}
	}

	t.Run("SessionNotFound", func(t *testing.T) {
		s := open(t)
		if _, err := s.Session(ctx, "nope"); agentplane.ErrorCode(err) != agentplane.CodeNotFound {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("CreateAndUpdate", func(t *testing.T) {
		s := open(t)
		if err := s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")}); err != nil {
			t.Fatal(err)
		}
		next := sess("a", 2)
		next.Mode = "ddr"
		next.AWC = agentplane.ActiveWorkContext{EntityType: "t", Entity: &agentplane.EntityHeader{ID: "T1", DisplayName: "One"}}
		next.PendingConfirmation = &agentplane.PendingConfirmation{CommandID: "c", ResolvedID: "x", Question: "q?", Token: "tok",
			ExpiresAt: time.Date(2026, 11, 25, 12, 5, 0, 0, time.UTC)}
		if err := s.Commit(ctx, &gate.Commit{SessionID: "a", Session: next, Record: rec("a")}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Session(ctx, "a")
		if err != nil || got.Version != 2 || got.Mode != "ddr" || got.AWC.Entity.ID != "T1" || got.PendingConfirmation.Token != "tok" ||
			!got.PendingConfirmation.ExpiresAt.Equal(next.PendingConfirmation.ExpiresAt) {
			t.Fatalf("got %+v, %v", got, err)
		}
		got.Mode = "changed" // a copy
		if again, _ := s.Session(ctx, "a"); again.Mode != "ddr" {
			t.Fatal("Session returned the stored value, not a copy")
		}
	})

	t.Run("VersionConflictAppliesNothing", func(t *testing.T) {
		s := open(t)
		s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		for _, v := range []int64{1, 3} {
			bad := sess("a", v)
			err := s.Commit(ctx, &gate.Commit{SessionID: "a", Session: bad, Record: rec("a"),
				RequestID: fmt.Sprint("r", v), Result: &agentplane.ExecutionResult{Status: agentplane.StatusSuccess},
				Issue: &gate.Confirmation{Token: fmt.Sprint("t", v), SessionID: "a"}})
			if agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
				t.Fatalf("version %d: err = %v", v, err)
			}
			if _, ok, _ := s.Result(ctx, fmt.Sprint("r", v)); ok {
				t.Fatal("a failed commit stored its result")
			}
			if _, ok, _ := s.Confirmation(ctx, fmt.Sprint("t", v)); ok {
				t.Fatal("a failed commit stored its token")
			}
		}
		if recs, _ := s.Records(ctx, "a"); len(recs) != 1 {
			t.Fatalf("a failed commit appended a record: %d records", len(recs))
		}
		if err := s.Commit(ctx, &gate.Commit{SessionID: "b", Session: sess("b", 2)}); agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
			t.Fatalf("a new session must start at version 1: %v", err)
		}
	})

	t.Run("AuditChain", func(t *testing.T) {
		s := open(t)
		s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		for i := 0; i < 4; i++ {
			r := rec("a")
			if err := s.Commit(ctx, &gate.Commit{SessionID: "a", Record: r}); err != nil {
				t.Fatal(err)
			}
			if r.Seq != int64(i+2) || r.Hash == "" {
				t.Fatalf("the caller's record was not sealed: %+v", r)
			}
		}
		s.Commit(ctx, &gate.Commit{SessionID: "b", Session: sess("b", 1), Record: rec("b")})
		recs, err := s.Records(ctx, "a")
		if err != nil || len(recs) != 5 {
			t.Fatalf("%d records, %v", len(recs), err)
		}
		if err := audit.Verify(recs); err != nil {
			t.Fatal(err)
		}
		if other, _ := s.Records(ctx, "b"); len(other) != 1 || other[0].Seq != 1 {
			t.Fatalf("chains are per session: %+v", other)
		}
	})

	t.Run("RecordOnlyCommitRecordsTheCurrentState", func(t *testing.T) {
		s := open(t)
		s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		stale, _ := s.Session(ctx, "a")
		s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 2), Record: rec("a")}) // another writer
		r := rec("a")
		r.State = stale
		if err := s.Commit(ctx, &gate.Commit{SessionID: "a", Record: r}); err != nil {
			t.Fatal(err)
		}
		recs, _ := s.Records(ctx, "a")
		if got := recs[len(recs)-1].State; got == nil || got.Version != 2 {
			t.Fatalf("the record kept a stale state: %+v", got)
		}
		if err := audit.Verify(recs); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ResultsFirstWins", func(t *testing.T) {
		s := open(t)
		s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 1)})
		s.Commit(ctx, &gate.Commit{SessionID: "a", RequestID: "r", Result: &agentplane.ExecutionResult{Status: agentplane.StatusSuccess, Message: "first"}})
		s.Commit(ctx, &gate.Commit{SessionID: "a", RequestID: "r", Result: &agentplane.ExecutionResult{Status: agentplane.StatusFailed, Message: "second"}})
		r, ok, err := s.Result(ctx, "r")
		if err != nil || !ok || r.Message != "first" {
			t.Fatalf("%+v %v %v", r, ok, err)
		}
		if _, ok, _ := s.Result(ctx, "other"); ok {
			t.Fatal("unknown request id found")
		}
	})

	t.Run("Confirmations", func(t *testing.T) {
		s := open(t)
		s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 1)})
		c := gate.Confirmation{Token: "tok", SessionID: "a", Action: "send", Binding: "LIST-9", Version: 1,
			ExpiresAt: time.Date(2026, 11, 25, 12, 5, 0, 0, time.UTC)}
		if err := s.Commit(ctx, &gate.Commit{SessionID: "a", Issue: &c}); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.Confirmation(ctx, "tok")
		if err != nil || !ok || got.Used || got.Binding != "LIST-9" || !got.ExpiresAt.Equal(c.ExpiresAt) {
			t.Fatalf("%+v %v %v", got, ok, err)
		}
		if err := s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 2), Use: "tok"}); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := s.Confirmation(ctx, "tok"); !got.Used {
			t.Fatal("not marked used")
		}
		err = s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 3), Use: "tok"})
		if agentplane.ErrorCode(err) != agentplane.CodeConfirmationInvalid {
			t.Fatalf("reuse: %v", err)
		}
		if cur, _ := s.Session(ctx, "a"); cur.Version != 2 {
			t.Fatal("a commit with a used token applied its session")
		}
		if err := s.Commit(ctx, &gate.Commit{SessionID: "a", Use: "never-issued"}); agentplane.ErrorCode(err) != agentplane.CodeConfirmationInvalid {
			t.Fatalf("unknown token: %v", err)
		}
	})

	t.Run("ConcurrentUpdatesLoseNothing", func(t *testing.T) {
		s := open(t)
		s.Commit(ctx, &gate.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					cur, err := s.Session(ctx, "a")
					if err != nil {
						t.Error(err)
						return
					}
					next := cur.Clone()
					next.Version++
					err = s.Commit(ctx, &gate.Commit{SessionID: "a", Session: next, Record: rec("a")})
					switch agentplane.ErrorCode(err) {
					case "":
						mu.Lock()
						wins++
						mu.Unlock()
					case agentplane.CodeVersionConflict:
					default:
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		cur, _ := s.Session(ctx, "a")
		recs, _ := s.Records(ctx, "a")
		if cur.Version != int64(1+wins) || len(recs) != 1+wins || audit.Verify(recs) != nil {
			t.Fatalf("version %d, %d wins, %d records", cur.Version, wins, len(recs))
		}
	})

	t.Run("FailedCommitAmongConcurrentOnesAppliesNothing", func(t *testing.T) {
		// A commit that uses a token and then fails its version check has
		// already spent the token when the check fails: it must be undone
		// alone while the commits grouped with it apply.
		s := open(t)
		const others = 16
		for round := 0; round < 5; round++ {
			tok := fmt.Sprintf("tok-%d", round)
			bad := fmt.Sprintf("bad-%d", round)
			if err := s.Commit(ctx, &gate.Commit{SessionID: bad, Session: sess(bad, 1), Record: rec(bad),
				Issue: &gate.Confirmation{Token: tok, SessionID: bad, Version: 1}}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, others+1)
			for g := 0; g <= others; g++ {
				wg.Go(func() {
					if g == others {
						errs[g] = s.Commit(ctx, &gate.Commit{SessionID: bad, Session: sess(bad, 5), Record: rec(bad), Use: tok})
						return
					}
					id := fmt.Sprintf("ok-%d-%d", round, g)
					errs[g] = s.Commit(ctx, &gate.Commit{SessionID: id, Session: sess(id, 1), Record: rec(id)})
				})
			}
			wg.Wait()
			if agentplane.ErrorCode(errs[others]) != agentplane.CodeVersionConflict {
				t.Fatalf("the bad commit: %v", errs[others])
			}
			if c, ok, err := s.Confirmation(ctx, tok); err != nil || !ok || c.Used {
				t.Fatalf("the failed commit spent the token: %+v %v %v", c, ok, err)
			}
			if recs, _ := s.Records(ctx, bad); len(recs) != 1 {
				t.Fatalf("the failed commit left %d records", len(recs))
			}
			for g := 0; g < others; g++ {
				id := fmt.Sprintf("ok-%d-%d", round, g)
				recs, _ := s.Records(ctx, id)
				if errs[g] != nil || len(recs) != 1 || audit.Verify(recs) != nil {
					t.Fatalf("commit %s: %v, %d records", id, errs[g], len(recs))
				}
			}
		}
	})
}

// TwoStoresOnOneChain commits to one session's chain alternately through
// two stores on one database, as two processes or instances would: each
// store's cached chain head goes stale, and the chain must still verify
// with no gap.
func TwoStoresOnOneChain(t *testing.T, a, b Store) {
	ctx := context.Background()
	stores := [2]Store{a, b}
	for v := int64(1); v <= 8; v++ {
		s := stores[v%2]
		if v%3 == 0 {
			s = stores[(v+1)%2] // sometimes the same store twice in a row
		}
		c := &gate.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Mode: "general", Version: v},
			Record: &audit.Record{Session: "a", Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Kind: audit.KindExecution}}
		if err := s.Commit(ctx, c); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if c.Record.Seq != v {
			t.Fatalf("version %d sealed as seq %d", v, c.Record.Seq)
		}
	}
	recs, err := a.Records(ctx, "a")
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
