package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/notify"
	"github.com/agentplane/agentplane/store"
	"github.com/agentplane/agentplane/workflow"
)

// subtractive finds a statement that takes away what a binary built
// before it may still use: a table, an index, a trigger, a function, a
// column or a constraint dropped, a table or a column renamed.
var subtractive = regexp.MustCompile(`(?i)\b(DROP\s+(TABLE|INDEX|TRIGGER|FUNCTION|COLUMN|CONSTRAINT)|RENAME\s+(TO|COLUMN))\b`)

// migration is one migration of the core schema or an extension's, as
// docs/operations.md names it: "core 3", "workflow 8".
type migration struct {
	name, dialect, body string
}

// migrations lists every migration the binary carries, per dialect.
func migrations(t *testing.T) []migration {
	t.Helper()
	var out []migration
	for dialect, dir := range map[string]string{store.SQLite: "../store/sqlite/migrations", store.Postgres: "../store/postgres/migrations"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v (%d files)", dir, err, len(files))
		}
		for _, f := range files {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			fmt.Sscanf(filepath.Base(f), "%d_", &n)
			out = append(out, migration{fmt.Sprintf("core %d", n), dialect, string(body)})
		}
	}
	for _, ext := range []store.Extension{workflow.Extension, notify.Extension} {
		for dialect, steps := range ext.Migrations {
			for i, body := range steps {
				out = append(out, migration{fmt.Sprintf("%s %d", ext.Name, i+1), dialect, body})
			}
		}
	}
	return out
}

// TestUpgradesNameEveryMigrationThatTakesAway: an instance already
// running keeps working on a schema migrated under it only while the
// migrations add; docs/operations.md's Upgrades section names each
// migration that takes something away (subtractive), so an operator
// knows when the old instances must stop before the new binary opens the
// database — and names no other.
func TestUpgradesNameEveryMigrationThatTakesAway(t *testing.T) {
	page, err := os.ReadFile("operations.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(page)
	start := strings.Index(section, "\n## Upgrades\n")
	if start < 0 {
		t.Fatal("operations.md has no Upgrades section")
	}
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:core|workflow|notify) \\d+)`").FindAllStringSubmatch(section, -1) {
		named[m[1]] = true
	}
	takes := map[string][]string{} // name -> what it takes away, per dialect
	for _, m := range migrations(t) {
		if what := subtractive.FindAllString(m.body, -1); what != nil {
			takes[m.name] = append(takes[m.name], m.dialect+": "+strings.Join(what, ", "))
		}
	}
	for name, what := range takes {
		if !named[name] {
			t.Errorf("migration %s takes something away (%s), and the Upgrades section does not name it (`%s`)", name, strings.Join(what, "; "), name)
		}
	}
	for name := range named {
		if takes[name] == nil {
			t.Errorf("the Upgrades section names `%s`, which takes nothing away", name)
		}
	}
}
