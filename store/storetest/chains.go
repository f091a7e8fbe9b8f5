package storetest

import (
	"context"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store"
)

// runChains is the suite's part on the audit chains and their heads.
func runChains(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	t.Run("AuditChain", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		for i := 0; i < 4; i++ {
			r := rec("a")
			mustCommit(t, s, &store.Commit{SessionID: "a", Record: r})
			if r.Seq != int64(i+2) || r.Hash == "" || r.V != audit.Version || len(r.Raw) == 0 {
				t.Fatalf("the caller's record was not sealed: %+v", r)
			}
		}
		mustCommit(t, s, &store.Commit{SessionID: "b", Session: sess("b", 1), Record: rec("b")})
		recs, err := s.Records(ctx, "a", 0)
		if err != nil || len(recs) != 5 {
			t.Fatalf("%d records, %v", len(recs), err)
		}
		if err := audit.Verify(recs); err != nil {
			t.Fatal(err)
		}
		if other, _ := s.Records(ctx, "b", 0); len(other) != 1 || other[0].Seq != 1 {
			t.Fatalf("chains are per session: %+v", other)
		}
		tail, err := s.Records(ctx, "a", 3)
		if err != nil || len(tail) != 2 || tail[0].Seq != 4 || tail[0].Hash != recs[3].Hash {
			t.Fatalf("records after 3: %d, %v", len(tail), err)
		}
		if none, _ := s.Records(ctx, "a", 5); len(none) != 0 {
			t.Fatalf("records after the last: %d", len(none))
		}
		// pages read from the end
		for _, c := range []struct {
			before   int64
			limit    int
			first, n int64
		}{{0, 2, 4, 2}, {0, 9, 1, 5}, {4, 2, 2, 2}, {2, 5, 1, 1}, {1, 3, 0, 0}, {99, 1, 5, 1}, {0, 0, 5, 1}} {
			page, err := s.RecordsBefore(ctx, "a", c.before, c.limit)
			if err != nil || int64(len(page)) != c.n || c.n > 0 && (page[0].Seq != c.first || page[len(page)-1].Seq != c.first+c.n-1 ||
				page[0].Hash != recs[c.first-1].Hash) {
				t.Fatalf("records before %d, limit %d: %d (%v), want %d from %d", c.before, c.limit, len(page), err, c.n, c.first)
			}
		}
		if page, err := s.RecordsBefore(ctx, "nobody", 0, 5); err != nil || len(page) != 0 {
			t.Fatalf("a session with no chain: %d, %v", len(page), err)
		}
		for _, c := range []struct {
			after    int64
			limit    int
			first, n int64
		}{{0, 2, 1, 2}, {0, 9, 1, 5}, {3, 9, 4, 2}, {4, 1, 5, 1}, {5, 3, 0, 0}, {99, 1, 0, 0}, {2, 0, 3, 1}, {-1, 2, 1, 2}} {
			page, err := s.RecordsAfter(ctx, "a", c.after, c.limit)
			if err != nil || int64(len(page)) != c.n || c.n > 0 && (page[0].Seq != c.first || page[len(page)-1].Seq != c.first+c.n-1 ||
				page[0].Hash != recs[c.first-1].Hash) {
				t.Fatalf("records after %d, limit %d: %d (%v), want %d from %d", c.after, c.limit, len(page), err, c.n, c.first)
			}
		}
		if page, err := s.RecordsAfter(ctx, "nobody", 0, 5); err != nil || len(page) != 0 {
			t.Fatalf("a session with no chain: %d, %v", len(page), err)
		}
	})

	t.Run("RecordOnlyCommitRecordsTheCurrentState", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		stale, _ := s.Session(ctx, "a")
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 2), Record: rec("a")}) // another writer
		r := rec("a")
		r.State = stale
		mustCommit(t, s, &store.Commit{SessionID: "a", Record: r})
		recs, _ := s.Records(ctx, "a", 0)
		if got := recs[len(recs)-1].State; got == nil || got.Version != 2 {
			t.Fatalf("the record kept a stale state: %+v", got)
		}
		if err := audit.Verify(recs); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("HeadsFollowTheChain", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		if _, err := s.Head(ctx, "a"); agentplane.ErrorCode(err) != agentplane.CodeNotFound {
			t.Fatalf("the head of no session: %v", err)
		}
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1)})
		if h, err := s.Head(ctx, "a"); err != nil || h != (store.Head{}) {
			t.Fatalf("the head of a session without records: %+v %v", h, err)
		}
		var last *audit.Record
		for i := range 5 {
			c := &store.Commit{SessionID: "a", Record: rec("a")}
			if i%2 == 0 {
				c.Session = sess("a", int64(2+i/2)) // with and without a state change
			}
			mustCommit(t, s, c)
			last = c.Record
		}
		h, err := s.Head(ctx, "a")
		if err != nil || h.Seq != 5 || h.Hash != last.Hash {
			t.Fatalf("head %+v %v, want seq 5 hash %s", h, err, last.Hash)
		}
		v, err := store.Verify(ctx, s, "a")
		if err != nil || v.FirstBad != nil || v.Records != 5 || v.LastSeq != 5 || v.Head != h {
			t.Fatalf("verify: %+v %v", v, err)
		}
	})
}

// HeadsOfAnOlderDatabase checks the migration that gave sessions their
// chain heads: a database from before it (downgrade takes a store's
// database back there: the head columns dropped, the version forgotten),
// opened again, has every session's head where its chain ends, and its
// chains verify whole.
func HeadsOfAnOlderDatabase(t *testing.T, open func(t *testing.T) store.Store, downgrade func(t *testing.T)) {
	ctx := context.Background()
	s := open(t)
	heads := map[string]store.Head{}
	for _, id := range []string{"a", "b", "c"} {
		mustCommit(t, s, &store.Commit{SessionID: id, Session: sess(id, 1)})
		n := map[string]int{"a": 5, "b": 1, "c": 0}[id]
		for i := range n {
			c := &store.Commit{SessionID: id, Record: rec(id)}
			if i%2 == 1 {
				c.Session = sess(id, int64(2+i/2))
			}
			mustCommit(t, s, c)
			heads[id] = store.Head{Seq: c.Record.Seq, Hash: c.Record.Hash}
		}
	}
	s.Close()
	downgrade(t)
	s = open(t)
	defer s.Close()
	for _, id := range []string{"a", "b", "c"} {
		h, err := s.Head(ctx, id)
		if err != nil || h != heads[id] {
			t.Fatalf("session %s: head %+v %v after the migration, want %+v", id, h, err, heads[id])
		}
		if v, err := store.Verify(ctx, s, id); err != nil || v.FirstBad != nil {
			t.Fatalf("session %s: %+v %v", id, v.FirstBad, err)
		}
	}
}
