# The test image with the pinned Claude Code and Codex at /clis, as tests/agent-clis/node_modules
# lays them out (/clis/.bin/claude, /clis/.bin/codex), and Codex's static binary at /codex/bin/codex
# (the test image has no node for .bin/codex's launcher). The tests mount node_modules at /clis on
# the local engine; the remote engine cannot see the hub's files, so it gets them in an image.
# Built by tests/rig/remote-engine.sh from a context of only those packages, never by hand.
ARG BASE
FROM ${BASE}
USER root
COPY @anthropic-ai /clis/@anthropic-ai/
COPY @openai /clis/@openai/
COPY .bin /clis/.bin/
RUN ln -s /clis/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl /codex
USER agent
