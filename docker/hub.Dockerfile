# agent-hub itself in a container, driving the host's Docker engine through its socket.
#
#   cargo build --release && docker/build-hub.sh          # tags agent-hub/hub:latest
#   docker run -d --name agent-hub -p 8100:8100 \
#       -v /var/run/docker.sock:/var/run/docker.sock \
#       --group-add "$(stat -c %g /var/run/docker.sock)" \
#       -v agent-hub-data:/var/lib/agent-hub \
#       -v /etc/agent-hub/hub.toml:/etc/agent-hub/hub.toml:ro \
#       -e AGENT_HUB_TOKEN=... agent-hub/hub
#
# The binary is built on the host (glibc; any Debian/Ubuntu base of the same or a newer
# release runs it) and copied in: BIN names it inside the build context. BASE may be any
# Debian or Ubuntu image; one with tmux already skips the apt step (offline builds).
ARG BASE=debian:bookworm-slim
FROM ${BASE}

ARG BIN=agent-hub

ENV LANG=C.UTF-8 \
    AGENT_HUB_DATA_DIR=/var/lib/agent-hub \
    AGENT_HUB_LISTEN=0.0.0.0:8100 \
    AGENT_HUB_LOG_FORMAT=json \
    AGENT_HUB_SHELL=/bin/bash

USER root
RUN set -eu; \
    if ! command -v tmux >/dev/null 2>&1 || ! command -v ps >/dev/null 2>&1; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            tmux procps bash ca-certificates; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    getent group agent-hub >/dev/null || groupadd -g 10001 agent-hub; \
    id -u agent-hub >/dev/null 2>&1 || \
        useradd -u 10001 -g agent-hub -d /var/lib/agent-hub -s /bin/bash agent-hub; \
    mkdir -p /var/lib/agent-hub /etc/agent-hub; \
    chown agent-hub:agent-hub /var/lib/agent-hub; \
    chmod 0700 /var/lib/agent-hub

COPY ${BIN} /usr/local/bin/agent-hub
RUN chmod 0755 /usr/local/bin/agent-hub && /usr/local/bin/agent-hub --version

# Not root: give the user the socket's group with `--group-add` (see above).
USER agent-hub
WORKDIR /var/lib/agent-hub
VOLUME ["/var/lib/agent-hub"]
EXPOSE 8100
# A hub listening off loopback refuses to start without a token: set AGENT_HUB_TOKEN or
# [[tokens]] in the mounted hub.toml. AGENT_HUB_CONFIG names the config when one is mounted.
ENTRYPOINT ["/usr/local/bin/agent-hub"]
CMD ["serve"]
