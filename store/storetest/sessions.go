package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
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
