package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/store"
)

// runConfigs is the suite's part on the configurations kept by digest
// (store.Configs, which every store agentplane ships has).
func runConfigs(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	digest := func(b []byte) string {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	t.Run("KeptByDigestOnce", func(t *testing.T) {
		t.Parallel()
		s, ok := open(t).(store.Configs)
		if !ok {
			t.Fatal("the store does not keep configurations (store.Configs)")
		}
		a := []byte(`{"Modes":[{"key":"general"}]}`)
		d := digest(a)
		if _, found, err := s.Config(ctx, d); found || err != nil {
			t.Fatalf("an empty store has %s: %v %v", d, found, err)
		}
		// instances starting together write the same configuration at once
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := s.PutConfig(ctx, d, a); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got, found, err := s.Config(ctx, d)
		if err != nil || !found || !bytes.Equal(got, a) {
			t.Fatalf("read back %q %v %v", got, found, err)
		}
		got[0] = 'x' // the caller's copy
		if again, _, _ := s.Config(ctx, d); !bytes.Equal(again, a) {
			t.Fatalf("changing the returned bytes changed the store: %q", again)
		}
	})
	t.Run("ErrWrongDigest", func(t *testing.T) {
		t.Parallel()
		s := open(t).(store.Configs)
		a, b := []byte(`{"a":1}`), []byte(`{"b":2}`)
		err := s.PutConfig(ctx, digest(a), b)
		if agentplane.ErrorCode(err) != agentplane.CodeInvalidInput {
			t.Fatalf("a body under another's digest: %v", err)
		}
		if _, found, _ := s.Config(ctx, digest(a)); found {
			t.Fatal("the refused body was kept")
		}
	})
}
