#!/bin/sh
# agent-hub entrypoint: runs the container's command ("$@", default bash) as the
# only window of the tmux session "agent", configured the way the hub expects,
# and lives exactly as long as that session.
#
# Environment:
#   AGENT_HUB_HISTORY_LIMIT  scrollback lines kept by the pane   (default 50000)
#   AGENT_HUB_COLS/ROWS      initial pane size                   (default 120x30)
#   AGENT_HUB_TOKEN_FILE     the hub's credential for this start, exported as AGENT_HUB_TOKEN
#   AGENT_HUB_START_ARGS_FILE arguments the hub adds for this start, one a line, inserted
#                            after the program (default /run/agent-hub-agent/start-args;
#                            `--continue` resumes Claude Code's conversation); when the file
#                            <it>-when lists globs (under $HOME, or absolute: a CLI config
#                            dir elsewhere), only if one of them exists
#   AGENT_HUB_WORKSPACE      "clone": the hub clones the agent's workspace into the workdir
#                            once the container runs (a remote engine); the program starts
#                            when the clone is complete (.git/agent-hub-cloned), waiting at
#                            most AGENT_HUB_WORKSPACE_WAIT seconds (default 600)
#   AGENT_HUB_SETUP_FILE     while this file is not empty, the hub is running the workspace's
#                            setup commands and the program does not start yet (default
#                            /run/agent-hub-agent/setup-pending; no file: no wait)
set -eu

session=agent
channel=agent-hub-session-closed
history_limit=${AGENT_HUB_HISTORY_LIMIT:-50000}
cols=${AGENT_HUB_COLS:-120}
rows=${AGENT_HUB_ROWS:-30}

export LANG="${LANG:-C.UTF-8}"
export TERM="${TERM:-xterm-256color}"

# The credential the hub minted for this start (it names the file in AGENT_HUB_TOKEN_FILE and
# rewrites it at each start): the agent's programs get it as AGENT_HUB_TOKEN too.
if [ -z "${AGENT_HUB_TOKEN:-}" ] && [ -r "${AGENT_HUB_TOKEN_FILE:-/nonexistent}" ]; then
    AGENT_HUB_TOKEN=$(cat "$AGENT_HUB_TOKEN_FILE")
    export AGENT_HUB_TOKEN
fi

if [ "$#" -eq 0 ]; then
    set -- bash
fi

# The arguments of this start, which the hub rewrites at every start: inserted after the
# program (the rest of the command rotated back behind them), if what they need is there.
start_args=${AGENT_HUB_START_ARGS_FILE:-/run/agent-hub-agent/start-args}

# Whether a glob names a file: relative to "$1", or absolute (then "$1" is not used).
names_a_file() {
    case $2 in
        /*) set -- "" "${2#/}" ;;
    esac
    # The pattern is unquoted on purpose: the shell expands its globs.
    # shellcheck disable=SC2086
    for path in "$1"/$2; do
        if [ -e "$path" ]; then
            return 0
        fi
    done
    return 1
}

# Whether one of the globs in "$start_args-when" (one a line: under $HOME, or absolute) names a
# file; true when there is no such list. Looked at here, as the agent's user, who can read its
# own home.
start_args_apply() {
    [ -s "$start_args-when" ] || return 0
    while IFS= read -r pattern || [ -n "$pattern" ]; do
        if names_a_file "${HOME:-/}" "$pattern"; then
            return 0
        fi
    done <"$start_args-when"
    return 1
}

if [ -s "$start_args" ] && start_args_apply; then
    program=$1
    shift
    rest=$#
    while IFS= read -r arg || [ -n "$arg" ]; do
        set -- "$@" "$arg"
    done <"$start_args"
    i=0
    while [ "$i" -lt "$rest" ]; do
        arg=$1
        shift
        set -- "$@" "$arg"
        i=$((i + 1))
    done
    set -- "$program" "$@"
fi

# A workspace the hub clones into the workdir (the current directory) after the container
# starts: the program starts in its checkout, not in an empty directory.
if [ "${AGENT_HUB_WORKSPACE:-}" = clone ] && [ ! -f .git/agent-hub-cloned ]; then
    tenths=$((${AGENT_HUB_WORKSPACE_WAIT:-600} * 10))
    while [ ! -f .git/agent-hub-cloned ] && [ "$tenths" -gt 0 ]; do
        sleep 0.1
        tenths=$((tenths - 1))
    done
fi

# The workspace's setup commands, which the hub runs through the engine once the container
# runs (and its clone is made): the program starts after them, in a ready checkout.
setup_file=${AGENT_HUB_SETUP_FILE:-/run/agent-hub-agent/setup-pending}
while [ -s "$setup_file" ]; do
    sleep 0.1
done

# shellcheck disable=SC2317 # called by the trap
stop() {
    tmux kill-server 2>/dev/null || true
    exit 0
}
trap stop TERM INT HUP

# The command runs under a small wrapper that records its exit status (in the
# pane option @agent_hub_exit, which the hub watches, and in $exit_file, which
# becomes the container's exit code), keeps its last screen (printed below, so
# `docker logs` says why a program ended that nobody was watching) and keeps the
# pane open a moment so tmux delivers the last output to the hub before the pane
# goes away.
exit_file=${TMPDIR:-/tmp}/agent-hub-exit-code
screen_file=${TMPDIR:-/tmp}/agent-hub-last-screen
rm -f "$exit_file" "$screen_file"
wrapper='"$@"; rc=$?; tmux set-option -p -t "$TMUX_PANE" @agent_hub_exit "$rc" 2>/dev/null; tmux capture-pane -p -t "$TMUX_PANE" >'"$screen_file"' 2>/dev/null; echo "$rc" >'"$exit_file"'; sleep 0.3; exit $rc'

# One tmux command list, so every option is set before the pane exists:
# history-limit in particular applies only to panes created after it is set.
# window-size manual is set on the new window only, after it exists: set
# globally before `new-session -d -x -y`, it crashes the server (NULL window
# in clients_calculate_size; tmux 3.3a here, tmux/tmux#4849).
# The session-closed hook signals a wait-for channel; tmux latches the signal
# when nobody waits yet, so the loop below cannot miss it.
tmux start-server \; \
    set-option -g history-limit "$history_limit" \; \
    set-option -g status off \; \
    set-option -s escape-time 10 \; \
    set-option -g default-terminal xterm-256color \; \
    set-option -g default-size "${cols}x${rows}" \; \
    set-hook -g session-closed "wait-for -S $channel" \; \
    new-session -d -s "$session" -x "$cols" -y "$rows" -- sh -c "$wrapper" agent "$@" \; \
    set-option -w -t "=$session:" window-size manual

# Wait without polling: the waiter returns when the hook fires or when the
# server exits (last session gone, kill-server). It runs in the background so
# that SIGTERM is handled at once rather than after it returns.
while tmux has-session -t "=$session" 2>/dev/null; do
    tmux wait-for "$channel" &
    wait "$!" || true
done
code=$(cat "$exit_file" 2>/dev/null || echo 0)
if [ -s "$screen_file" ]; then
    echo "agent-hub-entrypoint: $1 exited ($code); its last screen:" >&2
    grep -v '^[[:space:]]*$' "$screen_file" | tail -n 20 >&2 || true
elif [ ! -e "$exit_file" ]; then
    echo "agent-hub-entrypoint: the tmux session ended before $1 did" >&2
fi
exit "$code"
