package main

import (
	"strings"
	"testing"
)

// Every command that keeps anything refuses an empty --db, saying what it
// wants (it once kept everything in memory, and lost it, unasked).
func TestEmptyDBIsRefused(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"serve"}, {"chat"}, {"mcp"},
		{"audit", "export", "--session", "x"}, {"audit", "verify"},
		{"notify", "list", "--user", "u"}, {"notify", "dead"},
		{"workflow", "status", "w"}, {"workflow", "abort", "--reason", "r", "w"},
	} {
		for _, db := range []string{"", " "} {
			_, errOut, code := run(t, "", append(args, "--db", db)...)
			if code != 2 || !strings.Contains(errOut, "want a SQLite file or a postgres:// URL") {
				t.Errorf("%q --db %q: exit %d\n%s", args, db, code, errOut)
			}
		}
	}
}
