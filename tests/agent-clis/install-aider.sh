#!/usr/bin/env bash
# Installs the real Aider the tests drive (tests/it/real_cli_aider.rs): aider-chat at the version
# pinned in requirements.txt, into the venv tests/agent-clis/venv, with uv (seconds, where pip
# takes over a minute). aider-chat pins each of its dependencies exactly. Does nothing when the
# venv already holds the pinned version; prints the version either way. Needs python3 3.10 to
# 3.12 (aider-chat 0.86.2 refuses 3.13). Used by .ci/run; run it by hand the same way:
#   bash tests/agent-clis/install-aider.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=$here/venv
version=$(sed -n 's/^aider-chat==//p' "$here/requirements.txt")
installed() {
    "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("aider-chat"))' 2>/dev/null
}
if [[ ! -x $venv/bin/aider || $(installed) != "$version" ]]; then
    start=$EPOCHSECONDS
    rm -rf "$venv"
    # A venv of its own, uv included: nothing of the machine's Python changes.
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check uv
    "$venv/bin/python" -m uv pip install --quiet --python "$venv/bin/python" -r "$here/requirements.txt"
    echo "installed aider-chat $version in $((EPOCHSECONDS - start)) s ($(du -sh "$venv" | cut -f1))"
fi
"$venv/bin/aider" --version
