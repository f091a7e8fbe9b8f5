// Package pgtest gives tests a PostgreSQL schema of their own on the
// server $AGENTPLANE_TEST_POSTGRES names (.ci/run sets it); without it,
// or with the server unreachable, the test skips and says why — or fails,
// where $AGENTPLANE_REQUIRE_POSTGRES is set (.ci/run sets that too).
package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/testkit/testenv"
)

var schemas atomic.Int64

// URL returns the test server's URL, or skips (or fails) the test.
func URL(tb testing.TB) string {
	tb.Helper()
	url, why := testenv.Postgres()
	if why != "" {
		if os.Getenv(testenv.RequirePostgresVar) != "" {
			tb.Fatalf("%s, and %s is set", why, testenv.RequirePostgresVar)
		}
		tb.Skipf("%s: no PostgreSQL to test against (.ci/run sets it)", why)
	}
	return url
}

// Schema creates an empty schema, dropped when the test ends, and returns
// a URL whose search_path is it.
func Schema(tb testing.TB) string {
	tb.Helper()
	url := URL(tb)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatalf("PostgreSQL at %s: %v", testenv.PostgresVar, err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), schemas.Add(1))
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE; CREATE SCHEMA "+name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), url); err == nil {
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
