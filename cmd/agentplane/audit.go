package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/plane"
)

// audit runs `agentplane audit verify FILE` and `agentplane audit export`.
func (m *Main) audit(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "export" {
		return m.auditExport(ctx, args[1:])
	}
	if len(args) == 0 || args[0] != "verify" {
		return usagef("audit verify FILE | audit export [--db DB] --session ID")
	}
	fs := m.flags("audit verify", "FILE")
	if err := parse(fs, args[1:], 1, 1); err != nil {
		return err
	}
	file := fs.Arg(0)
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sum, err := audit.VerifyJSONL(f)
	if err != nil {
		fmt.Fprintf(m.Stdout, "%s: broken: %v\n", file, err)
		return exitCode(1)
	}
	if sum.Records == 0 {
		fmt.Fprintf(m.Stdout, "%s: empty: no records to verify\n", file)
		return exitCode(1)
	}
	fmt.Fprintf(m.Stdout, "%s: intact: %d records in %d sessions\n", file, sum.Records, sum.Sessions)
	return nil
}

// auditExport writes a stored session's chain as JSON Lines, each record
// exactly as stored (and so as hashed). It opens a SQLite database
// read-only.
func (m *Main) auditExport(ctx context.Context, args []string) error {
	fs := m.flags("audit export", "[--db DB] --session ID")
	c := m.dbFlag(fs, true)
	session := fs.String("session", "", "the session to export")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *session == "" {
		return usagef("audit export needs --session ID")
	}
	st, err := plane.OpenStore(ctx, c.db, &plane.StoreOptions{ReadOnly: !plane.IsPostgres(c.db)})
	if err != nil {
		return err
	}
	defer st.Close()
	recs, err := st.Records(ctx, *session, 0)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("no session %q in %s", *session, plane.Shown(c.db))
	}
	for _, r := range recs {
		if _, err := fmt.Fprintf(m.Stdout, "%s\n", r.Raw); err != nil {
			return err
		}
	}
	return nil
}
