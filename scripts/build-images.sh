#!/usr/bin/env bash
# Build the Hypertrain container images with podman.
#
#   scripts/build-images.sh [server|gpu|all]      (default: all)
#
# Images (tag: the version in pyproject.toml, and "latest"):
#   hypertrain-server  challenge service and relay; no torch; UID 65532
#   hypertrain-gpu     miner, auditor, referee; torch from the same pins (CUDA wheels)
#                      TORCH_VARIANT=cpu builds the CPU variant of the same file
#
# Environment:
#   BASE_IMAGE      base image for both Dockerfiles. Unset: build localhost/hypertrain-base:bookworm
#                   from Debian packages with debootstrap (needs root and a Debian mirror),
#                   for hosts that cannot pull from a registry. Elsewhere: BASE_IMAGE=python:3.11-slim
#   REBUILD_BASE=1  rebuild the debootstrap base even if it exists
#   DEBIAN_MIRROR   default http://deb.debian.org/debian
#   TORCH_VARIANT   cuda (default) or cpu, for the gpu image
#   TORCH_INDEX_URL extra index for torch (e.g. https://download.pytorch.org/whl/cpu)
#   PIP_FIND_LINKS  a local directory of wheels, mounted read-only into the build
#   PIP_CERT        a CA bundle pip must trust (TLS-intercepting proxies), mounted likewise
#   IMAGE_PREFIX    default "localhost/"; IMAGE_TAG default: the project version
#   CONTAINERS_CONF default docker/containers.conf (a workaround for restricted hosts)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$repo/docker/containers.conf}"
PODMAN="${PODMAN:-podman}"
what="${1:-all}"
case "$what" in server|gpu|all) ;; *) echo "usage: $0 [server|gpu|all]" >&2; exit 2 ;; esac

prefix="${IMAGE_PREFIX:-localhost/}"
tag="${IMAGE_TAG:-$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')}"
variant="${TORCH_VARIANT:-cuda}"

log() { printf '%s build-images: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

build_base() {
  local base="localhost/hypertrain-base:bookworm"
  if [[ "${REBUILD_BASE:-0}" != 1 ]] && "$PODMAN" image exists "$base"; then
    log "base $base exists (REBUILD_BASE=1 rebuilds it)"
    echo "$base"; return
  fi
  command -v debootstrap >/dev/null || { log "debootstrap is not installed (apt-get install debootstrap), or set BASE_IMAGE"; exit 1; }
  [[ "$(id -u)" == 0 ]] || { log "debootstrap needs root; run as root or set BASE_IMAGE"; exit 1; }
  rootfs="$(mktemp -d "${TMPDIR:-/tmp}/hypertrain-rootfs.XXXXXX")"
  trap 'rm -rf "${rootfs:-}"' EXIT
  log "debootstrap bookworm into $rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >&2
  # Only what a runtime needs: no package caches, indexes, manuals or locales.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
  log "importing $base"
  tar --numeric-owner -C "$rootfs" -c . | "$PODMAN" import \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$base" >&2
  rm -rf "$rootfs"
  echo "$base"
}

base="${BASE_IMAGE:-}"
[[ -n "$base" ]] || base="$(build_base)"

# pip inside the build reaches the registry through the host network; local wheels and a
# CA bundle, when given, are mounted for the build only (nothing of them stays in an image).
build_args=(--network host --build-arg "BASE_IMAGE=$base")
if [[ -n "${PIP_FIND_LINKS:-}" && -d "${PIP_FIND_LINKS%% *}" ]]; then
  build_args+=(-v "${PIP_FIND_LINKS%% *}:/wheels:ro" --build-arg PIP_FIND_LINKS=/wheels)
fi
if [[ -n "${PIP_CERT:-}" && -f "$PIP_CERT" ]]; then
  build_args+=(-v "$PIP_CERT:/run/pip-ca.crt:ro" --build-arg PIP_CERT=/run/pip-ca.crt)
fi
torch_index="${TORCH_INDEX_URL:-}"
if [[ -z "$torch_index" && "$variant" == cpu ]] \
  && compgen -G "${PIP_FIND_LINKS%% *}/torch-*+cpu-*.whl" >/dev/null 2>&1; then
  torch_index=none  # the CPU wheel is among the local wheels: no extra index needed
fi
[[ -z "$torch_index" ]] || build_args+=(--build-arg "TORCH_INDEX_URL=$torch_index")

build() {  # build NAME FILE [args...]
  local name="$1" file="$2"; shift 2
  local start=$SECONDS
  log "building ${prefix}${name}:${tag} from $file on $base"
  "$PODMAN" build "${build_args[@]}" "$@" -f "$file" \
    -t "${prefix}${name}:${tag}" -t "${prefix}${name}:latest" . >&2
  log "built ${prefix}${name}:${tag} in $((SECONDS - start)) s"
}

if [[ "$what" == server || "$what" == all ]]; then
  build hypertrain-server docker/Dockerfile.server
fi
if [[ "$what" == gpu || "$what" == all ]]; then
  suffix=""; [[ "$variant" == cuda ]] || suffix="-$variant"
  build "hypertrain-gpu$suffix" docker/Dockerfile.gpu --build-arg "TORCH_VARIANT=$variant"
fi
