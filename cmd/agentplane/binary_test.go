package main

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

// The tests that run the binary share its builds, made the first time a
// test asks: the plain one, and for the hostile-client suite one with the
// race detector when the tests run with it.
type build struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

var (
	builds   struct{ plain, race build }
	buildDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	// the default transport's idle keep-alive connections (http.Get and
	// clients without a transport of their own) are the client's, not
	// goroutines a test left running: a balancer that drains on stop may
	// hold its end open; closed first, so the check sees only real leaks
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	// fails the tests when a goroutine they started is still running after them
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			// every goroutine's stack in full: run with
			// GODEBUG=tracebackancestors=5 and each shows the stacks that
			// created it, down to the test (a connection's loops are made
			// by the transport, not by the test that asked)
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			code = 1
		}
	}
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildBinary returns the path of the agentplane binary built from this
// package.
func buildBinary(t testing.TB) string { return builds.plain.get(t, false) }

// buildRaceBinary is buildBinary with the race detector when the tests
// have it (go test -race).
func buildRaceBinary(t testing.TB) string { return builds.race.get(t, raceEnabled) }

var dirOnce sync.Once

func (b *build) get(t testing.TB, race bool) string {
	t.Helper()
	b.once.Do(func() {
		dirOnce.Do(func() { buildDir, b.err = os.MkdirTemp("", "agentplane-bin-") })
		if buildDir == "" {
			return
		}
		b.path = filepath.Join(buildDir, "agentplane")
		args := []string{"build", "-o"}
		if race {
			b.path += "-race"
			args = append(args, b.path, "-race", ".")
		} else {
			args = append(args, b.path, ".")
		}
		b.out, b.err = exec.Command("go", args...).CombinedOutput()
	})
	if b.err != nil || b.path == "" {
		t.Fatalf("build: %v\n%s", b.err, b.out)
	}
	return b.path
}
