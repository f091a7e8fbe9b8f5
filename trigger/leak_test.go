package trigger_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started is
// still running after them: every goroutine has an owner that waits for it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
