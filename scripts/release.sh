#!/usr/bin/env bash
# A reproducible release build of agentplane: the binary for linux and
# darwin on amd64 and arm64, each in a tar.gz whose bytes depend only on the
# commit (the Go toolchain's builds are reproducible with -trimpath; the
# archives have fixed owners, order and times), and SHA-256 checksums of
# them. Run from a clean checkout: a modified tree is stamped "modified" in
# the binaries' build info. Output: dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
stamp=$(git log -1 --format=%ct 2>/dev/null || echo 0) # the commit's time, for the archives' files
stamp_flags=$(bash scripts/ldflags.sh) # the version the binaries print, wherever Go's own stamping cannot see the repository
out=dist
rm -rf "$out"
mkdir -p "$out"

for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  goos=${target%/*}; goarch=${target#*/}
  name="agentplane_${version}_${goos}_${goarch}"
  dir="$out/$name"
  mkdir -p "$dir"
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -buildvcs=true \
    -ldflags="-s -w -buildid= $stamp_flags" -o "$dir/agentplane" ./cmd/agentplane
  cp LICENSE README.md "$dir/"
  tar --sort=name --mtime="@$stamp" --owner=0 --group=0 --numeric-owner --mode='u+rwX,go+rX,go-w' \
    -C "$out" -cf - "$name" | gzip -n -9 > "$out/$name.tar.gz"
  rm -rf "$dir"
  echo "built $out/$name.tar.gz"
done
(cd "$out" && sha256sum ./*.tar.gz | sed 's# \./# #' > checksums.txt)
cat "$out/checksums.txt"
