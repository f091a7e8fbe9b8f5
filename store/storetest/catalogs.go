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

// runCatalogVersions is the suite's part on the providers' answers kept
// by version (store.CatalogVersions, which every store agentplane ships
// has).
func runCatalogVersions(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	version := func(b []byte) string {
		s := sha256.Sum256(b)
		return "sha256:" + hex.EncodeToString(s[:])
	}
	versions := func(t *testing.T) store.CatalogVersions {
		t.Helper()
		s, ok := open(t).(store.CatalogVersions)
		if !ok {
			t.Fatal("the store does not keep catalog versions (store.CatalogVersions)")
		}
		return s
	}
	t.Run("KeptByVersionOnce", func(t *testing.T) {
		t.Parallel()
		s := versions(t)
		a := []byte(`[{"display_name":"Loan A","id":"L-1"}]`)
		b := []byte(`[{"display_name":"Loan B","id":"L-2"}]`)
		va, vb := version(a), version(b)
		if _, found, err := s.CatalogVersion(ctx, va); found || err != nil {
			t.Fatalf("an empty store has %s: %v %v", va, found, err)
		}
		// callers of several scopes, or instances, keep one answer at once
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := s.PutCatalogVersion(ctx, va, a); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := s.PutCatalogVersion(ctx, vb, b); err != nil {
			t.Fatal(err)
		}
		for v, want := range map[string][]byte{va: a, vb: b} {
			got, found, err := s.CatalogVersion(ctx, v)
			if err != nil || !found || !bytes.Equal(got, want) {
				t.Fatalf("%s read back %q %v %v", v, got, found, err)
			}
		}
		got, _, _ := s.CatalogVersion(ctx, va)
		got[0] = 'x' // the caller's copy
		if again, _, _ := s.CatalogVersion(ctx, va); !bytes.Equal(again, a) {
			t.Fatalf("changing the returned bytes changed the store: %q", again)
		}
	})
	t.Run("ErrWrongVersion", func(t *testing.T) {
		t.Parallel()
		s := versions(t)
		a, b := []byte(`[{"id":"a"}]`), []byte(`[{"id":"b"}]`)
		for name, v := range map[string]string{
			"another body's": version(a),
			"without prefix": version(a)[len("sha256:"):],
			"empty":          "",
		} {
			body := b
			if name != "another body's" {
				body = a
			}
			err := s.PutCatalogVersion(ctx, v, body)
			if agentplane.ErrorCode(err) != agentplane.CodeInvalidInput {
				t.Fatalf("a body under %s version %q: %v", name, v, err)
			}
			if _, found, _ := s.CatalogVersion(ctx, v); found {
				t.Fatalf("the refused body under %s version was kept", name)
			}
		}
	})
}
