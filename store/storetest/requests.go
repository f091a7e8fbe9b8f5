package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
)

// runRequests is the suite's part on the idempotency keys: results, claims and their takeover.
func runRequests(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	t.Run("Requests", func(t *testing.T) {
		t.Parallel()
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

	t.Run("SessionRequestIsBoth", func(t *testing.T) {
		// store.SessionRequest answers what Session and Request answer
		// (in one read on a store that is a SessionRequester), for
		// every kind of key: finished with a result, finished without
		// (a turn that ran nothing), running with what it runs, another
		// principal's, another session's, none, and a session that is
		// not there
		t.Parallel()
		s := open(t)
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 1), Record: rec("a")})
		mustCommit(t, s, &store.Commit{SessionID: "b", Session: sess("b", 1)})
		mustCommit(t, s, &store.Commit{SessionID: "a", Session: sess("a", 2), Record: rec("a"), Request: done(key("a", "ran"), "x")})
		mustCommit(t, s, &store.Commit{SessionID: "a", Record: rec("a"), Request: &store.Request{Key: key("a", "routed"), Digest: "t", ClaimedAt: t0}})
		if _, ok, err := s.Claim(ctx, store.Claim{Key: key("a", "running"), Digest: "d", Now: t0, StaleBefore: t0.Add(-time.Hour), Running: json.RawMessage(`{"tool":"send"}`)}); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		mustCommit(t, s, &store.Commit{SessionID: "b", Request: done(key("b", "ran"), "b's")})
		other := store.RequestKey{SessionID: "a", Principal: "q", RequestID: "ran"}
		for _, k := range []store.RequestKey{key("a", "ran"), key("a", "routed"), key("a", "running"), other, key("b", "ran"), key("b", "routed"), key("a", "none"), key("c", "ran")} {
			wantSess, wantErr := s.Session(ctx, k.SessionID)
			wantReq, wantOK, err := s.Request(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			gotSess, gotReq, gotOK, gotErr := store.SessionRequest(ctx, s, k)
			if fmt.Sprint(agentplane.ErrorCode(gotErr)) != fmt.Sprint(agentplane.ErrorCode(wantErr)) || (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("%+v: error %v, want %v", k, gotErr, wantErr)
			}
			if wantErr != nil {
				if gotSess != nil || gotOK {
					t.Fatalf("%+v: no session, and yet %+v %v", k, gotSess, gotOK)
				}
				continue
			}
			g, _ := json.Marshal(gotSess)
			w, _ := json.Marshal(wantSess)
			gr, _ := json.Marshal(gotReq)
			wr, _ := json.Marshal(wantReq)
			if string(g) != string(w) || string(gr) != string(wr) || gotOK != wantOK || !gotReq.ClaimedAt.Equal(wantReq.ClaimedAt) {
				t.Fatalf("%+v: SessionRequest %s %s %v, Session and Request %s %s %v", k, g, gr, gotOK, w, wr, wantOK)
			}
		}
	})

	t.Run("RequestsRememberTheirRecord", func(t *testing.T) {
		t.Parallel()
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

	t.Run("Claims", func(t *testing.T) {
		t.Parallel()
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

	t.Run("StaleClaimsKeepWhatTheyRun", func(t *testing.T) {
		t.Parallel()
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
		t.Parallel()
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
}
