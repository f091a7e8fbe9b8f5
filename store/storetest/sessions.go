package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store"
)

// runSessions is the suite's part on the sessions: their versions and their owners.
func runSessions(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	t.Run("SessionNotFound", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		if _, err := s.Session(ctx, "nope"); agentplane.ErrorCode(err) != agentplane.CodeNotFound {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("CreateAndUpdate", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		next := sess("a", 2)
		next.Mode = "ddr"
		next.AWC = agentplane.ActiveWorkContext{EntityType: "t", Entity: &agentplane.EntityHeader{ID: "T1", DisplayName: "One"}}
		next.PendingConfirmation = &agentplane.PendingConfirmation{CommandID: "c", ResolvedID: "x", Question: "q?",
			ExpiresAt: time.Date(2026, 11, 25, 12, 5, 0, 0, time.UTC)}
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: next, Record: rec("a")})
		got, err := s.Session(ctx, "a")
		if err != nil || got.Version != 2 || got.Mode != "ddr" || got.AWC.Entity.ID != "T1" || got.PendingConfirmation.ResolvedID != "x" ||
			!got.PendingConfirmation.ExpiresAt.Equal(next.PendingConfirmation.ExpiresAt) {
			t.Fatalf("got %+v, %v", got, err)
		}
		got.Mode = "changed" // a copy
		if again, _ := s.Session(ctx, "a"); again.Mode != "ddr" {
			t.Fatal("Session returned the stored value, not a copy")
		}
	})

	t.Run("VersionConflictAppliesNothing", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		for _, v := range []int64{1, 3} {
			k := key("a", fmt.Sprint("r", v))
			err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: sess("a", v), Record: rec("a"), Request: done(k, "x"),
				Issue: &store.Confirmation{Digest: fmt.Sprint("t", v), SessionID: "a"}})
			if agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
				t.Fatalf("version %d: err = %v", v, err)
			}
			if _, ok, _ := s.Request(ctx, k); ok {
				t.Fatal("a failed commit stored its request")
			}
			if _, ok, _ := s.Confirmation(ctx, fmt.Sprint("t", v)); ok {
				t.Fatal("a failed commit stored its token")
			}
		}
		if recs, _ := s.Records(ctx, "a", 0); len(recs) != 1 {
			t.Fatalf("a failed commit appended a record: %d records", len(recs))
		}
		if err := s.Commit(ctx, &store.Commit{SessionID: "b", Session: sess("b", 2)}); agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
			t.Fatalf("a new session must start at version 1: %v", err)
		}
	})

	t.Run("RecordAloneHoldsTheStateAsStored", func(t *testing.T) {
		t.Parallel()
		// A record that changes nothing holds the session as it is when the
		// commit applies: the caller's state while the session is still at
		// its version, the stored one when another commit moved it on, and
		// the caller's for a session with no row.
		s := open(t)
		first := sess("a", 1)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: first, Record: rec("a")})
		read := func() *agentplane.Session {
			t.Helper()
			cur, err := s.Session(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			return cur
		}
		n := 0
		alone := func(id string, state *agentplane.Session) *agentplane.Session {
			t.Helper()
			r := rec(id)
			r.State = state
			n++
			c := &store.Commit{SessionID: id, Record: r, Request: done(key(id, fmt.Sprint("r", n)), "x")}
			mustCommit(t, s, c)
			recs, err := s.Records(ctx, id, 0)
			if err != nil || len(recs) == 0 || audit.Verify(recs) != nil {
				t.Fatalf("%d records: %v", len(recs), err)
			}
			last := recs[len(recs)-1]
			if last.Seq != c.Record.Seq || last.Hash != c.Record.Hash || string(last.Raw) != string(c.Record.Raw) {
				t.Fatalf("the caller saw record %d %s, the chain holds %d %s", c.Record.Seq, c.Record.Hash, last.Seq, last.Hash)
			}
			if q, ok, err := s.Request(ctx, c.Request.Key); err != nil || !ok || q.Seq != last.Seq || q.Result == nil || q.Result.Message != "x" {
				t.Fatalf("request %+v %v %v, record %d", q, ok, err, last.Seq)
			}
			return last.State
		}
		if got := alone("a", read()); got == nil || got.Version != 1 || got.Mode != "general" {
			t.Fatalf("at the version read: %+v", got)
		}
		stale := read()
		next := sess("a", 2)
		next.Mode = "ddr"
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: next}) // moves the version, not the chain
		if got := alone("a", stale); got == nil || got.Version != 2 || got.Mode != "ddr" {
			t.Fatalf("after the session moved on: %+v", got)
		}
		if got := alone("a", read()); got == nil || got.Version != 2 || got.Mode != "ddr" {
			t.Fatalf("at the version read again: %+v", got)
		}
		mustCommit(t, s, &store.Commit{SessionID: "n", Record: rec("n")})
		if got := alone("n", sess("n", 4)); got == nil || got.Version != 4 {
			t.Fatalf("a session with no row: %+v", got)
		}
	})

	t.Run("SessionsByOwner", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		for i := range 7 {
			owner := "alice"
			if i%3 == 2 {
				owner = "bob"
			}
			id := fmt.Sprintf("s%d", i)
			r := rec(id)
			r.Time = t0.Add(time.Duration(i/2) * time.Second) // pairs share a creation time: the id orders them
			v := sess(id, 1)
			v.Owner = owner
			mustCommit(t, s, &store.Commit{SessionID: id, Session: v, Record: r})
		}
		var got []string
		q := store.SessionQuery{Owner: "alice", Limit: 2}
		for pages := 0; ; pages++ {
			page, err := s.Sessions(ctx, q)
			if err != nil || pages > 5 || len(page.Sessions) > 2 {
				t.Fatalf("page %d: %+v %v", pages, page, err)
			}
			for _, info := range page.Sessions {
				if info.Session.Owner != "alice" || info.Created.IsZero() {
					t.Fatalf("%+v", info)
				}
				got = append(got, info.Session.ID)
			}
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
		if want := []string{"s6", "s4", "s3", "s1", "s0"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("alice's sessions %v, want %v", got, want)
		}
		if page, err := s.Sessions(ctx, store.SessionQuery{Owner: "carol"}); err != nil || len(page.Sessions) != 0 || page.Next != "" {
			t.Fatalf("carol: %+v %v", page, err)
		}
		for _, bad := range []string{"x", "1.", "a.b", ".s1"} {
			if _, err := s.Sessions(ctx, store.SessionQuery{Owner: "alice", Cursor: bad}); agentplane.ErrorCode(err) != agentplane.CodeInvalidInput {
				t.Fatalf("cursor %q: %v", bad, err)
			}
		}
	})
}
