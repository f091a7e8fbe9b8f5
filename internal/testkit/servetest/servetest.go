// Package servetest runs the agentplane binary for the tests that drive it
// as a user's process would: it builds the binary once per test process
// (with the race detector too, where the tests have it), starts serve on a
// loopback port, talks to it over HTTP, keeps a fleet of instances to kill
// and restart, and is the service their external tools act on.
package servetest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// command is the package the binary is built from.
const command = "github.com/agentplane/agentplane/cmd/agentplane"

// The builds the tests of one process share, made the first time a test
// asks: the plain one and the one with the race detector.
type build struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

var (
	builds   struct{ plain, race build }
	dirOnce  sync.Once
	buildDir string
	dirErr   error
)

// Main runs a package's tests for its TestMain and returns the exit code:
// it fails them when a goroutine they started still runs after them, and
// removes the binaries built.
func Main(m *testing.M) int {
	code := m.Run()
	// the default transport's idle keep-alive connections (http.Get and
	// clients without a transport of their own) are the client's, not
	// goroutines a test left running: a balancer that drains on stop may
	// hold its end open; closed first, so the check sees only real leaks
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			// every goroutine's stack in full: run with
			// GODEBUG=tracebackancestors=5 and each shows the stacks that
			// created it, down to the test
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			code = 1
		}
	}
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	return code
}

// Binary returns the path of the agentplane binary, built once per test
// process (a package's TestMain calls Main, which removes it).
func Binary(t testing.TB) string { return builds.plain.get(t, false) }

// RaceBinary is Binary with the race detector when the tests have it
// (go test -race), Binary itself when they do not.
func RaceBinary(t testing.TB) string {
	if !raceEnabled {
		return Binary(t)
	}
	return builds.race.get(t, true)
}

func (b *build) get(t testing.TB, race bool) string {
	t.Helper()
	b.once.Do(func() {
		dirOnce.Do(func() { buildDir, dirErr = os.MkdirTemp("", "agentplane-bin-") })
		if dirErr != nil {
			b.err = dirErr
			return
		}
		b.path = filepath.Join(buildDir, "agentplane")
		args := []string{"build", "-o"}
		if race {
			b.path += "-race"
			args = append(args, b.path, "-race", command)
		} else {
			args = append(args, b.path, command)
		}
		b.out, b.err = exec.Command("go", args...).CombinedOutput()
	})
	if b.err != nil || b.path == "" {
		t.Fatalf("build: %v\n%s", b.err, b.out)
	}
	return b.path
}
