#!/usr/bin/env bash
# The test rig's remote engine: a second Docker engine on this machine that the hub can reach only
# over TCP and whose files it cannot see (docs/testing.md, "The remote engine").
#
#   tests/rig/remote-engine.sh start|stop|status
#
# start   A `dockerd` with its own data root, exec root and containerd, in a mount namespace of its
#         own (`unshare -m`) where private tmpfs hide the places test hubs keep their files (/tmp,
#         /var/tmp, this repository's checkouts, the cargo target dir, the default data dir; more
#         with AGENT_HUB_RIG_HIDE=DIR:DIR), listening on tcp://127.0.0.1:2376 only. Its data root
#         (/var/lib/agent-hub-rig) is a tmpfs in that namespace: from outside it is an empty
#         directory, and everything the engine holds is gone when it stops. Then it loads the
#         images the tests run (`docker save | docker load` from the main engine): the test image,
#         and the agent-CLI image (the test image with the pinned Claude Code and Codex at /clis,
#         built on the main engine from tests/agent-clis/node_modules when that is installed).
#         Does nothing but load missing images when the engine answers already.
# stop    Stops it (its containers and images go with it) and waits.
# status  Says whether it answers, and its pid.
#
# Needs root, `unshare` (util-linux) and `dockerd`. Its log: $AGENT_HUB_RIG_LOG, default
# /tmp/agent-hub-ci-rig-dockerd.log (the host's /tmp; the engine's own /tmp is private).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=docker/images.sh
source "$repo/docker/images.sh"

endpoint=tcp://127.0.0.1:2376
data_root=/var/lib/agent-hub-rig
exec_root=/run/agent-hub-rig
# Outside the engine's private mounts, so this namespace can read it.
pidfile=/run/agent-hub-rig.pid
log_file=${AGENT_HUB_RIG_LOG:-/tmp/agent-hub-ci-rig-dockerd.log}
test_image=${AGENT_HUB_TEST_IMAGE:-$AGENT_TEST_IMAGE}
clis_modules=$repo/tests/agent-clis/node_modules

now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }
fmt_s() { printf '%d.%ds' "$(($1 / 1000))" "$(($1 % 1000 / 100))"; }
say() { echo "remote-engine: $*"; }

# The docker CLI against the rig.
rig() { DOCKER_HOST=$endpoint docker "$@"; }

# Whether the rig answers (a frozen engine holds the connection: give up after 5 s).
answers() { DOCKER_HOST=$endpoint timeout 5 docker info >/dev/null 2>&1; }

# The rig's dockerd from its pidfile, when that process is a dockerd.
rig_pid() {
    local pid
    pid=$(cat "$pidfile" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ && $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]] || return 1
    echo "$pid"
}

