package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
	"github.com/agentplane/agentplane/store"
)

// audit runs `agentplane audit verify` and `agentplane audit export`.
func (m *Main) audit(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "export" {
		return m.auditExport(ctx, args[1:])
	}
	if len(args) == 0 || args[0] != "verify" {
		return usagef("audit verify FILE | audit verify --db DB [--all | --session ID] | audit export [--db DB] --session ID")
	}
	fs := m.flags("audit verify", "FILE | --db DB [--all | --session ID]")
	var db string
	fs.Var(dbValue{&db}, "db", "check the chains stored in the database `DB` (a SQLite file or a postgres:// URL) instead of a file")
	all := fs.Bool("all", false, "with --db: every session's chain (the default)")
	session := fs.String("session", "", "with --db: this session's chain only")
	if err := parse(fs, args[1:], 0, 1); err != nil {
		return err
	}
	switch {
	case db == "" && fs.NArg() == 0:
		return usagef("audit verify needs a FILE of JSON Lines or --db DB")
	case db != "" && fs.NArg() > 0:
		return usagef("audit verify takes a FILE or --db DB, not both")
	case db == "" && (*all || *session != ""):
		return usagef("--all and --session go with --db")
	case *all && *session != "":
		return usagef("--all or --session ID, not both")
	case db != "":
		return m.auditVerifyDB(ctx, db, *session)
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

// auditVerifyDB checks the chains stored in a database — one session's,
// or every session's — with the store's verification (the server's),
// and prints the first bad record of each chain that breaks; any broken
// or unreadable chain is exit status 1. A SQLite file is opened
// read-only.
func (m *Main) auditVerifyDB(ctx context.Context, db, session string) error {
	st, err := drivers.Open(ctx, db, &plane.StoreOptions{ReadOnly: !plane.IsPostgres(db)})
	if err != nil {
		return err
	}
	defer st.Close()
	ids := []string{session}
	if session == "" {
		if ids, err = store.SessionIDs(ctx, st); err != nil {
			return err
		}
	}
	records, bad := 0, 0
	for _, id := range ids {
		v, err := store.Verify(ctx, st, id)
		switch {
		case err != nil:
			bad++
			fmt.Fprintf(m.Stdout, "session %s: unreadable: %v\n", id, err)
		case v.Records == 0 && session != "" && agentplane.ErrorCode(sessionErr(ctx, st, id)) == agentplane.CodeNotFound:
			return fmt.Errorf("no session %q in %s", session, plane.Shown(db))
		case v.FirstBad != nil:
			bad++
			fmt.Fprintf(m.Stdout, "session %s: broken at record %d (seq %d): %s\n", id, v.FirstBad.Index+1, v.FirstBad.Seq, v.FirstBad.Reason)
		}
		records += v.Records
	}
	if bad > 0 {
		fmt.Fprintf(m.Stdout, "%s: %d of %d session(s) broken (%d records read)\n", plane.Shown(db), bad, len(ids), records)
		return exitCode(1)
	}
	fmt.Fprintf(m.Stdout, "%s: intact: %d records in %d session(s)\n", plane.Shown(db), records, len(ids))
	return nil
}

// sessionErr is the error of reading a session, nil when it is there.
func sessionErr(ctx context.Context, st store.Store, id string) error {
	_, err := st.Session(ctx, id)
	return err
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
	st, err := drivers.Open(ctx, c.db, &plane.StoreOptions{ReadOnly: !plane.IsPostgres(c.db)})
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
