package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVersionOfABuild: what `agentplane version` prints for a build of a
// tagged git checkout — a plain `go build` (the Go toolchain stamps it
// from version control) and `make build` on a modified tree where Go's
// stamping is off (GOFLAGS=-buildvcs=false, as in a git worktree, which
// Go does not see): the tag, the commit, its time, and whether the tree
// was modified; never "(devel)".
func TestVersionOfABuild(t *testing.T) {
	if testing.Short() {
		t.Skip("copies the module into a new git repository and builds it twice")
	}
	t.Parallel() // it waits on processes of its own most of the time
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH")
	}
	files, err := exec.Command(git, "-C", "../..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("the module is not a git checkout: %v", err)
	}
	src := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		raw, err := os.ReadFile(filepath.Join("../..", f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(src, f)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := os.WriteFile(dst, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z"}
	sh := func(extra []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = src
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOFLAGS=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(append(cmd.Env, env...), extra...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sh(nil, git, "init", "-q")
	sh(nil, git, "add", "-A")
	sh(nil, git, "commit", "-q", "-m", "a release")
	sh(nil, git, "tag", "v1.2.3")
	commit := sh(nil, git, "rev-parse", "HEAD")[:12]

	// a plain go build, with Go's default stamping (auto: this machine's
	// go env may turn it off)
	bin := filepath.Join(t.TempDir(), "agentplane")
	sh([]string{"GOFLAGS=-buildvcs=auto"}, "go", "build", "-o", bin, "./cmd/agentplane")
	got := sh(nil, bin, "version")
	if want := `^agentplane v1\.2\.3 \(commit ` + commit + `, 2026-01-02T03:04:05Z\) go\S+$`; !regexp.MustCompile(want).MatchString(got) {
		t.Errorf("a plain go build says %q, want %s", got, want)
	}

	// make build of a modified tree, with Go's stamping off
	os.WriteFile(filepath.Join(src, "README.md"), []byte("changed\n"), 0o644)
	if make, err := exec.LookPath("make"); err == nil {
		sh([]string{"GOFLAGS=-buildvcs=false"}, make, "build")
	} else {
		sh([]string{"GOFLAGS=-buildvcs=false"}, "go", "build", "-ldflags", sh(nil, "bash", "scripts/ldflags.sh"), "-o", "agentplane", "./cmd/agentplane")
	}
	got = sh(nil, filepath.Join(src, "agentplane"), "version")
	if want := `^agentplane v1\.2\.3-dirty \(commit ` + commit + `, modified, 2026-01-02T03:04:05Z\) go\S+$`; !regexp.MustCompile(want).MatchString(got) {
		t.Errorf("make build with -buildvcs=false says %q, want %s", got, want)
	}
}