# The directories the engine must not see: where test hubs keep data dirs and the files their
# agents mount. Each is hidden by a tmpfs over its nearest existing ancestor (a directory made
# later under it is hidden too); never a system directory; none under another.
hidden_dirs() {
    local -a wanted=(/tmp /var/tmp "${TMPDIR:-/tmp}"
        "${XDG_DATA_HOME:-${HOME:-/root}/.local/share}/agent-hub")
    [[ -z ${AGENT_HUB_DATA_DIR:-} ]] || wanted+=("$AGENT_HUB_DATA_DIR")
    [[ -z ${CARGO_TARGET_DIR:-} ]] || wanted+=("$CARGO_TARGET_DIR")
    # Every checkout of this repository (its worktrees): fixtures, node_modules, the binary.
    local tree
    while read -r tree; do
        wanted+=("$tree")
    done < <(git -C "$repo" worktree list --porcelain 2>/dev/null | sed -n 's/^worktree //p')
    wanted+=("$repo")
    local extra
    IFS=: read -r -a extra <<<"${AGENT_HUB_RIG_HIDE:-}"
    wanted+=("${extra[@]}")
    local dir kept
    local -a found=()
    for dir in "${wanted[@]}"; do
        [[ $dir == /* ]] || continue
        dir=$(realpath -m "$dir")
        while [[ ! -d $dir ]]; do dir=$(dirname "$dir"); done
        case $dir in
            / | /bin | /boot | /dev | /etc | /lib* | /proc | /run | /sbin | /sys | /usr | /usr/* | /var | /var/lib | /var/run)
                say "not hiding $dir (a system directory)" >&2
                continue ;;
        esac
        found+=("$dir")
    done
    # Shortest first: a directory under one already hidden is hidden with it.
    local -a hidden=()
    while read -r dir; do
        for kept in "${hidden[@]}"; do
            [[ $dir == "$kept" || $dir == "$kept"/* ]] && continue 2
        done
        hidden+=("$dir")
        echo "$dir"
    done < <(printf '%s\n' "${found[@]}" | awk '{ print length($0) " " $0 }' | sort -n | cut -d' ' -f2-)
}

# Runs in the new mount namespace (propagation private: nothing mounted here reaches the host):
# hides the hub's places, gives the engine its own roots, then becomes dockerd. Inline, not a file
# of the checkout: the checkout is among the places it hides.
# shellcheck disable=SC2016 # expanded by the inner bash, from its arguments
inner='set -euo pipefail
data_root=$1 exec_root=$2 pidfile=$3 endpoint=$4
shift 4
for dir in "$@"; do
    mount -t tmpfs -o mode=1777 agent-hub-rig-hidden "$dir"
done
mount -t tmpfs -o mode=0711 agent-hub-rig-data "$data_root"
mount -t tmpfs -o mode=0711 agent-hub-rig-exec "$exec_root"
# A system containerd socket here would be used instead of a containerd of the engine, and that
# containerd could not see the data root of this namespace.
if [[ -d /run/containerd ]]; then
    mount -t tmpfs -o mode=0711 agent-hub-rig-containerd /run/containerd
fi
exec dockerd --data-root "$data_root" --exec-root "$exec_root" --pidfile "$pidfile" \
    -H "$endpoint" --iptables=false --bridge=none \
    --containerd-namespace agent-hub-rig --containerd-plugins-namespace agent-hub-rig-plugins'

start_engine() {
    local t0 pid
    t0=$(now_ms)
    if [[ $EUID != 0 ]]; then
        say "needs root (a dockerd and mounts)" >&2
        exit 1
    fi
    if pid=$(rig_pid); then
        if [[ $(awk '{print $3}' "/proc/$pid/stat") == T ]]; then
            say "dockerd $pid was left frozen (SIGSTOP); thawing it"
            kill -CONT "$pid"
        fi
        if answers; then
            say "already answering on $endpoint (dockerd $pid)"
            return 0
        fi
        say "dockerd $pid is running but does not answer on $endpoint; waiting for it"
    else
        rm -f "$pidfile"
        local -a hide
        mapfile -t hide < <(hidden_dirs)
        mkdir -p "$data_root" "$exec_root"
        say "starting dockerd on $endpoint (log: $log_file), hiding: ${hide[*]}"
        # setsid and redirected fds: the engine outlives this script and holds none of its
        # caller's pipes; the log's fd is opened here, on the host's /tmp.
        setsid unshare -m --propagation private \
            bash -c "$inner" agent-hub-rig "$data_root" "$exec_root" "$pidfile" "$endpoint" \
            "${hide[@]}" </dev/null >>"$log_file" 2>&1 &
        pid=$!
    fi
    local i
    for ((i = 0; i < 60; i++)); do
        answers && break
        if ! kill -0 "$pid" 2>/dev/null; then
            say "dockerd exited; last lines of $log_file:" >&2
            tail -n 30 "$log_file" >&2 || true
            exit 1
        fi
        sleep 1
    done
    if ! answers; then
        say "no answer on $endpoint after 60 s; last lines of $log_file:" >&2
        tail -n 30 "$log_file" >&2 || true
        exit 1
    fi
    say "answering after $(fmt_s $(($(now_ms) - t0))) (dockerd $(rig_pid))"
}

image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null; }

# The agent-CLI image on the main engine, built when its packages, its Dockerfile or the test
# image changed (its tag is their hash; AGENT_CLIS_IMAGE names the current one).
build_clis_image() {
    if [[ ! -d $clis_modules/@anthropic-ai/claude-code || ! -d $clis_modules/@openai/codex ]]; then
        say "no Claude Code and Codex in $clis_modules (npm ci --prefix tests/agent-clis): no $AGENT_CLIS_IMAGE"
        return 1
    fi
    local key keyed t0
    key=$({
        sha256sum <"$repo/tests/agent-clis/package-lock.json"
        sha256sum <"$here/agent-clis.Dockerfile"
        image_id "$test_image"
    } | sha256sum | cut -c1-16)
    keyed=${AGENT_CLIS_IMAGE%:*}:$key
    if image_id "$keyed" >/dev/null; then
        say "$keyed is up to date"
    else
        t0=$(now_ms)
        # The context is a tar of only the two CLIs' packages and their .bin links.
        local out
        if ! out=$( (
            cd "$clis_modules"
            tar -c -f - -C "$here" agent-clis.Dockerfile -C "$clis_modules" \
                .bin/claude .bin/codex @anthropic-ai/claude-code* @openai/codex*
        ) | docker build -q -f agent-clis.Dockerfile --build-arg "BASE=$test_image" \
            --label "agent-hub.image-source=$key" -t "$keyed" - 2>&1); then
            echo "$out" >&2
            say "building $keyed failed" >&2
            exit 1
        fi
        say "built $keyed in $(fmt_s $(($(now_ms) - t0)))"
    fi
    docker tag "$keyed" "$AGENT_CLIS_IMAGE"
}

# Loads into the rig the images it lacks (or holds in another build), in one `docker save`:
# layers they share go once.
load_images() {
    local -a missing=()
    local image
    for image in "$@"; do
        if [[ $(image_id "$image") != "$(DOCKER_HOST=$endpoint image_id "$image")" ]]; then
            missing+=("$image")
        else
            say "$image is in the rig"
        fi
    done
    [[ ${#missing[@]} != 0 ]] || return 0
    local t0
    t0=$(now_ms)
    docker save "${missing[@]}" | rig load -q >/dev/null
    say "loaded ${missing[*]} into the rig in $(fmt_s $(($(now_ms) - t0)))"
}

stop_engine() {
    local pid ns p i
    if ! pid=$(rig_pid); then
        say "not running"
        rm -f "$pidfile"
        return 0
    fi
    ns=$(readlink "/proc/$pid/ns/mnt")
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid"
    for ((i = 0; i < 300; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "dockerd $pid still running after 30 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    # What is left in its namespace (a container's shim) would keep its tmpfs, and its data.
    for p in /proc/[0-9]*; do
        if [[ $(readlink "$p/ns/mnt" 2>/dev/null) == "$ns" ]]; then
            say "killing ${p#/proc/} ($(cat "$p/comm" 2>/dev/null)), left in the engine's namespace"
            kill -KILL "${p#/proc/}" 2>/dev/null || true
        fi
    done
    rm -f "$pidfile"
    say "stopped dockerd $pid"
}

case ${1:-} in
    start)
        start_engine
        images=("$test_image")
        if build_clis_image; then
            images+=("$AGENT_CLIS_IMAGE")
        fi
        load_images "${images[@]}"
        ;;
    stop) stop_engine ;;
    status)
        if pid=$(rig_pid) && answers; then
            say "answering on $endpoint (dockerd $pid, data root $data_root)"
        elif pid=$(rig_pid); then
            say "dockerd $pid runs but does not answer on $endpoint"
            exit 1
        else
            say "not running"
            exit 3
        fi
        ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
