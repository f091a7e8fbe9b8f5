#!/usr/bin/env bash
# Prints the -X linker flags that stamp a build of agentplane with its
# version (git describe --tags --always --dirty), commit, commit time and
# whether the tree was modified (package internal/version), for `make
# build`, scripts/release.sh and scripts/image.sh. Go stamps a plain `go
# build` in a git clone itself; these flags also stamp builds where it
# cannot: a git worktree, GOFLAGS=-buildvcs=false. Prints nothing outside
# a git checkout (the build then says what Go stamped, or "(devel)").
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse --git-dir >/dev/null 2>&1 || exit 0
pkg=github.com/agentplane/agentplane/internal/version
describe=$(git describe --tags --always --dirty)
commit=$(git rev-parse HEAD)
when=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
modified=false
if [ -n "$(git status --porcelain)" ]; then modified=true; fi
printf -- '-X %s.stampedVersion=%s -X %s.stampedCommit=%s -X %s.stampedTime=%s -X %s.stampedModified=%s\n' \
  "$pkg" "$describe" "$pkg" "$commit" "$pkg" "$when" "$pkg" "$modified"
