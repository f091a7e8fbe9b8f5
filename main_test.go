package agentplane_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentplane/agentplane/internal/testkit/testenv"
)

// TestMain tells the person running go test ./... which test suites the
// machine cannot run (no PostgreSQL, no browser) and how to run them: one
// line, from this package only.
func TestMain(m *testing.M) {
	// fails the tests when a goroutine they started is still running after them
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testenv.Announce()
		os.Exit(code)
	}))
}
