#!/usr/bin/env bash
# Build the hub's container image (docker/hub.Dockerfile) from a binary built on this host,
# without any image registry.
#
#   docker/build-hub.sh [--bin PATH] [TAG]
#
# TAG defaults to HUB_IMAGE of docker/images.env; PATH to target/release/agent-hub. The base
# is BASE_IMAGE of docker/images.sh, the one docker/build-offline.sh makes (`--base-only`,
# run here: it returns at once when the base exists); with a registry,
# `--build-arg BASE=debian:bookworm-slim` works as well.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=images.sh
source "$here/images.sh"
bin=$here/../target/release/agent-hub
tag=""
while (($#)); do
    case $1 in
        --bin) bin=$2; shift 2 ;;
        -h | --help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "build-hub.sh: unknown option $1" >&2; exit 2 ;;
        *) tag=$1; shift ;;
    esac
done
tag=${tag:-$HUB_IMAGE}
base=$BASE_IMAGE

if [[ ! -x $bin ]]; then
    echo "build-hub.sh: no binary at $bin (cargo build --release, or --bin PATH)" >&2
    exit 1
fi
bash "$here/build-offline.sh" --base-only

context=$(mktemp -d /var/tmp/agent-hub-hub-image.XXXXXX)
trap 'rm -rf "$context"' EXIT
cp "$here/hub.Dockerfile" "$context/Dockerfile"
# A hard link when possible: the debug binary is ~200 MB.
ln "$bin" "$context/agent-hub" 2>/dev/null || cp "$bin" "$context/agent-hub"
docker build --network host --build-arg "BASE=$base" -t "$tag" "$context"
echo "built $tag"
