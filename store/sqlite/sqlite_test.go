package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/sqlite"
	"github.com/agentplane/agentplane/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
	storetest.RunSQL(t, func(t *testing.T, exts []store.Extension) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"), &sqlite.Options{Extensions: exts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("this is not a database ", 100)), 0o644)
	if _, err := sqlite.Open(context.Background(), garbage, nil); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Fatalf("corrupt file: %v", err)
	}
	path := filepath.Join(dir, "new.db")
	s, err := sqlite.Open(context.Background(), path, nil)
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
	if _, err := sqlite.Open(context.Background(), path, nil); err == nil || !strings.Contains(err.Error(), "newer than this agentplane") {
		t.Fatalf("newer schema: %v", err)
	}
	if _, err := sqlite.Open(context.Background(), filepath.Join(dir, "x.db"), &sqlite.Options{Synchronous: "SOMETIMES"}); err == nil {
		t.Fatal("bad synchronous accepted")
	}
}

// TestTwoWritersOnOneFile runs storetest.TwoStoresOnOneChain on two
// stores opened on one file, as two processes would.
func TestTwoWritersOnOneFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(context.Background(), path, nil)
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
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	acked := make([]int64, 16) // last version acknowledged per session
	for g := range acked {
		wg.Go(func() {
			id := fmt.Sprint("s", g)
			for v := int64(1); ; v++ {
				err := s.Commit(ctx, &store.Commit{SessionID: id, Session: &agentplane.Session{ID: id, Mode: "general", Version: v},
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
	s, err = sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	total := int64(0)
	for g, v := range acked {
		id := fmt.Sprint("s", g)
		recs, err := s.Records(ctx, id, 0)
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
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "g.db"), nil)
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
				if err := s.Commit(ctx, &store.Commit{SessionID: id, Session: &agentplane.Session{ID: id, Mode: "general", Version: v},
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

// TestWriterConnectionReplaced: when the leader's connection goes bad
// (database/sql closes it), the next commit gets a new one, its
// statements prepared again, and goes through.
func TestWriterConnectionReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "w.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit := func(v int64) error {
		return s.Commit(ctx, &store.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Mode: "general", Version: v},
			Record: &audit.Record{Session: "a", Time: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), Kind: audit.KindExecution}})
	}
	if err := commit(1); err != nil {
		t.Fatal(err)
	}
	s.BreakWriter()
	if err := commit(2); err != nil {
		t.Fatalf("the commit after the connection went bad: %v", err)
	}
	got, err := s.Session(ctx, "a")
	if err != nil || got.Version != 2 {
		t.Fatalf("session %+v, %v; want version 2", got, err)
	}
	if recs, err := s.Records(ctx, "a", 0); err != nil || len(recs) != 2 || audit.Verify(recs) != nil {
		t.Fatalf("%d records, %v", len(recs), err)
	}
}

// TestPaths: --db is a file path, never a SQLite URI, and a database is
// kept for its owner only.
func TestPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, bad := range []string{"mem.db?mode=memory&cache=shared", "file:x.db", ":memory:", "a#b.db", "", dir} {
		if s, err := sqlite.Open(context.Background(), bad, nil); err == nil {
			s.Close()
			t.Errorf("%q was accepted", bad)
		}
	}
	pct := filepath.Join(dir, "sub", "pct%41.db")
	s, err := sqlite.Open(context.Background(), pct, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(context.Background(), &store.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Mode: "m", Version: 1}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "sub", "pctA.db")); err == nil {
		t.Fatal("the path was URI-decoded")
	}
	for path, want := range map[string]os.FileMode{pct: 0o600, pct + "-wal": 0o600, filepath.Join(dir, "sub"): 0o700} {
		st, err := os.Stat(path)
		if err != nil {
			if strings.HasSuffix(path, "-wal") {
				continue // checkpointed away on close
			}
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), want)
		}
	}
}

