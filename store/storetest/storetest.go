// Package storetest is the conformance suite every store runs unchanged:
// storetest.Run(t, open) from the memstore, sqlite and postgres packages,
// and storetest.RunSQL for the stores that take subsystems' tables.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// Run runs the suite. open returns a new, empty store for each subtest;
// the test closes it.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()

	t.Run("SessionNotFound", func(t *testing.T) {
		s := open(t)
		if _, err := s.Session(ctx, "nope"); agentplane.ErrorCode(err) != agentplane.CodeNotFound {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("CreateAndUpdate", func(t *testing.T) {
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

	t.Run("AuditChain", func(t *testing.T) {
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

	t.Run("Requests", func(t *testing.T) {
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1)})
		k := key("a", "r")
		mustCommit(t, s, &store.Commit{SessionID: "a", Request: done(k, "first")})
		err := s.Commit(ctx, &store.Commit{SessionID: "a", Session: sess("a", 2), Record: rec("a"), Request: done(k, "second")})
		if !errors.Is(err, store.ErrRequestDone) {
			t.Fatalf("a finished key: %v", err)
		}
		if cur, _ := s.Session(ctx, "a"); cur.Version != 1 {
			t.Fatal("a commit refused for its request applied its session")
		}
		r, ok, err := s.Request(ctx, k)
		if err != nil || !ok || r.State != store.RequestDone || r.Result == nil || r.Result.Message != "first" || r.Digest != "d" {
			t.Fatalf("%+v %v %v", r, ok, err)
		}
		// keys are per session and per principal
		for _, other := range []store.RequestKey{key("b", "r"), {SessionID: "a", Principal: "q", RequestID: "r"}} {
			if _, ok, _ := s.Request(ctx, other); ok {
				t.Fatalf("%+v found another key's request", other)
			}
			mustCommit(t, s, &store.Commit{SessionID: other.SessionID, Request: done(other, "mine")})
			if r, _, _ := s.Request(ctx, other); r.Result.Message != "mine" {
				t.Fatalf("%+v: %+v", other, r)
			}
		}
	})

	t.Run("RequestsRememberTheirRecord", func(t *testing.T) {
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		ran := key("a", "ran")
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 2), Record: rec("a"), Request: done(ran, "x")})
		// a turn that ran nothing: a record, no result
		routed := key("a", "routed")
		mustCommit(t, s, &store.Commit{SessionID: "a", Record: rec("a"), Request: &store.Request{Key: routed, Digest: "t", ClaimedAt: t0}})
		for k, want := range map[store.RequestKey]int64{ran: 2, routed: 3} {
			r, ok, err := s.Request(ctx, k)
			if err != nil || !ok || r.State != store.RequestDone || r.Seq != want {
				t.Fatalf("%s: %+v %v %v", k.RequestID, r, ok, err)
			}
			if (r.Result != nil) != (k == ran) {
				t.Fatalf("%s: result %+v", k.RequestID, r.Result)
			}
		}
		if err := s.Commit(ctx, &store.Commit{SessionID: "a", Record: rec("a"), Request: &store.Request{Key: routed, Digest: "t", ClaimedAt: t0}}); !errors.Is(err, store.ErrRequestDone) {
			t.Fatalf("a finished turn again: %v", err)
		}
	})

	t.Run("SessionsByOwner", func(t *testing.T) {
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

	t.Run("Claims", func(t *testing.T) {
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1)})
		k := key("a", "r")
		claim := store.Claim{Key: k, Digest: "d", Now: t0, StaleBefore: t0.Add(-time.Minute)}
		if _, ok, err := s.Claim(ctx, claim); err != nil || !ok {
			t.Fatalf("a free key: %v %v", ok, err)
		}
		holder, ok, err := s.Claim(ctx, claim)
		if err != nil || ok || holder.State != store.RequestRunning || holder.Digest != "d" || !holder.ClaimedAt.Equal(t0) {
			t.Fatalf("a running key: %+v %v %v", holder, ok, err)
		}
		late := store.Claim{Key: k, Digest: "d", Now: t0.Add(time.Hour), StaleBefore: t0.Add(time.Minute)}
		if _, ok, _ := s.Claim(ctx, store.Claim{Key: k, Digest: "other", Now: late.Now, StaleBefore: late.StaleBefore}); ok {
			t.Fatal("a stale claim was taken over for another invocation")
		}
		if _, ok, err := s.Claim(ctx, late); err != nil || !ok {
			t.Fatalf("a stale claim: %v %v", ok, err)
		}
		fin := done(k, "ran")
		mustCommit(t, s, &store.Commit{SessionID: "a", Request: fin})
		holder, ok, err = s.Claim(ctx, late)
		if err != nil || ok || holder.State != store.RequestDone || holder.Result.Message != "ran" {
			t.Fatalf("a finished key: %+v %v %v", holder, ok, err)
		}
	})

	t.Run("HeadsFollowTheChain", func(t *testing.T) {
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

	t.Run("StaleClaimsKeepWhatTheyRun", func(t *testing.T) {
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1)})
		what := json.RawMessage(`{"intent":{"action":"send"}}`)
		for i, at := range []time.Time{t0.Add(2 * time.Second), t0, t0.Add(time.Second), t0.Add(time.Hour)} {
			c := store.Claim{Key: key("a", fmt.Sprint("r", i)), Digest: "d", Now: at, StaleBefore: at.Add(-time.Minute), Running: what}
			if _, ok, err := s.Claim(ctx, c); err != nil || !ok {
				t.Fatalf("claim %d: %v %v", i, ok, err)
			}
		}
		mustCommit(t, s, &store.Commit{SessionID: "a", Request: done(key("a", "r1"), "ran")}) // finished: not stale
		got, err := s.Stale(ctx, t0.Add(time.Minute), 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.Key.RequestID)
			if r.State != store.RequestRunning || r.Digest != "d" || r.Key.SessionID != "a" || r.Key.Principal != "p" || string(r.Running) != string(what) {
				t.Errorf("stale request %+v", r)
			}
		}
		if strings.Join(ids, " ") != "r2 r0" {
			t.Fatalf("stale requests, oldest first: %v, want r2 r0", ids)
		}
		if got, _ := s.Stale(ctx, t0.Add(time.Minute), 1); len(got) != 1 || got[0].Key.RequestID != "r2" {
			t.Fatalf("a limit of 1: %+v", got)
		}
		// a takeover that brings nothing keeps what the first claim ran
		late := t0.Add(2 * time.Hour)
		if _, ok, err := s.Claim(ctx, store.Claim{Key: key("a", "r0"), Digest: "d", Now: late, StaleBefore: late.Add(-time.Minute)}); err != nil || !ok {
			t.Fatalf("takeover: %v %v", ok, err)
		}
		if r, _, _ := s.Request(ctx, key("a", "r0")); string(r.Running) != string(what) || !r.ClaimedAt.Equal(late) {
			t.Fatalf("taken over: %+v", r)
		}
		if r, _, _ := s.Request(ctx, key("a", "r1")); r.State != store.RequestDone || r.Running != nil {
			t.Fatalf("a finished request keeps what it ran: %+v", r)
		}
	})

	t.Run("ConcurrentClaimsOneWins", func(t *testing.T) {
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1)})
		var wins sync.Map
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Go(func() {
				_, ok, err := s.Claim(ctx, store.Claim{Key: key("a", "r"), Digest: "d", Now: t0, StaleBefore: t0.Add(-time.Minute)})
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Store(g, true)
				}
			})
		}
		wg.Wait()
		n := 0
		wins.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Fatalf("%d claims won", n)
		}
	})

	t.Run("Confirmations", func(t *testing.T) {
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1)})
		c := store.Confirmation{Digest: "dig", SessionID: "a", Action: "send", Binding: "LIST-9", Version: 1,
			ExpiresAt: time.Date(2026, 11, 25, 12, 5, 0, 0, time.UTC)}
		mustCommit(t, s, &store.Commit{SessionID: "a", Issue: &c})
		got, ok, err := s.Confirmation(ctx, "dig")
		if err != nil || !ok || got.Used || got.Pending || got.Binding != "LIST-9" || !got.ExpiresAt.Equal(c.ExpiresAt) {
			t.Fatalf("%+v %v %v", got, ok, err)
		}
		use := func(r string, u store.Use) error {
			_, ok, err := s.Claim(ctx, store.Claim{Key: key("a", r), Digest: "d", Now: t0, Use: &u})
			if err == nil && !ok {
				t.Fatalf("claim %s: the key is held", r)
			}
			return err
		}
		if err := use("r1", store.Use{Digest: "dig"}); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := s.Confirmation(ctx, "dig"); !got.Used {
			t.Fatal("not marked used")
		}
		if err := use("r2", store.Use{Digest: "dig"}); agentplane.ErrorCode(err) != agentplane.CodeConfirmationInvalid {
			t.Fatalf("reuse: %v", err)
		}
		if _, ok, _ := s.Request(ctx, key("a", "r2")); ok {
			t.Fatal("a claim refused for its used token kept its key")
		}
		if err := use("r3", store.Use{Digest: "never-issued"}); agentplane.ErrorCode(err) != agentplane.CodeConfirmationInvalid {
			t.Fatalf("unknown token: %v", err)
		}
		// The token issued with a pending confirmation is used up by its
		// pending key (the human's yes) or by its digest, once either way.
		p := store.Confirmation{Digest: "pend", SessionID: "a", Action: "send", Binding: "LIST-9", Version: 2, Pending: true}
		mustCommit(t, s, &store.Commit{SessionID: "a", Issue: &p})
		if got, _, _ := s.Confirmation(ctx, "pend"); !got.Pending {
			t.Fatal("pending not kept")
		}
		if err := use("r4", store.Use{SessionID: "a", Version: 1}); agentplane.ErrorCode(err) != agentplane.CodeConfirmationInvalid {
			t.Fatalf("no pending confirmation at version 1: %v", err)
		}
		if err := use("r5", store.Use{SessionID: "a", Version: 2}); err != nil {
			t.Fatal(err)
		}
		if err := use("r6", store.Use{Digest: "pend"}); agentplane.ErrorCode(err) != agentplane.CodeConfirmationInvalid {
			t.Fatalf("the token after the yes: %v", err)
		}
		// A held key is answered with its holder, and the token stays unused.
		q := store.Confirmation{Digest: "third", SessionID: "a", Version: 3}
		mustCommit(t, s, &store.Commit{SessionID: "a", Issue: &q})
		holder, ok, err := s.Claim(ctx, store.Claim{Key: key("a", "r1"), Digest: "d", Now: t0, StaleBefore: t0.Add(-time.Minute), Use: &store.Use{Digest: "third"}})
		if err != nil || ok || holder.State != store.RequestRunning {
			t.Fatalf("a held key: %+v %v %v", holder, ok, err)
		}
		if got, _, _ := s.Confirmation(ctx, "third"); got.Used {
			t.Fatal("a claim that lost its key used its token")
		}
	})

	t.Run("ConcurrentUsesOfAConfirmationOneWins", func(t *testing.T) {
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1),
			Issue: &store.Confirmation{Digest: "tok", SessionID: "a", Version: 1, Pending: true}})
		for _, n := range []int{2, 8, 32} {
			var wins, refused atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < n; g++ {
				wg.Go(func() {
					u := store.Use{Digest: "tok"}
					if g%2 == 1 {
						u = store.Use{SessionID: "a", Version: 1} // the yes
					}
					_, ok, err := s.Claim(ctx, store.Claim{Key: key("a", fmt.Sprintf("%d-%d", n, g)), Digest: "d", Now: t0, Use: &u})
					switch {
					case err == nil && ok:
						wins.Add(1)
					case agentplane.ErrorCode(err) == agentplane.CodeConfirmationInvalid:
						refused.Add(1)
					default:
						t.Errorf("claim %d: %v %v", g, ok, err)
					}
				})
			}
			wg.Wait()
			want := 1
			if n > 2 {
				want = 0 // used up in the first round
			}
			if int(wins.Load()) != want || int(refused.Load()) != n-want {
				t.Fatalf("%d concurrent uses: %d won, %d refused", n, wins.Load(), refused.Load())
			}
		}
	})

	t.Run("ConcurrentRecordsOnOneSessionDoNotDeadlock", func(t *testing.T) {
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

func mustCommit(t *testing.T, s store.Store, c *store.Commit) {
	t.Helper()
	if err := s.Commit(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// RunSQL runs the extension suite: open returns a new, empty store opened
// with the Counters extension.
func RunSQL(t *testing.T, open func(t *testing.T, exts []store.Extension) store.Store) {
	ctx := context.Background()
	counter := func(t *testing.T, s store.Store, name string) (int64, string) {
		t.Helper()
		q, ok := s.(store.Querier)
		if !ok {
			t.Fatalf("%T is not a store.Querier", s)
		}
		var n int64
		var note string
		err := q.Query(ctx, `SELECT n, note FROM counters WHERE name = ?`, []any{name}, func(scan func(...any) error) error { return scan(&n, &note) })
		if err != nil {
			t.Fatal(err)
		}
		return n, note
	}

	t.Run("OpsCommitWithTheSession", func(t *testing.T) {
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

	t.Run("ACutChainIsFound", func(t *testing.T) {
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

	t.Run("OpsAlone", func(t *testing.T) {
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
