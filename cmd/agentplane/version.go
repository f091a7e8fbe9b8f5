package main

import (
	"context"
	"fmt"

	"github.com/agentplane/agentplane/internal/version"
)

// version is `agentplane version`: the version, the commit it was built
// from and the Go version (see package version for where they come from).
func (m *Main) version(_ context.Context, args []string) error {
	fs := m.flags("version", "")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, version.Line())
	return nil
}
