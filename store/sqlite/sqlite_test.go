package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
