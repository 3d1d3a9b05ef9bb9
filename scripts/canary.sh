#!/usr/bin/env bash
# Canary: run the built server image as the platform does and check its contract from outside.
#
#   scripts/canary.sh [IMAGE]        (default localhost/hypertrain-server:latest)
#
# It starts the image with a fresh state directory, fake platform tokens and a file
# metagraph, then checks over HTTP: health and version answer; get_weights is 401 without
# the internal token and 403 without the slug header, answers within the time limit with
# both, and its first answer for an epoch comes back byte for byte after a restart of the
# container; inside, the root filesystem is read-only, /data is writable and the process
# runs as UID 65532. Last, the relay starts from the same image and answers /healthz.
# Nothing leaves the machine (the beacon URL points at a closed port).
#
# Environment: PODMAN (default podman), CANARY_PORT (default: a free port), CANARY_NETWORK
# (bridge, the default, publishes the port on 127.0.0.1; host shares the host's network),
# CANARY_TIMEOUT_S (the platform's get_weights limit, default 60), CONTAINERS_CONF (default
# docker/containers.conf, a workaround for restricted hosts).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$repo/docker/containers.conf}"
PODMAN="${PODMAN:-podman}"
image="${1:-localhost/hypertrain-server:latest}"
network="${CANARY_NETWORK:-bridge}"
limit="${CANARY_TIMEOUT_S:-60}"
slug="hypertrain"
epoch=7
uid=65532

fail() { printf 'canary: FAIL %s\n' "$*" >&2; "$PODMAN" logs --tail 40 "$name" >&2 2>/dev/null || true; exit 1; }
pass() { printf 'canary: ok   %s\n' "$*"; }

