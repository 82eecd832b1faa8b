#!/usr/bin/env bash
# Before/after benchmark figures in one sitting: builds the benches at BASE_REV (in a temporary
# git worktree with a target dir of its own) and in the current tree, then runs `host_session`
# and `docker_agents -- --parts 1,2,3` for both, back to back (base, then head, per bench).
#
#   benches/compare.sh BASE_REV [BENCH OPTIONS...]
#
# BENCH OPTIONS (e.g. --quick) go to both benches of both trees. DOCKER_PARTS overrides the
# docker parts (default 1,2,3); AGENT_HUB_TEST_IMAGE names the agent image as usual.
# Outputs: target/bench-compare/{base,head}-{host,docker}.txt (stdout and stderr of each run).
# The base tree's build cache stays in target/bench-compare/base-target, so a second
# comparison against the same base does not rebuild it.
set -euo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
base_rev=$1
shift
bench_options=("$@")

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
out=$root/target/bench-compare
base_target=$out/base-target
mkdir -p "$out"

base_commit=$(git rev-parse --verify "$base_rev^{commit}")
worktree=$(mktemp -d "${TMPDIR:-/tmp}/ah-bench-base.XXXXXX")
cleanup() {
    git -C "$root" worktree remove --force "$worktree" >/dev/null 2>&1 || rm -rf "$worktree"
    git -C "$root" worktree prune
}
trap cleanup EXIT
git worktree add --detach --quiet "$worktree" "$base_commit"

# Dependencies build the same in both trees: start the base cache from this tree's, if any.
if [[ ! -d $base_target/release && -d $root/target/release ]]; then
    echo "seeding $base_target from target/release..."
    mkdir -p "$base_target"
    cp -a "$root/target/release" "$base_target/release"
fi

build() { # DIR TARGET_DIR
    (cd "$1" && CARGO_TARGET_DIR=$2 cargo bench --bench host_session --bench docker_agents --no-run)
}
echo "building base ($base_rev = ${base_commit:0:12})..."
build "$worktree" "$base_target"
echo "building head ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ', with uncommitted changes'))..."
build "$root" "$root/target"

run() { # NAME DIR TARGET_DIR BENCH OUTFILE ARGS...
    local name=$1 dir=$2 target=$3 bench=$4 file=$5
    shift 5
    echo "running $name $bench -> ${file#"$root"/}"
    {
        echo "# $name: $(git -C "$dir" rev-parse HEAD), cargo bench --bench $bench -- $*"
        (cd "$dir" && CARGO_TARGET_DIR=$target cargo bench --quiet --bench "$bench" -- "$@")
    } >"$file" 2>&1 || echo "  $name $bench failed: see ${file#"$root"/}" >&2
}
docker_args=(--parts "${DOCKER_PARTS:-1,2,3}" "${bench_options[@]}")
run base "$worktree" "$base_target" host_session "$out/base-host.txt" "${bench_options[@]}"
run head "$root" "$root/target" host_session "$out/head-host.txt" "${bench_options[@]}"
run base "$worktree" "$base_target" docker_agents "$out/base-docker.txt" "${docker_args[@]}"
run head "$root" "$root/target" docker_agents "$out/head-docker.txt" "${docker_args[@]}"
echo "done: $(ls "$out"/*.txt | sed "s|$root/||" | tr '\n' ' ')"
