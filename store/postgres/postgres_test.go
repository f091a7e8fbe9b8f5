package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/store/postgres"
	"github.com/agentplane/agentplane/store/storetest"
)

// testURL is the server the tests use: $AGENTPLANE_TEST_POSTGRES (set by
// .ci/run). Without it the tests skip and say why.
func testURL(t testing.TB) string {
	url := os.Getenv("AGENTPLANE_TEST_POSTGRES")
	if url == "" {
		t.Skip("AGENTPLANE_TEST_POSTGRES is not set: no PostgreSQL to test against (.ci/run sets it)")
	}
	return url
}

var schemas atomic.Int64

// freshDB creates an empty schema for one test and returns a URL using it.
func freshDB(t testing.TB) string {
	url := testURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Skipf("PostgreSQL at AGENTPLANE_TEST_POSTGRES is not reachable: %v", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), schemas.Add(1))
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE; CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), url)
		if err == nil {
			c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+name+" CASCADE")
			c.Close(context.Background())
		}
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + name
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s, err := postgres.Open(context.Background(), freshDB(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	})
}

func TestOpenErrors(t *testing.T) {
	url := freshDB(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn, _ := pgx.Connect(ctx, url)
	conn.Exec(ctx, `INSERT INTO schema_version (version) VALUES (99)`)
	conn.Close(ctx)
	if _, err := postgres.Open(ctx, url); err == nil || !strings.Contains(err.Error(), "newer than this agentplane") {
		t.Fatalf("newer schema: %v", err)
	}
	if _, err := postgres.Open(ctx, "postgres://nobody@127.0.0.1:1/x?connect_timeout=2"); err == nil || !strings.Contains(err.Error(), "cannot reach postgres://nobody@127.0.0.1:1/x") {
		t.Fatalf("unreachable: %v", err)
	}
}
