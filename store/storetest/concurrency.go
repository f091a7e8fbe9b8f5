package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store"
)

// runConcurrency is the suite's part on concurrent commits: no deadlock, nothing lost, a failure applies nothing.
func runConcurrency(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	t.Run("ConcurrentRecordsOnOneSessionDoNotDeadlock", func(t *testing.T) {
		t.Parallel()
		// Records that snapshot the session's state, committed at once on
		// one session whose chain head the store does not know (a failed
		// commit forgot it): each commit locks the session and reads the
		// head. (On PostgreSQL the head was read through a second pooled
		// connection while the first held the lock: 32 such commits took
		// every connection and waited for ever.)
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		if err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: sess("a", 9), Record: rec("a")}); agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
			t.Fatalf("a stale version: %v", err)
		}
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				r := rec("a")
				r.State = sess("a", 1)
				if err := s.Commit(tctx, &store.Commit{SessionID: "a", Record: r}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if recs, err := s.Records(ctx, "a", 0); err != nil || len(recs) != 33 || audit.Verify(recs) != nil {
			t.Fatalf("%d records: %v", len(recs), err)
		}
	})

	t.Run("ConcurrentUpdatesLoseNothing", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for g := 0; g < 8; g++ {
			wg.Go(func() {
				for i := 0; i < 25; i++ {
					cur, err := s.Session(ctx, "a")
					if err != nil {
						t.Error(err)
						return
					}
					next := cur.Clone()
					next.Version++
					err = s.Commit(ctx, &store.Commit{SessionID: "a", Session: next, Record: rec("a")})
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
			})
		}
		wg.Wait()
		cur, _ := s.Session(ctx, "a")
		recs, _ := s.Records(ctx, "a", 0)
		if cur.Version != int64(1+wins) || len(recs) != 1+wins || audit.Verify(recs) != nil {
			t.Fatalf("version %d, %d wins, %d records", cur.Version, wins, len(recs))
		}
	})

	t.Run("FailedCommitAmongConcurrentOnesAppliesNothing", func(t *testing.T) {
		t.Parallel()
		// A commit that stores its request and then fails its version check
		// has already written the request when the check fails: it must be
		// undone alone while the commits grouped with it apply.
		s := open(t)
		const others = 16
		for round := 0; round < 5; round++ {
			tok := fmt.Sprintf("tok-%d", round)
			bad := fmt.Sprintf("bad-%d", round)
			mustCommit(t, s, &store.Commit{SessionID: bad, Session: sess(bad, 1), Record: rec(bad),
				Issue: &store.Confirmation{Digest: tok, SessionID: bad, Version: 1}})
			var wg sync.WaitGroup
			errs := make([]error, others+1)
			for g := 0; g <= others; g++ {
				wg.Go(func() {
					if g == others {
						errs[g] = s.Commit(ctx, &store.Commit{SessionID: bad, Session: sess(bad, 5), Record: rec(bad),
							Issue: &store.Confirmation{Digest: tok + "-2", SessionID: bad, Version: 5}, Request: done(key(bad, "r"), "x")})
						return
					}
					id := fmt.Sprintf("ok-%d-%d", round, g)
					errs[g] = s.Commit(ctx, &store.Commit{SessionID: id, Session: sess(id, 1), Record: rec(id)})
				})
			}
			wg.Wait()
			if agentplane.ErrorCode(errs[others]) != agentplane.CodeVersionConflict {
				t.Fatalf("the bad commit: %v", errs[others])
			}
			if c, ok, err := s.Confirmation(ctx, tok+"-2"); err != nil || ok {
				t.Fatalf("the failed commit issued its token: %+v %v %v", c, ok, err)
			}
			if _, ok, _ := s.Request(ctx, key(bad, "r")); ok {
				t.Fatal("the failed commit stored its request")
			}
			if recs, _ := s.Records(ctx, bad, 0); len(recs) != 1 {
				t.Fatalf("the failed commit left %d records", len(recs))
			}
			for g := 0; g < others; g++ {
				id := fmt.Sprintf("ok-%d-%d", round, g)
				recs, _ := s.Records(ctx, id, 0)
				if errs[g] != nil || len(recs) != 1 || audit.Verify(recs) != nil {
					t.Fatalf("commit %s: %v, %d records", id, errs[g], len(recs))
				}
			}
		}
	})

	t.Run("MixedCommitsKeepTheChainAndItsHead", func(t *testing.T) {
		t.Parallel()
		// Commits that change the session (retried on version conflicts,
		// each finishing a request) and commits of a record alone, some
		// snapshotting the state, at once on one session: the chain
		// verifies and ends at the session's head. (A commit resealed
		// after a stale cached head read the head it had just written
		// itself, and chained its record to a hash no record had.)
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 30 {
					if (g+i)%2 == 1 {
						r := rec("a")
						if i%3 == 0 {
							r.State = sess("a", 0)
						}
						// a chain moving under a record alone may be a version
						// conflict too (PostgreSQL retries a few times first)
						for {
							err := s.Commit(ctx, &store.Commit{SessionID: "a", Record: r})
							if err == nil {
								break
							}
							if agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
								t.Error(err)
								break
							}
						}
						continue
					}
					if err := nextVersion(ctx, s, func(next *agentplane.Session) *store.Commit {
						return &store.Commit{SessionID: "a", Session: next, Record: rec("a"), Request: done(key("a", fmt.Sprint(g, "-", i)), "ran")}
					}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		// and session writes without a record, which move the version
		// and not the chain: a record snapshotting the state is sealed on
		// the state where it lands (the memory store seals outside its
		// lock, and seals again when the session moved meanwhile)
		wg.Go(func() {
			for range 30 {
				if err := nextVersion(ctx, s, func(next *agentplane.Session) *store.Commit {
					return &store.Commit{SessionID: "a", Session: next}
				}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Wait()
		v, err := store.Verify(ctx, s, "a")
		if err != nil || v.FirstBad != nil || v.Records != 1+8*30 {
			t.Fatalf("%d records: %+v %v", v.Records, v.FirstBad, err)
		}
		recs, err := s.Records(ctx, "a", 0)
		if err != nil {
			t.Fatal(err)
		}
		var last int64
		for _, r := range recs {
			if r.State == nil {
				continue
			}
			if r.State.Version < last {
				t.Fatalf("record %d holds the state at version %d after a record that held %d", r.Seq, r.State.Version, last)
			}
			last = r.State.Version
		}
	})

}

// nextVersion commits session "a" at its next version, reading it again
// after each version conflict; other errors are returned.
func nextVersion(ctx context.Context, s store.Store, commit func(next *agentplane.Session) *store.Commit) error {
	for {
		cur, err := s.Session(ctx, "a")
		if err != nil {
			return err
		}
		next := cur.Clone()
		next.Version++
		err = s.Commit(ctx, commit(next))
		if agentplane.ErrorCode(err) != agentplane.CodeVersionConflict {
			return err
		}
	}
}
