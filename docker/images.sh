# shellcheck shell=bash
# Sourced, not run: the image names and tags of docker/images.env, and the base image's
# tag and cache file derived from them. Sets BASE_REPO, BASE_SUITE, BASE_PACKAGES,
# AGENT_TEST_IMAGE, AGENT_CLIS_IMAGE, HUB_IMAGE, HUB_TEST_IMAGE, BASE_IMAGE and BASE_TAR.
images_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=images.env
source "$images_dir/images.env"
base_key=$(printf '%s' "$BASE_PACKAGES" | sha256sum | cut -c1-8)
BASE_IMAGE=$BASE_REPO:$BASE_SUITE-$base_key
BASE_TAR=/var/cache/agent-hub/debian-base-$BASE_SUITE-$base_key.tar
unset images_dir base_key
