package httpapi_test

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started is
// still running after them: every goroutine has an owner that waits for
// it. The default transport's idle connections (of clients the tests and
// the SDKs build on it) are closed first: they are a pool the process
// shares, not goroutines a test left running.
func TestMain(m *testing.M) {
	code := m.Run()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines left running after the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}
