package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/auth"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/plane"
)

// Verifying or replaying a whole chain is one at a time per principal:
// while one of alice's runs, her next — verification or replay — is 429
// naming the cap, and bob's waits for a slot server-wide (there are half
// the cores' worth), then is answered. Two replays at once took both
// cores, and other people's turns went from 2 to 41 ms.
func TestOneChainReadAtATime(t *testing.T) {
	rt := demotest.Runtime(t, plane.Options{})
	s := New(rt, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	alice, bob := auth.Principal{ID: "alice"}, auth.Principal{ID: "bob"}
	ctx := context.Background()
	sa, _ := rt.Core.Start(ctx, core.Start{Principal: agentplane.LocalPrincipal})
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// the keyless server's principal is local: hold one of its reads
	release, err := s.limits.holdChain(ctx, auth.Local, "replay")
	if err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"verification", "replay"} {
		st, body := get("/v1/sessions/" + sa.ID + "/audit/" + what)
		var eb ErrorBody
		json.Unmarshal([]byte(body), &eb)
		if st != http.StatusTooManyRequests || eb.Error.Code != agentplane.CodeTooManyRequests || !strings.Contains(eb.Error.Message, "one at a time") {
			t.Fatalf("%s while one runs: %d %s", what, st, body)
		}
	}
	release()
	if st, body := get("/v1/sessions/" + sa.ID + "/audit/verification"); st != 200 {
		t.Fatalf("after: %d %s", st, body)
	}
	// server-wide: alice holds every slot; bob's read waits, then runs
	var held []func()
	for range max(1, runtime.GOMAXPROCS(0)/2) {
		r, err := s.limits.holdChain(ctx, alice, "replay")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
		s.limits.mu.Lock()
		delete(s.limits.reading, alice.ID) // as if each were another principal's
		s.limits.mu.Unlock()
	}
	done := make(chan error, 1)
	go func() {
		r, err := s.limits.holdChain(ctx, bob, "replay")
		if err == nil {
			r()
		}
		done <- err
	}()
	for _, r := range held {
		r()
	}
	if err := <-done; err != nil {
		t.Fatalf("bob's read: %v", err)
	}
	// one that waits past its request's end gives up its place
	for range max(1, runtime.GOMAXPROCS(0)/2) {
		r, _ := s.limits.holdChain(ctx, alice, "replay")
		defer r()
		s.limits.mu.Lock()
		delete(s.limits.reading, alice.ID)
		s.limits.mu.Unlock()
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.limits.holdChain(cctx, bob, "replay"); agentplane.ErrorCode(err) != agentplane.CodeTooManyRequests {
		t.Fatalf("a read whose request ended: %v", err)
	}
	if s.limits.reading[bob.ID] {
		t.Fatal("a read that gave up still counts")
	}
}