// TestForeignAndReadOnly: a SQLite file of another program is refused, not
// migrated; a read-only open creates and migrates nothing.
func TestForeignAndReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	foreign := filepath.Join(dir, "app.db")
	db, err := sqlite.OpenRaw(foreign)
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(`CREATE TABLE customers (id INTEGER)`)
	db.Close()
	for _, ro := range []bool{false, true} {
		_, err := sqlite.Open(context.Background(), foreign, &sqlite.Options{ReadOnly: ro})
		if err == nil || !strings.Contains(err.Error(), "did not create (tables customers)") {
			t.Fatalf("read-only %v: %v", ro, err)
		}
	}
	db, _ = sqlite.OpenRaw(foreign)
	var n int
	db.QueryRow(`SELECT count(*) FROM sqlite_master`).Scan(&n)
	db.Close()
	if n != 1 {
		t.Fatalf("the foreign database was changed: %d objects", n)
	}
	missing := filepath.Join(dir, "none.db")
	if _, err := sqlite.Open(context.Background(), missing, &sqlite.Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "no database at") {
		t.Fatalf("read-only open of a missing file: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("a read-only open created the file")
	}
	path := filepath.Join(dir, "ours.db")
	s, _ := sqlite.Open(context.Background(), path, nil)
	s.Close()
	ro, err := sqlite.Open(context.Background(), path, &sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Commit(context.Background(), &store.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Version: 1}}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("a commit on a read-only store: %v", err)
	}
}

// TestExtensionsMigrateOnce: reopening applies nothing twice; a database
// with newer extension tables is refused.
func TestExtensionsMigrateOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.db")
	for i := 0; i < 2; i++ {
		s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Extensions: []store.Extension{storetest.Counters}})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		s.Close()
	}
	older := storetest.Counters
	older.Migrations = map[string][]string{store.SQLite: older.Migrations[store.SQLite][:1]}
	if _, err := sqlite.Open(context.Background(), path, &sqlite.Options{Extensions: []store.Extension{older}}); err == nil || !strings.Contains(err.Error(), "counters tables of version 2, newer") {
		t.Fatalf("newer extension tables: %v", err)
	}
}

// TestLocked: a database another process holds locked says so, by name.
func TestLocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := sqlite.Open(context.Background(), path, &sqlite.Options{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, _ := sqlite.OpenRaw(path)
	defer db.Close()
	conn, _ := db.Conn(context.Background())
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)
	err = s.Commit(context.Background(), &store.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Version: 1}})
	if err == nil || !strings.Contains(err.Error(), "locked by another process") || !strings.Contains(err.Error(), path) {
		t.Fatalf("commit on a locked database: %v", err)
	}
}

// TestHeadsOfAnOlderDatabase: a database of version 6 gets its sessions'
// chain heads from their records when it is opened.
func TestHeadsOfAnOlderDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	storetest.HeadsOfAnOlderDatabase(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, func(t *testing.T) {
		db, err := sqlite.OpenRaw(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`DROP TRIGGER audit_head; ALTER TABLE sessions DROP COLUMN head_seq; ALTER TABLE sessions DROP COLUMN head_hash; DELETE FROM schema_version WHERE version >= 7`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestConcurrentOpensMigrateOnce: processes that open a new database at
// once (each its own connections, as separate processes have) all open
// it, and every migration is applied exactly once. (The versions were read
// outside the migrating transaction: the second opener applied migration
// 1 again and failed on a table that existed.)
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Extensions: []store.Extension{storetest.Counters}})
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("opener %d: %v", i, err)
		}
	}
	migratedOnce(t, path)
}

// TestProcessesMigrateOnce is TestConcurrentOpensMigrateOnce with real
// processes: this test binary run 8 times at once, each opening the same new
// file (SQLite's locks between processes are the file's, not the Go
// driver's).
func TestProcessesMigrateOnce(t *testing.T) {
	if path := os.Getenv("AGENTPLANE_SQLITE_OPENER"); path != "" {
		io.Copy(io.Discard, os.Stdin) // the start line: the parent closes every stdin at once
		s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Extensions: []store.Extension{storetest.Counters}})
		if err == nil {
			err = s.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	cmds := make([]*exec.Cmd, 8)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestProcessesMigrateOnce$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), "AGENTPLANE_SQLITE_OPENER="+path)
	}
	outs := make([]strings.Builder, len(cmds))
	starts := make([]io.WriteCloser, len(cmds))
	for i, c := range cmds {
		c.Stdout, c.Stderr = &outs[i], &outs[i]
		w, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		starts[i] = w
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range starts {
		w.Close()
	}
	errs := make([]error, len(cmds))
	for i, c := range cmds {
		errs[i] = c.Wait()
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("opener process %d: %v\n%s", i, err, outs[i].String())
		}
	}
	migratedOnce(t, path)
}

