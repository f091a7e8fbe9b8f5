package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentplane/agentplane/audit"
)

// audit runs `agentplane audit verify FILE` and `agentplane audit export`.
func (m *Main) audit(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "export" {
		return m.auditExport(ctx, args[1:])
	}
	if len(args) != 2 || args[0] != "verify" {
		fmt.Fprintln(m.Stderr, "usage: agentplane audit verify FILE\n       agentplane audit export [--db DB] --session ID")
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
	if sum.Records == 0 {
		fmt.Fprintf(m.Stdout, "%s: empty: no records to verify\n", args[1])
		return 1
	}
	fmt.Fprintf(m.Stdout, "%s: intact: %d records in %d sessions\n", args[1], sum.Records, sum.Sessions)
	return 0
}

// auditExport writes a stored session's chain as JSON Lines, each record
// exactly as stored (and so as hashed). It opens the database read-only.
func (m *Main) auditExport(ctx context.Context, args []string) int {
	fs := m.flags("audit export")
	db := m.dbFlag(fs)
	session := fs.String("session", "", "the session to export")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *session == "" {
		fmt.Fprintln(m.Stderr, "agentplane: audit export needs --session ID")
		return 2
	}
	st, ok := m.openStore(ctx, *db, true)
	if !ok {
		return 1
	}
	defer st.Close()
	recs, err := st.Records(ctx, *session, 0)
	if err != nil {
		fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
		return 1
	}
	if len(recs) == 0 {
		fmt.Fprintf(m.Stderr, "agentplane: no session %q in %s\n", *session, shownDB(*db))
		return 1
	}
	for _, r := range recs {
		if _, err := fmt.Fprintf(m.Stdout, "%s\n", r.Raw); err != nil {
			fmt.Fprintf(m.Stderr, "agentplane: %v\n", err)
			return 1
		}
	}
	return 0
}
