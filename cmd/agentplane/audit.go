package main

import (
	"fmt"
	"os"

	"github.com/agentplane/agentplane/audit"
)

// audit runs `agentplane audit verify FILE`.
func (m *Main) audit(args []string) int {
	if len(args) != 2 || args[0] != "verify" {
		fmt.Fprintln(m.Stderr, "usage: agentplane audit verify FILE")
		return 2
	}
	f, err := os.Open(args[1])
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	defer f.Close()
	sum, err := audit.VerifyJSONL(f)
	if err != nil {
		fmt.Fprintf(m.Stdout, "%s: broken: %v\n", args[1], err)
		return 1
	}
	fmt.Fprintf(m.Stdout, "%s: intact: %d records in %d sessions\n", args[1], sum.Records, sum.Sessions)
	return 0
}