// TestRecordAloneReadsNothingBack counts a record-only commit's
// statements: one (its insert, which lands while the session is at the
// state the caller read) — the session is not read back to snapshot it;
// three when another commit moved the session on (the insert that does
// not land, the read, the insert).
func TestRecordAloneReadsNothingBack(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if at, moved := storetest.RecordAlone(t, s); at.Statements != 1 || moved.Statements != 3 {
		t.Fatalf("a record alone: %d statements at the version read (want 1), %d after the session moved on (want 3)", at.Statements, moved.Statements)
	}
}

// migratedOnce checks that every migration of the database at path, and
// the counters extension's two, were applied exactly once.
func migratedOnce(t *testing.T, path string) {
	t.Helper()
	db, err := sqlite.OpenRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, distinct, ext int
	db.QueryRow(`SELECT count(*), count(DISTINCT version) FROM schema_version`).Scan(&rows, &distinct)
	db.QueryRow(`SELECT version FROM schema_extensions WHERE name = 'counters'`).Scan(&ext)
	if rows != distinct || rows == 0 || ext != 2 {
		t.Fatalf("schema_version has %d rows for %d versions; counters at %d", rows, distinct, ext)
	}
}

// TestReadsKeepTheirDeadline: with every reader connection held, a read
// waits for one only until its context's deadline (a read that ran its
// statements without its context's cancellation, to spare database/sql's
// watcher goroutines, waited for good: found by a review).
func TestReadsKeepTheirDeadline(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	release := make(chan struct{})
	var inside, done sync.WaitGroup
	const holders = 63 // every connection but the writer's
	inside.Add(holders)
	for range holders {
		done.Go(func() {
			first := true
			s.Query(context.Background(), `SELECT version FROM schema_version`, nil, func(func(...any) error) error {
				if first {
					first = false
					inside.Done()
					<-release
				}
				return nil
			})
		})
	}
	inside.Wait()
	defer func() { close(release); done.Wait() }()
	for name, read := range map[string]func(ctx context.Context) error{
		"Session": func(ctx context.Context) error { _, err := s.Session(ctx, "s1"); return err },
		"SessionRequest": func(ctx context.Context) error {
			_, _, _, err := s.SessionRequest(ctx, store.RequestKey{SessionID: "s1", Principal: "p", RequestID: "r"})
			return err
		},
		"Query": func(ctx context.Context) error {
			return s.Query(ctx, `SELECT 1`, nil, func(func(...any) error) error { return nil })
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		if err := read(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with every connection held: %v; want context.DeadlineExceeded", name, err)
		}
		cancel()
	}
}

// TestTransactionLeftOpenOnTheWriter: a transaction left open on the
// writer's connection (a group whose ROLLBACK failed) is ended by the
// next group, whose commit lands, where every later BEGIN failed ("within
// a transaction") and the store could commit nothing again (found by a
// review).
func TestTransactionLeftOpenOnTheWriter(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"), &sqlite.Options{Extensions: []store.Extension{storetest.Counters}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.LeaveTransactionOpen(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		add := store.OpFunc(func(ctx context.Context, tx store.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO counters (name, n) VALUES (?, 1)`, fmt.Sprint("c", i))
			return err
		})
		if err := s.Commit(ctx, &store.Commit{Ops: []store.Op{add}}); err != nil {
			t.Fatalf("commit %d after a transaction was left open: %v", i, err)
		}
	}
	n := 0
	if err := s.Query(ctx, `SELECT count(*) FROM counters`, nil, func(scan func(...any) error) error { return scan(&n) }); err != nil || n != 3 {
		t.Fatalf("%d counters committed (%v); want 3", n, err)
	}
}
