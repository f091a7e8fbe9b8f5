// Command skipped prints the one line naming the test suites this machine
// cannot run (no PostgreSQL, no browser, no Python) and how to run them —
// what the root package's tests print on a terminal, here for where that
// line is lost: a cached run, or output written to a file. `make test`
// and .ci/run run it after the tests:
//
//	go run ./internal/testkit/testenv/skipped      # the line, or nothing
//	go run ./internal/testkit/testenv/skipped -v   # or "no test suite was skipped"
package main

import (
	"flag"
	"fmt"

	"github.com/agentplane/agentplane/internal/testkit/testenv"
)

func main() {
	verbose := flag.Bool("v", false, "say so when no suite was skipped")
	flag.Parse()
	switch line := testenv.Line(); {
	case line != "":
		fmt.Println(line)
	case *verbose:
		fmt.Println("agentplane: no test suite was skipped")
	}
}
