package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/internal/testkit/pgtest"
)

// TestAuditVerifyDatabase: `audit verify --db DB` checks every stored
// chain, on SQLite and PostgreSQL, and names the first bad record of each
// chain that breaks — an edited record, a dropped one, one that does not
// decode — and none of the intact ones (also one whose session row is
// gone); --session checks one; any bad chain is exit status 1.
func TestAuditVerifyDatabase(t *testing.T) {
	t.Parallel()
	drivers := map[string]func(t *testing.T) (db string, exec func(query string, args ...any)){
		"SQLite": func(t *testing.T) (string, func(string, ...any)) {
			db := filepath.Join(t.TempDir(), "audit.db")
			return db, func(query string, args ...any) {
				t.Helper()
				sq, err := sql.Open("sqlite", db)
				if err != nil {
					t.Fatal(err)
				}
				defer sq.Close()
				if _, err := sq.Exec(query, args...); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
			}
		},
		"PostgreSQL": func(t *testing.T) (string, func(string, ...any)) {
			db := pgtest.Schema(t)
			return db, func(query string, args ...any) {
				t.Helper()
				ctx := context.Background()
				conn, err := pgx.Connect(ctx, db)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				n := 0
				query = regexp.MustCompile(`\?`).ReplaceAllStringFunc(query, func(string) string { n++; return fmt.Sprintf("$%d", n) })
				if _, err := conn.Exec(ctx, query, args...); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
			}
		},
	}
	for name, open := range drivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, exec := open(t)
			var ids []string
			for range 5 {
				out, errOut, code := run(t, "switch to ddr mode\nhello there\nswitch to sales mode\n", "chat", "--db", db)
				m := regexp.MustCompile(`session ([0-9a-f]+),`).FindStringSubmatch(out)
				if code != 0 || m == nil {
					t.Fatalf("chat: exit %d\n%s%s", code, out, errOut)
				}
				ids = append(ids, m[1])
			}
			verify := func(args ...string) (string, int) {
				out, errOut, code := run(t, "", append([]string{"audit", "verify", "--db", db}, args...)...)
				return out + errOut, code
			}
			out, code := verify()
			if code != 0 || !strings.Contains(out, "intact: 20 records in 5 session(s)") {
				t.Fatalf("before any change: exit %d\n%s", code, out)
			}

			exec(`UPDATE audit SET record = replace(record, 'ddr', 'DDR') WHERE session = ? AND seq = 2`, ids[1]) // edited
			exec(`DELETE FROM audit WHERE session = ? AND seq = 3`, ids[2])                                       // dropped
			exec(`UPDATE audit SET record = 'not a record' WHERE session = ? AND seq = 2`, ids[3])                // does not decode
			exec(`DELETE FROM sessions WHERE id = ?`, ids[4])                                                     // its chain stays whole
			want := map[string]string{
				ids[1]: "session " + ids[1] + ": broken at record 2 (seq 2): hash mismatch: the record was edited",
				ids[2]: "session " + ids[2] + ": broken at record 3 (seq 4): sequence number 4 where 3 was expected",
				ids[3]: "session " + ids[3] + ": unreadable: ",
			}
			for _, args := range [][]string{nil, {"--all"}} {
				out, code := verify(args...)
				if code != 1 || !strings.Contains(out, "3 of 5 session(s) broken") {
					t.Errorf("verify %v: exit %d\n%s", args, code, out)
				}
				for _, id := range ids {
					line, bad := want[id]
					if !bad {
						line = "session " + id
					}
					if strings.Contains(out, line) != bad {
						t.Errorf("verify %v: session %s reported %v, want %v\n%s", args, id, !bad, bad, out)
					}
				}
			}
			for i, id := range ids {
				out, code := verify("--session", id)
				line, bad := want[id]
				if bad && (code != 1 || !strings.Contains(out, line)) || !bad && (code != 0 || !strings.Contains(out, "intact: 4 records in 1 session(s)")) {
					t.Errorf("verify --session of session %d: exit %d\n%s", i, code, out)
				}
			}
			if out, code := verify("--session", "nope"); code != 1 || !strings.Contains(out, `no session "nope"`) {
				t.Errorf("an unknown session: exit %d\n%s", code, out)
			}
		})
	}
}

// audit verify refuses a command line it cannot run, saying why.
func TestAuditVerifyUsage(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{
		{},
		{"log.jsonl", "--db", db},
		{"--db", db, "--all", "--session", "x"},
		{"--session", "x"},
		{"--all", "log.jsonl"},
		{"--db", ""},
		{"a.jsonl", "b.jsonl"},
	} {
		if out, errOut, code := run(t, "", append([]string{"audit", "verify"}, args...)...); code != 2 || errOut == "" {
			t.Errorf("audit verify %q: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}
