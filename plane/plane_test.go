package plane_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
	"github.com/agentplane/agentplane/workflow"
)

func demoSource() core.Source { return core.Source{YAML: demo.YAML, Name: demo.Name} }

// What each store gives: memory has no notifications and no workflows
// (unless workflows are asked to live in memory); SQLite has both.
func TestPartsByStore(t *testing.T) {
	ctx := context.Background()
	rt, err := plane.Open(ctx, plane.Options{Config: demoSource(), Core: core.Options{Programs: demo.Programs(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Bus != nil || rt.Ledger != nil || rt.Workflows != nil || rt.DB != "memory" {
		t.Fatalf("memory: %+v", rt)
	}
	rt.Close(time.Second)
	rt, err = plane.Open(ctx, plane.Options{Config: demoSource(), Core: core.Options{Programs: demo.Programs(nil)}, Workflows: workflow.Options{Memory: true}})
	if err != nil || rt.Workflows == nil {
		t.Fatalf("memory workflows: %v", err)
	}
	rt.Close(time.Second)
	db := filepath.Join(t.TempDir(), "a.db")
	rt, err = plane.Open(ctx, plane.Options{Config: demoSource(), DB: db, OpenStore: drivers.Open, Core: core.Options{Programs: demo.Programs(nil)}})
	if err != nil || rt.Bus == nil || rt.Workflows == nil || rt.DB != db {
		t.Fatalf("sqlite: %v %+v", err, rt)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); !errors.Is(err, plane.ErrStarted) {
		t.Fatalf("a second Start: %v, want ErrStarted", err)
	}
	if err := rt.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(time.Second); err != nil {
		t.Fatal("a second Close:", err)
	}
	if err := rt.Start(ctx); !errors.Is(err, plane.ErrClosed) {
		t.Fatalf("a Start after Close: %v, want ErrClosed", err)
	}
	// the store is closed: the file opens again at once
	rt, err = plane.Open(ctx, plane.Options{Config: demoSource(), DB: db, OpenStore: drivers.Open, Core: core.Options{Programs: demo.Programs(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close(time.Second)
}

// TestEmbeddersStore: a store given in Options.Store is used and left
// open — whoever opened it closes it — while one the runtime opened from
// DB is closed with it.
func TestEmbeddersStore(t *testing.T) {
	ctx := context.Background()
	st, err := drivers.Open(ctx, filepath.Join(t.TempDir(), "e.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rt, err := plane.Open(ctx, plane.Options{Config: demoSource(), Store: st, Core: core.Options{Programs: demo.Programs(nil)}})
	if err != nil || rt.Store != st || rt.Bus == nil || rt.Workflows == nil {
		t.Fatalf("on the embedder's store: %v %+v", err, rt)
	}
	s, err := rt.Core.Start(ctx, core.Start{Principal: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Session(ctx, s.ID); err != nil || got.Owner != "ann" {
		t.Fatalf("the embedder's store after the runtime closed: %+v %v", got, err)
	}
	if _, err := plane.Open(ctx, plane.Options{Config: demoSource(), DB: "x.db", Core: core.Options{Programs: demo.Programs(nil)}}); err == nil || !strings.Contains(err.Error(), "OpenStore") {
		t.Fatalf("a DB without an opener: %v", err)
	}
}

// What cannot open says why, and leaves nothing open.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	_, err := plane.Open(ctx, plane.Options{Config: core.Source{YAML: []byte("version: 1\nmodes: []\n"), Name: "bad.yaml"}})
	var probs config.Problems
	if !errors.As(err, &probs) {
		t.Fatalf("an invalid configuration: %v", err)
	}
	_, err = plane.Open(ctx, plane.Options{Config: demoSource(), Core: core.Options{Programs: demo.Programs(nil)}, LLM: true,
		Getenv: func(k string) string { return map[string]string{"AGENTPLANE_LLM_BASE_URL": "http://127.0.0.1:1/v1"}[k] }})
	if err == nil || !strings.Contains(err.Error(), "set both AGENTPLANE_LLM_BASE_URL and AGENTPLANE_LLM_MODEL") {
		t.Fatalf("half an LLM: %v", err)
	}
	if _, err := plane.Open(ctx, plane.Options{Config: demoSource(), PGEvents: "shout"}); err == nil {
		t.Fatal("PGEvents shout accepted")
	}
	db := filepath.Join(t.TempDir(), "k.db")
	y := string(demo.YAML) + "\nauth:\n  keys:\n    - {user_id: alice, key_env: PLANE_TEST_UNSET}\n"
	_, err = plane.Open(ctx, plane.Options{Config: core.Source{YAML: []byte(y), Name: "keys.yaml"}, DB: db, OpenStore: drivers.Open, Core: core.Options{Programs: demo.Programs(nil)},
		Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "PLANE_TEST_UNSET is not set") {
		t.Fatalf("an unset key: %v", err)
	}
	// the failed open closed its store: the file opens again
	rt, err := plane.Open(ctx, plane.Options{Config: demoSource(), DB: db, OpenStore: drivers.Open, Core: core.Options{Programs: demo.Programs(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close(time.Second)
}
