#!/usr/bin/env bash
# Build the hub's container image (docker/hub.Dockerfile) from a binary built on this host,
# without any image registry.
#
#   docker/build-hub.sh [--bin PATH] [TAG]
#
# TAG defaults to agent-hub/hub:latest; PATH to target/release/agent-hub. The base is
# agent-hub/debian-base:bookworm (made by docker/build-offline.sh, which is run first if it
# is missing); with a registry, `--build-arg BASE=debian:bookworm-slim` works as well.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/../target/release/agent-hub
tag=""
while (($#)); do
    case $1 in
        --bin) bin=$2; shift 2 ;;
        -h | --help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "build-hub.sh: unknown option $1" >&2; exit 2 ;;
        *) tag=$1; shift ;;
    esac
done
tag=${tag:-agent-hub/hub:latest}
base=agent-hub/debian-base:bookworm

if [[ ! -x $bin ]]; then
    echo "build-hub.sh: no binary at $bin (cargo build --release, or --bin PATH)" >&2
    exit 1
fi
if ! docker image inspect "$base" >/dev/null 2>&1; then
    bash "$here/build-offline.sh"
fi

context=$(mktemp -d /var/tmp/agent-hub-hub-image.XXXXXX)
trap 'rm -rf "$context"' EXIT
cp "$here/hub.Dockerfile" "$context/Dockerfile"
# A hard link when possible: the debug binary is ~200 MB.
ln "$bin" "$context/agent-hub" 2>/dev/null || cp "$bin" "$context/agent-hub"
docker build --network host --build-arg "BASE=$base" -t "$tag" "$context"
echo "built $tag"
