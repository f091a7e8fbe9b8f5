package memstore_test

import (
	"sync"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"

	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/memstore"
	"github.com/agentplane/agentplane/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(*testing.T) store.Store { return memstore.New() })
}

// TestSealedOnTheStateItRecords commits, at once on one session, records
// that snapshot the session's state and session writes without a record:
// a record is sealed outside the store's lock, and must carry the state in
// force where it lands in the chain (state versions never go back along
// the chain: the writer's own record after each write holds the new
// version), and the chain must verify.
func TestSealedOnTheStateItRecords(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	sess := func(v int64) *agentplane.Session { return &agentplane.Session{ID: "a", Mode: "general", Version: v} }
	rec := func() *audit.Record { return &audit.Record{Kind: audit.KindExecution, Session: "a", State: sess(0)} }
	if err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: sess(1), Record: rec()}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				if err := s.Commit(ctx, &store.Commit{SessionID: "a", Record: rec()}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			cur, err := s.Session(ctx, "a")
			if err != nil {
				t.Error(err)
				return
			}
			next := cur.Clone()
			next.Version++
			if err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: next}); err != nil {
				t.Error(err)
				return
			}
			// lands after the write: any record after it holds next or later
			if err := s.Commit(ctx, &store.Commit{SessionID: "a", Record: rec()}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	recs, err := s.Records(ctx, "a", 0)
	if err != nil || len(recs) != 1+16*50+200 {
		t.Fatalf("%d records: %v", len(recs), err)
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].State.Version < recs[i-1].State.Version {
			t.Fatalf("record %d holds version %d after record %d's %d", recs[i].Seq, recs[i].State.Version, recs[i-1].Seq, recs[i-1].State.Version)
		}
	}
	if last := recs[len(recs)-1].State.Version; last > 201 {
		t.Fatalf("the last record holds version %d, past the session's 201", last)
	}
}
