// Package version says which build of agentplane is running: the version
// and commit stamped at link time by `make build`, `make release` and
// `make image` (scripts/ldflags.sh: git describe, the commit, its time and
// whether the tree was modified), else what the Go toolchain stamped from
// version control (a plain `go build` or `go install` in a git clone),
// else "(devel)".
//
//	fmt.Println(version.Line()) // agentplane v1.2.0 (commit 3f72ee7025dd, 2026-11-27T05:48:01Z) go1.26.8
package version

import (
	"fmt"
	"runtime/debug"
)

// Set at link time (scripts/ldflags.sh); empty in a plain go build.
var (
	stampedVersion  string // git describe --tags --always --dirty
	stampedCommit   string // the full commit hash
	stampedTime     string // the commit's time, RFC 3339
	stampedModified string // "true" when the tree had changes
)

// Info is what a build says of itself.
type Info struct {
	Version  string // a tag, a Go pseudo-version, git describe's name, or "(devel)"
	Commit   string // the full commit hash, "" when unknown
	Time     string // the commit's time, RFC 3339, "" when unknown
	Modified bool   // the tree had changes the commit does not hold
	Go       string // the Go version that built it
}

// Get returns this build's information.
func Get() Info {
	info, ok := debug.ReadBuildInfo()
	var out Info
	if ok {
		out.Version, out.Go = info.Main.Version, info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				out.Commit = s.Value
			case "vcs.time":
				out.Time = s.Value
			case "vcs.modified":
				out.Modified = s.Value == "true"
			}
		}
	}
	if stampedVersion != "" {
		out.Version, out.Commit, out.Time, out.Modified = stampedVersion, stampedCommit, stampedTime, stampedModified == "true"
	}
	if out.Version == "" {
		out.Version = "(devel)"
	}
	return out
}

// Version is this build's version.
func Version() string { return Get().Version }

// Line is what `agentplane version` prints: agentplane VERSION (commit
// C[, modified], TIME) GO.
func Line() string {
	i := Get()
	line := "agentplane " + i.Version
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		dirty := ""
		if i.Modified {
			dirty = ", modified"
		}
		line += fmt.Sprintf(" (commit %s%s, %s)", c, dirty, i.Time)
	}
	if i.Go != "" {
		line += " " + i.Go
	}
	return line
}
