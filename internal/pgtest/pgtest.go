// Package pgtest gives tests a PostgreSQL schema of their own on the
// server $AGENTPLANE_TEST_POSTGRES names (.ci/run sets it); without it,
// or with the server unreachable, the test skips and says why.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

var schemas atomic.Int64

// URL returns $AGENTPLANE_TEST_POSTGRES, or skips the test.
func URL(tb testing.TB) string {
	url := os.Getenv("AGENTPLANE_TEST_POSTGRES")
	if url == "" {
		tb.Skip("AGENTPLANE_TEST_POSTGRES is not set: no PostgreSQL to test against (.ci/run sets it)")
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
		tb.Skipf("PostgreSQL at AGENTPLANE_TEST_POSTGRES is not reachable: %v", err)
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
