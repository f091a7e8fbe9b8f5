// Package testenv says which of the test suites that need something
// outside Go — a PostgreSQL server, a Chromium browser, a Python
// interpreter — can run here, and tells the person running `go test ./...`
// which were skipped and how to run them. Where the environment asks for a
// suite (AGENTPLANE_REQUIRE_POSTGRES, AGENTPLANE_REQUIRE_BROWSER,
// AGENTPLANE_REQUIRE_PYTHON; .ci/run sets them all), its absence fails the
// tests that need it instead.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The variables that enable and require the suites.
const (
	PostgresVar        = "AGENTPLANE_TEST_POSTGRES"
	RequirePostgresVar = "AGENTPLANE_REQUIRE_POSTGRES"
	RequireBrowserVar  = "AGENTPLANE_REQUIRE_BROWSER"
	RequirePythonVar   = "AGENTPLANE_REQUIRE_PYTHON"
)

// Postgres returns the PostgreSQL URL the tests use, or why there is none
// (the variable is unset, or the server does not answer). It asks the
// server once per test binary.
func Postgres() (url string, why string) {
	postgres.once.Do(func() { postgres.url, postgres.why = findPostgres() })
	return postgres.url, postgres.why
}

var postgres struct {
	once     sync.Once
	url, why string
}

func findPostgres() (url string, why string) {
	url = os.Getenv(PostgresVar)
	if url == "" {
		return "", PostgresVar + " is not set"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", fmt.Sprintf("PostgreSQL at %s is not reachable: %v", PostgresVar, err)
	}
	conn.Close(ctx)
	return url, ""
}

// Browser returns the Chromium (or Chrome) executable on PATH, or "".
func Browser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Python returns the Python 3 interpreter on PATH, or "".
func Python() string {
	if p, err := exec.LookPath("python3"); err == nil {
		return p
	}
	return ""
}

// Skipped names the suites that cannot run here, each with how to run
// it.
func Skipped() []string {
	var out []string
	if _, why := Postgres(); why != "" {
		out = append(out, "PostgreSQL ("+why+"; set "+PostgresVar+"=postgres://USER@HOST:5432/DB?sslmode=disable)")
	}
	if Browser() == "" {
		out = append(out, "the web page in a browser (no chromium on PATH; apt-get install chromium)")
	}
	if Python() == "" {
		out = append(out, "the Python tool service example (no python3 on PATH; apt-get install python3)")
	}
	return out
}

// Line is the one line that names the suites skipped here and how to run
// them; "" when none is.
func Line() string {
	skipped := Skipped()
	if len(skipped) == 0 {
		return ""
	}
	return "agentplane: these test suites were skipped: " + strings.Join(skipped, "; ")
}

// Announce tells the person running `go test ./...` — on the go
// command's own standard error, which a passing package's output never
// reaches — which suites are skipped, in one line. It says nothing when
// none is, when the tests were not started by the go command (Linux
// only: elsewhere it says nothing), or when that standard error is a
// file: the go command writes a file at its own offset, over a line
// appended beside it. A cached run does not run it at all: `make test`
// and .ci/run print Line after the tests (go run ./internal/testkit/testenv/skipped).
func Announce() {
	line := Line()
	if line == "" {
		return
	}
	ppid := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return
	}
	stderr := fmt.Sprintf("/proc/%d/fd/2", ppid)
	if fi, err := os.Stat(stderr); err != nil || fi.Mode().IsRegular() {
		return
	}
	f, err := os.OpenFile(stderr, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