command -v curl >/dev/null || { echo "canary: curl is required" >&2; exit 2; }
"$PODMAN" image exists "$image" || { echo "canary: no image $image (run make images)" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/hypertrain-canary.XXXXXX")"
service="hypertrain-canary-$$"
relay="$service-relay"
name="$service"  # the container fail() shows the logs of
cleanup() {
  local c
  for c in "$service" "$relay"; do "$PODMAN" rm -f -t 5 "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Fresh state and fake platform secrets, as files of mode 0600 owned by the service's UID.
mkdir -p "$work/data" "$work/secrets" "$work/config" "$work/relay"
for token in internal admin worker; do
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/secrets/$token.token"
done
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/secrets/coord.key"
chmod 0600 "$work/secrets"/*
chmod 0700 "$work/data" "$work/secrets"
cat > "$work/config/metagraph.json" <<'JSON'
{"epoch": 1, "block": 100, "netuid": 100,
 "hotkeys": {"5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY": 0,
             "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty": 1}}
JSON
if [[ "$(id -u)" == 0 ]]; then
  chown -R "$uid:$uid" "$work/data" "$work/secrets" "$work/relay"
else
  "$PODMAN" unshare chown -R "$uid:$uid" "$work/data" "$work/secrets" "$work/relay"
fi
internal="$(cat "$work/secrets/internal.token" 2>/dev/null || "$PODMAN" unshare cat "$work/secrets/internal.token")"

port="${CANARY_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
if [[ "$network" == host ]]; then
  net_args=(--network host); serve_args=(challenge serve --host 127.0.0.1 --port "$port")
else
  net_args=(-p "127.0.0.1:$port:8000"); serve_args=()
fi
base="http://127.0.0.1:$port"

"$PODMAN" run -d --name "$name" \
  --read-only --read-only-tmpfs=false --user "$uid:$uid" \
  --cap-drop all --security-opt no-new-privileges \
  -v "$work/data:/data" -v "$work/secrets:/run/secrets/hypertrain:ro" \
  -v "$work/config:/etc/hypertrain:ro" \
  -e CHALLENGE_SLUG="$slug" -e CHALLENGE_STATE_DIR=/data -e CHALLENGE_NETUID=100 \
  -e CHALLENGE_INTERNAL_TOKEN_FILE=/run/secrets/hypertrain/internal.token \
  -e CHALLENGE_ADMIN_TOKEN_FILE=/run/secrets/hypertrain/admin.token \
  -e CHALLENGE_WORKER_TOKEN_FILE=/run/secrets/hypertrain/worker.token \
  -e HYPERTRAIN_COORD_KEY_FILE=/run/secrets/hypertrain/coord.key \
  -e HYPERTRAIN_METAGRAPH_SOURCE=file -e HYPERTRAIN_METAGRAPH_FILE=/etc/hypertrain/metagraph.json \
  -e HYPERTRAIN_BEACON_URLS=http://127.0.0.1:9 \
  "${net_args[@]}" "$image" "${serve_args[@]}" >/dev/null
echo "canary: started $image as $name on $base"

code() { curl -s -o "$work/body" -w '%{http_code}' --max-time "$limit" "$@" || echo 000; }

wait_healthy() {  # up to 120 s for the service to answer /health with 200
  local deadline=$((SECONDS + 120))
  while (( SECONDS < deadline )); do
    [[ "$(code "$base/health")" == 200 ]] && return 0
    [[ "$("$PODMAN" inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" == true ]] \
      || fail "the container stopped before it became healthy"
    sleep 0.5
  done
  fail "/health did not answer 200 within 120 s"
}

wait_healthy
grep -q '"ok":true' "$work/body" || fail "/health body: $(cat "$work/body")"
pass "/health answers 200"
[[ "$(code "$base/version")" == 200 ]] || fail "/version"
grep -q "\"slug\":\"$slug\"" "$work/body" || fail "/version body: $(cat "$work/body")"
pass "/version answers 200: $(cat "$work/body")"

weights="$base/internal/v1/get_weights?epoch=$epoch"
got="$(code -H "X-Platform-Challenge-Slug: $slug" "$weights")"
[[ "$got" == 401 ]] || fail "get_weights without the internal token answered $got, want 401"
pass "get_weights without the internal token: 401"
got="$(code -H "Authorization: Bearer $internal" "$weights")"
[[ "$got" == 403 ]] || fail "get_weights without the slug header answered $got, want 403"
pass "get_weights without the slug header: 403"

auth=(-H "Authorization: Bearer $internal" -H "X-Platform-Challenge-Slug: $slug")
timed="$(curl -s -o "$work/first" -w '%{http_code} %{time_total}' --max-time "$limit" "${auth[@]}" "$weights" || echo "000 timeout")"
[[ "${timed%% *}" == 200 ]] || fail "get_weights with both answered ${timed%% *} (limit ${limit} s)"
pass "get_weights with both: 200 in ${timed#* } s (limit ${limit} s): $(head -c 200 "$work/first")"

"$PODMAN" restart -t 10 "$name" >/dev/null
wait_healthy
[[ "$(code "${auth[@]}" "$weights")" == 200 ]] || fail "get_weights after the restart"
cmp -s "$work/first" "$work/body" || fail "the answer for epoch $epoch changed across a restart"
pass "get_weights for epoch $epoch replayed byte for byte after a container restart"

[[ "$("$PODMAN" inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$name")" == true ]] \
  || fail "the container's root filesystem is not read-only"
for path in /probe /tmp/probe /opt/hypertrain/probe; do
  if "$PODMAN" exec "$name" touch "$path" 2>/dev/null; then fail "$path is writable"; fi
done
"$PODMAN" exec "$name" touch /data/.canary-probe || fail "/data is not writable"
pass "root filesystem read-only (/, /tmp, /opt refuse writes), /data writable"

uids="$("$PODMAN" exec "$name" sh -c 'grep "^Uid:" /proc/1/status')"
read -r _ ruid euid _ <<<"$uids"
[[ "$ruid" == "$uid" && "$euid" == "$uid" ]] || fail "the service runs as $uids, want $uid"
pass "the service process runs as UID $uid"

# The relay runs from the same image, under the same constraints.
relay_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
if [[ "$network" == host ]]; then
  net_args=(--network host); relay_bind=(--host 127.0.0.1 --port "$relay_port")
else
  net_args=(-p "127.0.0.1:$relay_port:8470"); relay_bind=(--host 0.0.0.0 --port 8470)
fi
name="$relay"
"$PODMAN" run -d --name "$name" --read-only --read-only-tmpfs=false --user "$uid:$uid" \
  --cap-drop all --security-opt no-new-privileges -v "$work/relay:/data" "${net_args[@]}" \
  "$image" relay serve "${relay_bind[@]}" --storage /data/blobs --state-dir /data/state >/dev/null
deadline=$((SECONDS + 120))
until [[ "$(code "http://127.0.0.1:$relay_port/healthz")" == 200 ]]; do
  (( SECONDS < deadline )) || fail "the relay's /healthz did not answer 200 within 120 s"
  [[ "$("$PODMAN" inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" == true ]] \
    || fail "the relay container stopped"
  sleep 0.5
done
pass "the relay from the same image answers /healthz"
echo "canary: PASS $image"
