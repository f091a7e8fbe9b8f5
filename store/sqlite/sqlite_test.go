package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// TestTwoWritersOnOneFile runs storetest.TwoStoresOnOneChain on two
// stores opened on one file, as two processes would.
func TestTwoWritersOnOneFile(t *testing.T) {
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
	storetest.TwoStoresOnOneChain(t, stores[0], stores[1])
}

// TestCloseWhileCommitting closes the store while goroutines commit: every
// commit either succeeds (and is there after reopening) or is refused
// because the store is closed; nothing hangs.
func TestCloseWhileCommitting(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	acked := make([]int64, 16) // last version acknowledged per session
	for g := range acked {
		wg.Go(func() {
			id := fmt.Sprint("s", g)
			for v := int64(1); ; v++ {
				err := s.Commit(ctx, &gate.Commit{SessionID: id, Session: &agentplane.Session{ID: id, Mode: "general", Version: v},
					Record: &audit.Record{Session: id, Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Kind: audit.KindExecution}})
				if err != nil {
					if !strings.Contains(err.Error(), "store is closed") {
						t.Errorf("%s v%d: %v", id, v, err)
					}
					return
				}
				acked[g] = v
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s, err = sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	total := int64(0)
	for g, v := range acked {
		id := fmt.Sprint("s", g)
		recs, err := s.Records(ctx, id)
		if err != nil || int64(len(recs)) != v || audit.Verify(recs) != nil {
			t.Fatalf("%s: %d records for %d acknowledged commits (%v)", id, len(recs), v, err)
		}
		total += v
	}
	if total == 0 {
		t.Fatal("nothing was committed before Close")
	}
}

// TestConcurrentCommitsShareTransactions checks that group commit groups:
// commits from 16 goroutines at once take fewer transactions (and fsyncs)
// than there are commits.
func TestConcurrentCommitsShareTransactions(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "g.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const workers, each = 16, 20
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Go(func() {
			id := fmt.Sprint("s", g)
			for v := int64(1); v <= each; v++ {
				if err := s.Commit(ctx, &gate.Commit{SessionID: id, Session: &agentplane.Session{ID: id, Mode: "general", Version: v},
					Record: &audit.Record{Session: id, Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Kind: audit.KindExecution}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	txs := s.Transactions()
	t.Logf("%d commits in %d transactions", workers*each, txs)
	if txs <= 0 || txs >= workers*each {
		t.Fatalf("%d commits took %d transactions: nothing was grouped", workers*each, txs)
	}
}
