#!/usr/bin/env bash
# Build the agent-hub test image without any image registry.
#
#   docker/build-offline.sh [--force] [--base-only] [TAG]
#
# TAG defaults to $AGENT_HUB_TEST_IMAGE, then AGENT_TEST_IMAGE of images.env.
#  1. A Debian rootfs from debootstrap (minbase + BASE_PACKAGES of images.env)
#     over Debian's package mirror, trimmed of apt lists, caches, docs, man
#     pages and translations, cached as a tarball in /var/cache/agent-hub/
#     (named after its package list) and reused when present.
#  2. `docker import` of that tarball as the base image (BASE_IMAGE of
#     docker/images.sh: BASE_REPO, tagged BASE_SUITE-<package list's hash>).
#  3. `docker build` of docker/agent.Dockerfile on top of it: the same
#     Dockerfile a user builds with a registry.
# Steps whose result exists are skipped. The image is labelled with a hash of
# the Dockerfile and entrypoint and rebuilt when they change. --force redoes
# every step, debootstrap included; --base-only does steps 1 and 2 only
# (docker/build-hub.sh builds on the base). Needs root and a running engine.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# shellcheck source=images.sh
source "$here/images.sh"

force=0
base_only=0
tag=""
for arg in "$@"; do
    case $arg in
        --force) force=1 ;;
        --base-only) base_only=1 ;;
        -h | --help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "build-offline.sh: unknown option $arg" >&2; exit 2 ;;
        *) tag=$arg ;;
    esac
done
tag=${tag:-${AGENT_HUB_TEST_IMAGE:-$AGENT_TEST_IMAGE}}

suite=$BASE_SUITE
mirror=${AGENT_HUB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=$BASE_PACKAGES
base_image=$BASE_IMAGE
base_tar=$BASE_TAR
cache_dir=$(dirname "$base_tar")

now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }
start_ms=$(now_ms)
step_ms=$start_ms
log() { printf '[build-offline %6.1fs] %s\n' "$(( $(now_ms) - start_ms ))e-3" "$*"; }
took() { local t; t=$(now_ms); log "$1 took $(( (t - step_ms) / 1000 )).$(( (t - step_ms) % 1000 / 100 ))s"; step_ms=$t; }

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

source_hash=$(cat "$here/agent.Dockerfile" "$here/entrypoint.sh" | sha256sum | cut -c1-16)

if [[ $force == 0 && $base_only == 0 ]] && image_exists "$tag"; then
    have=$(docker image inspect -f '{{ index .Config.Labels "agent-hub.image-source" }}' "$tag" 2>/dev/null || true)
    if [[ $have == "$source_hash" ]]; then
        log "$tag is up to date (source $source_hash); nothing to do (--force rebuilds)"
        exit 0
    fi
    log "$tag exists but was built from other sources (${have:-unlabelled}); rebuilding it"
fi

# 1. Rootfs tarball (not needed while the base image exists).
if [[ $force == 0 ]] && image_exists "$base_image"; then
    log "reusing $base_image"
elif [[ $force == 1 || ! -s $base_tar ]]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
        log "installing debootstrap"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
        took "installing debootstrap"
    fi
    mkdir -p "$cache_dir"
    rootfs=$(mktemp -d /var/tmp/agent-hub-rootfs.XXXXXX)
    cleanup_rootfs() {
        # debootstrap mounts proc and sys inside the target: never delete through them.
        local m
        awk -v r="$rootfs" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r |
            while read -r m; do umount -l "$m" 2>/dev/null || true; done
        rm -rf --one-file-system "$rootfs" "$base_tar.tmp"
    }
    trap cleanup_rootfs EXIT
    log "debootstrap --variant=minbase $suite from $mirror"
    debootstrap --variant=minbase --include="$packages" \
        "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
        tail -n 30 "$rootfs.log" >&2
        echo "build-offline.sh: debootstrap failed (full log: $rootfs.log)" >&2
        exit 1
    }
    rm -f "$rootfs.log"
    took "debootstrap"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* "$rootfs"/var/cache/debconf/*-old \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/*
    tar --numeric-owner -C "$rootfs" -cf "$base_tar.tmp" .
    mv "$base_tar.tmp" "$base_tar"
    cleanup_rootfs
    trap - EXIT
    took "trim and tar ($(du -h "$base_tar" | cut -f1))"
    docker image rm "$base_image" >/dev/null 2>&1 || true
else
    log "reusing $base_tar"
fi

# 2. Base image.
if [[ $force == 1 ]] || ! image_exists "$base_image"; then
    docker import --change 'CMD ["bash"]' "$base_tar" "$base_image" >/dev/null
    took "docker import $base_image"
fi

if [[ $base_only == 1 ]]; then
    log "base image $base_image ready"
    exit 0
fi

# 3. The agent image, from the user's Dockerfile.
log "docker build $tag"
# The agent CLIs need the npm registry: the offline test image leaves them out (the
# host's npm-installed CLIs can be mounted into a container instead).
docker build --network host --build-arg "BASE=$base_image" \
    --build-arg CLAUDE_CODE_VERSION= --build-arg CODEX_VERSION= \
    --label "agent-hub.image-source=$source_hash" \
    -f "$here/agent.Dockerfile" -t "$tag" "$here"
took "docker build"

size=$(docker image inspect -f '{{ .Size }}' "$tag")
log "built $tag ($((size / 1000000)) MB) in $(( ($(now_ms) - start_ms) / 1000 ))s"
