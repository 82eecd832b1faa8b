#!/usr/bin/env bash
# Runs schemathesis (pinned: SCHEMATHESIS_VERSION below) against a fresh hub: every operation
# of its GET /openapi.json with `--checks all`, in every phase (stateful included), bounded and
# with the exclusions of schemathesis.toml beside this script, on real sessions and tasks
# made first (fixtures.py). Exits with schemathesis's exit code (0: no failure, no error).
#
#   tests/schemathesis/run.sh target/debug/agent-hub [more schemathesis run options]
#
# Builds nothing. The hub listens on a free loopback port with a temporary data dir and a tmux
# socket (and tmux directory) of its own; whatever happens, the hub, its tmux server and any
# process it started are stopped and the temporary directory removed.
set -euo pipefail

SCHEMATHESIS_VERSION=4.32.5

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${1:?usage: $0 PATH/TO/agent-hub [schemathesis run options]}
shift
if [[ ! -x $bin ]]; then
    echo "run.sh: $bin is not an executable (build it first: cargo build)" >&2
    exit 2
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
if ! command -v schemathesis >/dev/null 2>&1; then
    echo "run.sh: schemathesis is not installed (pip install schemathesis==$SCHEMATHESIS_VERSION)" >&2
    exit 2
fi
have=$(schemathesis --version 2>&1 | awk '{ print $NF }')
if [[ $have != "$SCHEMATHESIS_VERSION" ]]; then
    echo "run.sh: schemathesis $have found, $SCHEMATHESIS_VERSION wanted (pip install schemathesis==$SCHEMATHESIS_VERSION)" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/agent-hub-schemathesis.XXXXXX")
socket=agent-hub-st-$$
mkdir "$work/tmux"
# The hub's tmux server lives under this directory, not the user's.
export TMUX_TMPDIR=$work/tmux
hub_pid=

stop_hub() {
    [[ -n $hub_pid ]] || return 0
    local children
    children=$(pgrep -P "$hub_pid" || true)
    kill -TERM "$hub_pid" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$hub_pid" 2>/dev/null || break
        sleep 0.1
    done
    # The hub runs in a process group of its own (setsid): end what is left of it, then
    # any child it had started (sessions run in sessions of their own).
    kill -KILL -- "-$hub_pid" 2>/dev/null || true
    if [[ -n $children ]]; then
        # shellcheck disable=SC2086
        kill -KILL $children 2>/dev/null || true
    fi
    wait "$hub_pid" 2>/dev/null || true
    hub_pid=
}
cleanup() {
    local rc=$?
    stop_hub
    tmux -L "$socket" kill-server 2>/dev/null || true
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Only what this script says: no AGENT_HUB_* setting of the caller's reaches the hub.
unset_hub_env=()
while read -r name; do
    unset_hub_env+=(-u "$name")
done < <(compgen -e | grep '^AGENT_HUB_' || true)
env "${unset_hub_env[@]}" setsid "$bin" serve --listen "127.0.0.1:$port" \
    --data-dir "$work/data" --tmux-socket "$socket" </dev/null >"$work/hub.log" 2>&1 &
hub_pid=$!

for _ in $(seq 150); do
    if [[ -s $work/data/admin-token ]] && python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
        "http://127.0.0.1:$port/health" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$hub_pid" 2>/dev/null; then
        echo "run.sh: the hub exited; its log:" >&2
        cat "$work/hub.log" >&2
        exit 1
    fi
    sleep 0.2
done
token=$(cat "$work/data/admin-token")
echo "run.sh: hub $($bin --version 2>/dev/null || echo agent-hub) on 127.0.0.1:$port (pid $hub_pid), schemathesis $have"

# Real sessions and a task for the operations on one (fixtures.py says which is for what;
# schemathesis.toml names them by these variables).
fixtures=$(python3 "$here/fixtures.py" "http://127.0.0.1:$port" "$token" "$here/fixture-shell.sh")
while IFS='=' read -r name value; do
    export "$name=$value"
done <<<"$fixtures"
echo "run.sh: fixtures: ${fixtures//$'\n'/ }"

start=$(date +%s)
set +e
(
    cd "$work"
    schemathesis --config-file "$here/schemathesis.toml" run \
        "http://127.0.0.1:$port/openapi.json" \
        --checks all \
        -H "Authorization: Bearer $token" \
        --output-sanitize false \
        --no-color \
        "$@"
)
rc=$?
set -e
echo "run.sh: schemathesis exited with $rc after $(($(date +%s) - start))s"
if [[ $rc != 0 ]]; then
    echo "run.sh: last lines of the hub's log:"
    tail -n 40 "$work/hub.log"
fi
exit "$rc"
