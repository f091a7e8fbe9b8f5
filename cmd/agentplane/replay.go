package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
	"github.com/agentplane/agentplane/replay"
	"github.com/agentplane/agentplane/store"
)

// replay runs `agentplane replay [--config FILE] [--db DB] LOG`: each
// record on the configuration it names, found in DB, unless --config says
// which one to replay every record on.
func (m *Main) replay(ctx context.Context, args []string) error {
	fs := m.flags("replay", "[--config FILE] [--db DB] LOG.jsonl")
	c := m.commonFlags(fs, false)
	db := fs.String("db", "", "the database `DB` that keeps the configurations the records name (a SQLite file or a postgres:// URL); read only")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	fixed := false
	fs.Visit(func(f *flag.Flag) { fixed = fixed || f.Name == "config" })
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	rt, err := m.open(ctx, c, plane.Options{})
	if err != nil {
		return err
	}
	defer rt.Close(0)
	opts := &replay.Options{Fixed: fixed}
	if *db != "" && !fixed {
		st, err := drivers.Open(ctx, *db, &plane.StoreOptions{ReadOnly: !plane.IsPostgres(*db)})
		if err != nil {
			return err
		}
		defer st.Close()
		cs, ok := st.(store.Configs)
		if !ok {
			return fmt.Errorf("replay: %s keeps no configurations", plane.Shown(*db))
		}
		opts.Configs = func(ctx context.Context, digest string) (*config.Config, bool, error) {
			body, ok, err := cs.Config(ctx, digest)
			if err != nil || !ok {
				return nil, false, err
			}
			cfg, err := config.FromCanonical(body)
			return cfg, err == nil, err
		}
	}
	n, err := replay.Run(ctx, rt.Core, f, m.Stdout, opts)
	if err != nil {
		return err
	}
	if n > 0 {
		fmt.Fprintf(m.Stdout, "%d divergence(s)\n", n)
		return exitCode(1)
	}
	fmt.Fprintf(m.Stdout, "%s: replayed without divergence\n", fs.Arg(0))
	return nil
}
