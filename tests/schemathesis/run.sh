#!/usr/bin/env bash
# Runs schemathesis (pinned: SCHEMATHESIS_VERSION below) against a fresh hub: every operation
# of its GET /openapi.json with `--checks all`, in every phase (stateful included), bounded and
# with the exclusions of schemathesis.toml beside this script, on real sessions, tasks and
# container agents made first (fixtures.py). Exits with schemathesis's exit code (0: no
# failure, no error, and no operation that answered only 404: see schemathesis.toml).
#
#   tests/schemathesis/run.sh target/debug/agent-hub [more schemathesis run options]
#
# Builds nothing. The hub listens on a free loopback port in a temporary directory (its working
# directory, its data dir inside), a tmux socket (and tmux directory) of its own and a hub id of its
# own; whatever happens, the hub, its tmux server and any process it started are stopped, its
# containers and volumes removed (by the hub id's label) and the temporary directory removed.
#
# The container agents run the test image (AGENT_HUB_TEST_IMAGE, else AGENT_TEST_IMAGE of
# docker/images.env) and need a Docker engine. Without one, or without the image, the agents'
# operations are left out and the script says so (SKIPPED); with AGENT_HUB_DOCKER_TESTS=required
# (CI) it fails instead, as the Docker tests do.
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

# The container agents: with a Docker engine that has the test image.
# shellcheck source=../../docker/images.env
source "$here/../../docker/images.env"
image=${AGENT_HUB_TEST_IMAGE:-$AGENT_TEST_IMAGE}
agents=1
if ! docker info >/dev/null 2>&1; then
    agents="no Docker engine answers \`docker info\`"
elif ! docker image inspect "$image" >/dev/null 2>&1; then
    agents="the test image $image is missing (run docker/build-offline.sh)"
fi
if [[ $agents != 1 ]]; then
    if [[ ${AGENT_HUB_DOCKER_TESTS:-} == required ]]; then
        echo "run.sh: the container agents are required (AGENT_HUB_DOCKER_TESTS=required) but $agents" >&2
        exit 2
    fi
    echo "run.sh: SKIPPED: the container agents' operations (/v1/agents/{id}...) are left out: $agents"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/agent-hub-schemathesis.XXXXXX")
socket=agent-hub-st-$$
# On every container and volume the hub makes (label agent-hub.hub): what the cleanup removes.
hub_id=schemathesis-$$-$RANDOM
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
# The hub's containers, then their volumes (the agents' homes; a volume in use stays).
remove_containers() {
    [[ $agents == 1 ]] || return 0
    local label=label=agent-hub.hub=$hub_id ids
    ids=$(docker ps -aq --filter "$label" 2>/dev/null || true)
    if [[ -n $ids ]]; then
        # shellcheck disable=SC2086
        docker rm -f $ids >/dev/null 2>&1 || true
    fi
    ids=$(docker volume ls -q --filter "$label" 2>/dev/null || true)
    if [[ -n $ids ]]; then
        # shellcheck disable=SC2086
        docker volume rm -f $ids >/dev/null 2>&1 || true
    fi
}
cleanup() {
    local rc=$?
    stop_hub
    remove_containers
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
echo "hub_id = \"$hub_id\"" >"$work/hub.toml"
if [[ $agents == 1 ]]; then
    python3 "$here/fixtures.py" agents "$work" "$image" "$here/fixture-shell.sh" >>"$work/hub.toml"
fi
# A team with a budget of its own, and the policy with a budget of the agent `st-budget`: what
# the budget operations read, set, lift and reset.
printf '[teams.st-team]\nbudget = { usd = 1000.0 }\n' >>"$work/hub.toml"
# A webhook nobody answers (the discard port): what `GET /v1/notify` lists and
# `POST /v1/notify/test` tries.
printf '[[notify]]\nname = "st-webhook"\nurl = "http://127.0.0.1:9/st"\n' >>"$work/hub.toml"
mkdir -p "$work/policies"
printf 'budget = { usd = 1000.0, per = "week" }\n' >"$work/policies/st-budget.toml"
# Started in the temporary directory: a hub reads ./policies when hub.toml names no policies
# dir, and the caller's (a checkout's policies/, say) is not this run's.
cd "$work"
env "${unset_hub_env[@]}" setsid "$bin" serve --config "$work/hub.toml" --listen "127.0.0.1:$port" \
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
echo "run.sh: hub $($bin --version 2>/dev/null || echo agent-hub) on 127.0.0.1:$port (pid $hub_pid, hub id $hub_id), schemathesis $have"

# Real sessions, tasks and agents for the operations on one (fixtures.py says which is for what;
# schemathesis.toml names the sessions and tasks by these variables, the agents by their ids).
fixture_args=("http://127.0.0.1:$port" "$token" "$here/fixture-shell.sh")
skip_agents=()
if [[ $agents == 1 ]]; then
    fixture_args+=(--agents)
else
    skip_agents=(--exclude-path-regex '^/v1/agents/')
fi
fixtures=$(python3 "$here/fixtures.py" "${fixture_args[@]}")
while IFS='=' read -r name value; do
    export "$name=$value"
done <<<"$fixtures"
echo "run.sh: fixtures: ${fixtures//$'\n'/ }"

# hooks.py gives every request the owner's token (the current one: `rotate` replaces it),
# points `register` at the hub itself, makes again what `reset` and `unregister` remove, bounds
# the agents' state waits and gives the removed workspace back (through the hub's API: its URL
# and the token; the fixture shell for new sessions). The token is not given as a header of its
# own (`-H`): schemathesis would send it as it is after a rotation. So the document, which
# needs a token too, is fetched here and given as a file, the hub's URL beside it.
export SCHEMATHESIS_HOOKS=$here/hooks.py
export AGENT_HUB_ST_URL=http://127.0.0.1:$port AGENT_HUB_ST_TOKEN=$token
export AGENT_HUB_ST_SHELL=$here/fixture-shell.sh
python3 -c 'import sys, urllib.request
request = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]})
sys.stdout.buffer.write(urllib.request.urlopen(request, timeout=30).read())' \
    "http://127.0.0.1:$port/openapi.json" "$token" >"$work/openapi.json"

start=$(date +%s)
set +e
(
    cd "$work"
    schemathesis --config-file "$here/schemathesis.toml" run \
        "$work/openapi.json" --url "http://127.0.0.1:$port" \
        --checks all \
        --output-sanitize false \
        --no-color \
        "${skip_agents[@]}" \
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
