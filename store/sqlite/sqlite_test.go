package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "a.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("this is not a database ", 100)), 0o644)
	if _, err := sqlite.Open(garbage, nil); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Fatalf("corrupt file: %v", err)
	}
	path := filepath.Join(dir, "new.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// a database from a newer agentplane is refused, not used
	db, err := sqlite.OpenRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(`INSERT INTO schema_version (version) VALUES (99)`)
	db.Close()
	if _, err := sqlite.Open(path, nil); err == nil || !strings.Contains(err.Error(), "newer than this agentplane") {
		t.Fatalf("newer schema: %v", err)
	}
	if _, err := sqlite.Open(filepath.Join(dir, "x.db"), &sqlite.Options{Synchronous: "SOMETIMES"}); err == nil {
		t.Fatal("bad synchronous accepted")
	}
}

// TestTwoWritersOnOneFile commits to one session's chain from two stores
// on the same file, as two processes would: each store's cached chain head
// goes stale, and the chain must still verify with no gap.
func TestTwoWritersOnOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	for v := int64(1); v <= 8; v++ {
		s := stores[v%2]
		if v%3 == 0 {
			s = stores[(v+1)%2] // sometimes the same store twice in a row
		}
		c := &gate.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Mode: "general", Version: v},
			Record: &audit.Record{Session: "a", Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Kind: audit.KindExecution}}
		if err := s.Commit(ctx, c); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if c.Record.Seq != v {
			t.Fatalf("version %d sealed as seq %d", v, c.Record.Seq)
		}
	}
	recs, err := stores[0].Records(ctx, "a")
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
