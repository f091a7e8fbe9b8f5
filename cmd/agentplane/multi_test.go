package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/store/postgres"
)

// TestTwoInstancesOnePostgres runs two agentplane processes against one
// PostgreSQL, taking turns on the same session at the same time. Afterwards
// the audit chain verifies and every state the chain records follows the one
// before it by exactly one version: no update was lost or applied twice.
func TestTwoInstancesOnePostgres(t *testing.T) {
	url := os.Getenv("AGENTPLANE_TEST_POSTGRES")
	if url == "" {
		t.Skip("AGENTPLANE_TEST_POSTGRES is not set: no PostgreSQL to test against (.ci/run sets it)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Skipf("PostgreSQL not reachable: %v", err)
	}
	schema := fmt.Sprintf("multi_%d", os.Getpid())
	conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE; CREATE SCHEMA "+schema)
	conn.Close(ctx)
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), url); err == nil {
			c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	db := url + sep + "search_path=" + schema

	bin := filepath.Join(t.TempDir(), "agentplane")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "chat", "--db", db, "--mode", "sales").Output()
	m := regexp.MustCompile(`session ([0-9a-f]+),`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("create session: %v\n%s", err, out)
	}
	id := string(m[1])

	var script bytes.Buffer
	for i := 0; i < 40; i++ {
		fmt.Fprintln(&script, []string{"open the q1 cfo outreach template", "open the q1 cto outreach template", "hello", "open the outreach template", "1"}[i%5])
	}
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "chat", "--db", db, "--session", id)
			cmd.Stdin = bytes.NewReader(script.Bytes())
			outs[i], _ = cmd.CombinedOutput()
		}()
	}
	wg.Wait()

	s, err := postgres.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.Records(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(recs); err != nil {
		t.Fatal(err)
	}
	last := int64(0)
	changes := 0
	for _, r := range recs {
		if r.State == nil {
			continue
		}
		switch v := r.State.Version; {
		case v == last:
		case v == last+1:
			changes++
		default:
			t.Fatalf("record %d: state version %d after %d: an update was lost or applied twice", r.Seq, v, last)
		}
		last = r.State.Version
	}
	sess, _ := s.Session(ctx, id)
	if sess.Version != last || changes < 10 {
		t.Fatalf("session at version %d, chain ends at %d, %d changes", sess.Version, last, changes)
	}
	conflicts := strings.Count(string(outs[0])+string(outs[1]), "version_conflict") + strings.Count(string(outs[0])+string(outs[1]), "changed while")
	t.Logf("%d records, %d state changes, %d turns lost a race and changed nothing", len(recs), changes, conflicts)
}
