package drivers_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func demoSource() core.Source { return core.Source{YAML: demo.YAML, Name: demo.Name} }

// TestOpenStoreFailsWithNoStore: a store that cannot be opened is a nil
// Store with the error, never a nil pointer inside one (which a caller
// closing what it opened would call).
func TestOpenStoreFailsWithNoStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	bad := filepath.Join(file, "a.db") // under a file: cannot be made
	for _, db := range []string{bad, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"} {
		st, err := drivers.Open(context.Background(), db, nil)
		if err == nil || st != nil {
			t.Errorf("%s: %v, %#v", db, err, st)
		}
	}
	if _, err := plane.Open(context.Background(), plane.Options{Config: demoSource(), DB: bad, OpenStore: drivers.Open}); err == nil {
		t.Error("opened a runtime on a store that cannot be opened")
	}
}
