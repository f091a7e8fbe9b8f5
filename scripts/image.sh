#!/usr/bin/env bash
# Builds the container image (Containerfile: FROM scratch) with buildah and
# smoke-tests it: the binary runs, and serve answers a turn with a keyed
# configuration. Writes dist/agentplane-image.tar (an OCI archive: podman
# load -i, or skopeo copy to a registry). Needs buildah (apt-get install
# buildah); runs without a daemon (vfs storage, chroot isolation).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v buildah >/dev/null || { echo "image: buildah is not installed (apt-get install buildah)"; exit 1; }
b() { buildah --storage-driver vfs "$@"; }
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# stamped with its version as a release is (scripts/ldflags.sh)
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags="-s -w -buildid= $(bash scripts/ldflags.sh)" -o "$ctx/agentplane" ./cmd/agentplane
cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
mkdir "$ctx/data"
tag=localhost/agentplane:$(git describe --tags --always --dirty 2>/dev/null || echo dev)
b bud --isolation chroot -q -t "$tag" -f Containerfile "$ctx" >/dev/null
echo "image: built $tag"

# smoke test: the binary, then serve with API keys answering a turn
c=$(b from "$tag")
trap 'b rm "$c" >/dev/null 2>&1 || true; rm -rf "$ctx"' EXIT
v=$(b run --isolation chroot "$c" /agentplane version)
echo "$v"
case "$v" in *"(devel)"*) echo "image: the binary is not stamped with its version"; exit 1 ;; esac
cat > "$ctx/keys.yaml" <<'YAML'
version: 1
modes:
  - {key: general, display_name: General, default: true, toolboxes: [core]}
  - {key: ddr, display_name: DDR, toolboxes: [core]}
toolboxes:
  - {id: core, catalogs: [modes], commands: [set_mode]}
commands:
  - {id: set_mode, tool: agent_set_mode, parameter: mode, resolver: {catalog: modes}, sets_session_mode: true, triggers: ["switch to {item} mode"]}
auth:
  keys:
    - {user_id: smoke, key_env: SMOKE_KEY}
YAML
b copy "$c" "$ctx/keys.yaml" /data/keys.yaml >/dev/null
port=$((20000 + RANDOM % 20000))
b run --isolation chroot --env SMOKE_KEY=smoke-key-0123456789abcdef "$c" \
  /agentplane serve --config /data/keys.yaml --addr "127.0.0.1:$port" >"$ctx/serve.out" 2>"$ctx/serve.err" &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
auth='Authorization: Bearer smoke-key-0123456789abcdef'
sid=$(curl -sf -H "$auth" -H 'Content-Type: application/json' -d '{}' "http://127.0.0.1:$port/v1/sessions" | sed -E 's/.*"session_id":"([^"]+)".*/\1/')
curl -sf -H "$auth" -H 'Content-Type: application/json' -d '{"text":"switch to ddr mode"}' "http://127.0.0.1:$port/v1/sessions/$sid/turns" | grep -q '"mode":"ddr"'
# buildah does not pass a signal on to what it runs: stop serve itself,
# found among the processes this script started (buildah's descendants),
# never by a name another user's process could have
descendants() { local c; for c in $(pgrep -P "$1" || true); do echo "$c"; descendants "$c"; done; }
for p in $(descendants "$pid"); do
  if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = agentplane ]; then kill -TERM "$p" 2>/dev/null || true; fi
done
wait "$pid" 2>/dev/null || true
grep -q "agentplane: stopped" "$ctx/serve.out" || { echo "image: serve did not stop cleanly"; cat "$ctx/serve.out" "$ctx/serve.err"; exit 1; }
echo "image: serve in the image answered a turn (session $sid)"
mkdir -p dist
rm -f dist/agentplane-image.tar
b push -q "$tag" "oci-archive:dist/agentplane-image.tar:$tag" >/dev/null
ls -l dist/agentplane-image.tar
