# agent-hub agent image: tmux, git and a shell, user `agent`, and an entrypoint that
# runs the command in the tmux session "agent" the hub attaches to.
#
#   docker build -f docker/agent.Dockerfile -t agent-hub/agent docker/
#
# The agent CLIs, pinned (the versions the shipped profiles were checked with); an empty
# value leaves that CLI out (the offline test image leaves both out):
#   --build-arg CLAUDE_CODE_VERSION=2.1.330   npm @anthropic-ai/claude-code (`claude`)
#   --build-arg CODEX_VERSION=0.169.0         npm @openai/codex (`codex`)
#
# BASE may be any Debian or Ubuntu image; one that already has tmux (>= 3.2), ps and git
# skips the apt step, so this also builds offline on a debootstrapped base
# (docker/build-offline.sh).
ARG BASE=debian:bookworm-slim
FROM ${BASE}

ENV LANG=C.UTF-8 \
    TERM=xterm-256color

USER root

RUN set -eu; \
    if ! command -v tmux >/dev/null 2>&1 || ! command -v ps >/dev/null 2>&1 \
        || ! command -v git >/dev/null 2>&1; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            tmux procps bash ca-certificates git; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    version=$(tmux -V | sed -n 's/^tmux \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p'); \
    if [ -n "$version" ]; then \
        set -- $version; \
        if [ "$1" -lt 3 ] || { [ "$1" -eq 3 ] && [ "$2" -lt 2 ]; }; then \
            echo "agent-hub needs tmux >= 3.2, the base has $(tmux -V)" >&2; exit 1; \
        fi; \
    fi; \
    if ! id -u agent >/dev/null 2>&1; then \
        existing=$(getent passwd 1000 | cut -d: -f1); \
        if [ -n "$existing" ]; then \
            group=$(id -gn "$existing"); \
            usermod -l agent -d /home/agent -m -s /bin/bash "$existing"; \
            getent group agent >/dev/null || groupmod -n agent "$group"; \
        else \
            getent group 1000 >/dev/null || groupadd -g 1000 agent; \
            useradd -m -u 1000 -g 1000 -d /home/agent -s /bin/bash agent; \
        fi; \
    fi; \
    mkdir -p /workspace; \
    chown agent: /workspace

ARG CLAUDE_CODE_VERSION=2.1.330
ARG CODEX_VERSION=0.169.0
RUN set -eu; \
    pkgs=""; \
    [ -z "$CLAUDE_CODE_VERSION" ] || pkgs="$pkgs @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"; \
    [ -z "$CODEX_VERSION" ] || pkgs="$pkgs @openai/codex@$CODEX_VERSION"; \
    if [ -n "$pkgs" ]; then \
        if ! command -v npm >/dev/null 2>&1; then \
            apt-get update; \
            DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm; \
            rm -rf /var/lib/apt/lists/*; \
        fi; \
        npm install -g --no-audit --no-fund $pkgs; \
        npm cache clean --force; \
    fi

COPY entrypoint.sh /usr/local/bin/agent-hub-entrypoint
RUN chmod 0755 /usr/local/bin/agent-hub-entrypoint

USER agent
WORKDIR /workspace
# Tells the hub that this entrypoint starts the tmux session `agent` (start_tmux = "auto").
LABEL io.agent-hub.starts-tmux="true"
ENTRYPOINT ["/usr/local/bin/agent-hub-entrypoint"]
CMD ["bash"]
