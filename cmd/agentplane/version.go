package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

// version is `agentplane version`: the module's version, the commit it
// was built from and the Go version, from the binary's build info.
func (m *Main) version(_ context.Context, args []string) error {
	fs := m.flags("version", "")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, versionLine())
	return nil
}

// versionLine is what version prints: agentplane VERSION (commit C[,
// modified], TIME) GO.
func versionLine() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "agentplane (no build information)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var commit, when, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	line := "agentplane " + v
	if commit != "" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		line += fmt.Sprintf(" (commit %s%s, %s)", commit, dirty, when)
	}
	return line + " " + info.GoVersion
}
