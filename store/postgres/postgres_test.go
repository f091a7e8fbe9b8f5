package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/internal/testkit/pgtest"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/storetest"
)

// freshDB creates an empty schema for one test and returns a URL using it.
func freshDB(t testing.TB) string { return pgtest.Schema(t) }

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), freshDB(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
	storetest.RunSQL(t, func(t *testing.T, exts []store.Extension) store.Store {
		s, err := postgres.Open(context.Background(), freshDB(t), &postgres.Options{Extensions: exts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:s3cret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db":                             "postgres://u@h/db",
		"postgres://u:p%zz@h/db":                        "postgres://…@h/db",
	} {
		if got := postgres.Redact(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	_, err := postgres.Open(context.Background(), "postgres://u:s3cret@127.0.0.1:1/x?connect_timeout=2", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("the password shows in %v", err)
	}
	_, err = postgres.Open(context.Background(), "postgres://u:s3cret@127.0.0.1:notaport/x", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("the password shows in %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	url := freshDB(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn, _ := pgx.Connect(ctx, url)
	conn.Exec(ctx, `INSERT INTO schema_version (version) VALUES (99)`)
	conn.Close(ctx)
	if _, err := postgres.Open(ctx, url, nil); err == nil || !strings.Contains(err.Error(), "newer than this agentplane") {
		t.Fatalf("newer schema: %v", err)
	}
	if _, err := postgres.Open(ctx, "postgres://nobody@127.0.0.1:1/x?connect_timeout=2", nil); err == nil || !strings.Contains(err.Error(), "cannot reach postgres://nobody@127.0.0.1:1/x") {
		t.Fatalf("unreachable: %v", err)
	}
}

// TestTwoStoresOnOneDatabase runs storetest.TwoStoresOnOneChain on two
// stores on one database, as two instances would.
func TestTwoStoresOnOneDatabase(t *testing.T) {
	t.Parallel()
	url := freshDB(t)
	var stores [2]*postgres.Store
	for i := range stores {
		s, err := postgres.Open(context.Background(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	storetest.TwoStoresOnOneChain(t, stores[0], stores[1])
}

// TestLostConnection runs a store through a TCP proxy to the server, then
// cuts the proxy: the next commit and read fail with an error naming the
// server and saying what to check, and change nothing.
func TestLostConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target, err := pgx.ParseConfig(freshDB(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", net.JoinHostPort(target.Host, fmt.Sprint(target.Port)))
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	url := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable&search_path=%s", target.User, port, target.Database, target.RuntimeParams["search_path"])
	s, err := postgres.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	one := &store.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Mode: "general", Version: 1},
		Record: &audit.Record{Session: "a", Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Kind: audit.KindExecution}}
	if err := s.Commit(ctx, one); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	two := &store.Commit{SessionID: "a", Session: &agentplane.Session{ID: "a", Mode: "ddr", Version: 2},
		Record: &audit.Record{Session: "a", Time: time.Date(2026, 11, 25, 12, 1, 0, 0, time.UTC), Kind: audit.KindExecution}}
	err = s.Commit(ctx, two)
	want := fmt.Sprintf("127.0.0.1:%d", port)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "running and reachable") {
		t.Fatalf("commit over a lost connection: %v", err)
	}
	if _, err := s.Session(ctx, "a"); err == nil || !strings.Contains(err.Error(), "running and reachable") {
		t.Fatalf("read over a lost connection: %v", err)
	}
	// The server itself kept version 1.
	direct, err := postgres.Open(ctx, freshURLLike(target), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if got, err := direct.Session(ctx, "a"); err != nil || got.Version != 1 {
		t.Fatalf("after the failed commit: %+v, %v", got, err)
	}
}

// freshURLLike is the direct URL of a parsed test database configuration.
func freshURLLike(c *pgx.ConnConfig) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable&search_path=%s", c.User, c.Host, c.Port, c.Database, c.RuntimeParams["search_path"])
}

// TestHeadsOfAnOlderDatabase: a database of version 6 gets its sessions'
// chain heads from their records when it is opened.
func TestHeadsOfAnOlderDatabase(t *testing.T) {
	t.Parallel()
	url := freshDB(t)
	storetest.HeadsOfAnOlderDatabase(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, func(t *testing.T) {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), `ALTER TABLE sessions DROP COLUMN head_seq, DROP COLUMN head_hash; DELETE FROM schema_version WHERE version >= 7`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRecordAloneInOneRoundTrip counts a record-only commit's round trips
// and statements: one batch of one statement (the record, landing while
// the session is at the state the caller read, and its request's), where
// it took a transaction that locked the session and read the state back
// (BEGIN, the read, the batch, COMMIT); and, when another commit moved the
// session on, that transaction after the batch that did not land.
func TestRecordAloneInOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := postgres.Open(ctx, freshDB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at, moved := storetest.RecordAlone(t, s)
	if at.RoundTrips != 1 || at.Statements != 1 {
		t.Fatalf("at the version read: %+v, want 1 statement in 1 round trip", at)
	}
	// the batch; then BEGIN, the state, the head (forgotten on the failure), the batch, COMMIT
	if moved.RoundTrips != 6 {
		t.Fatalf("after the session moved on: %+v, want 6 round trips", moved)
	}
}
