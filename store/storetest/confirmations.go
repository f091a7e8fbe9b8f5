package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
)

// runConfirmations is the suite's part on the confirmation tokens and their one use.
func runConfirmations(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	t.Run("Confirmations", func(t *testing.T) {
		t.Parallel()
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
		t.Parallel()
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
}
