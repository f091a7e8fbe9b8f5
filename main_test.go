package agentplane_test

import (
	"os"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/testenv"
)

// TestMain tells the person running go test ./... which test suites the
// machine cannot run (no PostgreSQL, no browser) and how to run them: one
// line, from this package only.
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Announce()
	os.Exit(code)
}
