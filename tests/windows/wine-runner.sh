#!/usr/bin/env bash
# Cargo's runner for x86_64-pc-windows-gnu (.cargo/config.toml): runs a Windows test executable
# under Wine, as `wine-runner.sh <exe> <args...>`, and exits with its exit code.
#
#   cargo test --target x86_64-pc-windows-gnu --lib
#
# It also runs any other Windows executable the same way (the release agent-hub.exe, say).
#
# - Wine 8 (Debian 12's) has no bcryptprimitives.dll, whose ProcessPrng Rust's std imports: no
#   Rust .exe starts without it. A test-only stand-in (tests/windows/bcryptprimitives.c) is built
#   here with mingw, when missing or older than its source, into
#   <target dir>/x86_64-pc-windows-gnu/wine-stand-in/, and copied beside the exe. Never shipped.
# - A Wine prefix of its own: $AGENT_HUB_WINEPREFIX, else /tmp/agent-hub-wine (WINEPREFIX is
#   not taken from the environment, so a developer's own prefix is never touched). Created on
#   first use with `wineboot --init`, quietly (a few seconds; its output goes to
#   <prefix>.init.log), under a lock so that parallel runs create it once.
# - No display, no dialogs: DISPLAY unset, Mono and Gecko (their install prompts) and the menu
#   builder disabled, WINEDEBUG=-all.
#
# Environment: AGENT_HUB_WINEPREFIX (the prefix), AGENT_HUB_WINE (the wine binary; default
# wine64 on PATH, else /usr/lib/wine/wine64, Debian's wine64 package, else wine),
# AGENT_HUB_MINGW_CC (default x86_64-w64-mingw32-gcc).
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 <program.exe> [args...]" >&2
    exit 2
fi
exe=$1
shift
if [[ ! -f $exe ]]; then
    echo "wine-runner: no such executable: $exe" >&2
    exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$here/bcryptprimitives.c
cc=${AGENT_HUB_MINGW_CC:-x86_64-w64-mingw32-gcc}
exe_dir=$(cd "$(dirname "$exe")" && pwd)
exe=$exe_dir/$(basename "$exe")

# The wine binary.
wine=${AGENT_HUB_WINE:-}
if [[ -z $wine ]]; then
    if command -v wine64 >/dev/null 2>&1; then
        wine=$(command -v wine64)
    elif [[ -x /usr/lib/wine/wine64 ]]; then
        wine=/usr/lib/wine/wine64
    elif command -v wine >/dev/null 2>&1; then
        wine=$(command -v wine)
    else
        echo "wine-runner: no wine64 (Debian: apt-get install wine64)" >&2
        exit 2
    fi
fi

# Where the stand-in DLL is built: <target dir>/x86_64-pc-windows-gnu/wine-stand-in, found
# from the exe's path (…/x86_64-pc-windows-gnu/<profile>/deps/x.exe); else beside the exe.
dll_dir=$exe_dir
d=$exe_dir
while [[ $d != / && -n $d ]]; do
    if [[ $(basename "$d") == x86_64-pc-windows-gnu ]]; then
        dll_dir=$d/wine-stand-in
        break
    fi
    d=$(dirname "$d")
done
dll=$dll_dir/bcryptprimitives.dll
# Built into a temporary file and renamed: runs in parallel never see half a DLL.
if [[ ! -f $dll || $src -nt $dll ]]; then
    mkdir -p "$dll_dir"
    tmp=$(mktemp "$dll_dir/.bcryptprimitives.XXXXXX")
    if ! "$cc" -shared -O2 -s -o "$tmp" "$src" -ladvapi32; then
        rm -f "$tmp"
        echo "wine-runner: building the bcryptprimitives.dll stand-in with $cc failed" >&2
        exit 2
    fi
    chmod 0755 "$tmp"
    mv -f "$tmp" "$dll"
fi
if [[ $exe_dir != "$dll_dir" ]] && ! cmp -s "$dll" "$exe_dir/bcryptprimitives.dll"; then
    tmp=$(mktemp "$exe_dir/.bcryptprimitives.XXXXXX")
    cp "$dll" "$tmp"
    chmod 0755 "$tmp"
    mv -f "$tmp" "$exe_dir/bcryptprimitives.dll"
fi

export WINEPREFIX=${AGENT_HUB_WINEPREFIX:-/tmp/agent-hub-wine}
export WINEDEBUG=-all
# Mono (mscoree) and Gecko (mshtml) disabled: no prompt to install them; no menu entries.
export WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d${WINEDLLOVERRIDES:+;$WINEDLLOVERRIDES}"
unset DISPLAY WAYLAND_DISPLAY

# The prefix, created once: the marker is written when wineboot has succeeded.
ready=$WINEPREFIX/.agent-hub-ready
if [[ ! -f $ready ]]; then
    mkdir -p "$(dirname "$WINEPREFIX")"
    (
        flock 9
        if [[ ! -f $ready ]]; then
            t0=${EPOCHREALTIME/[.,]/}
            # fd 9 closed for wine: the wineserver it starts outlives this and would hold the lock.
            if ! "$wine" wineboot --init </dev/null >"$WINEPREFIX.init.log" 2>&1 9>&-; then
                echo "wine-runner: wineboot --init failed for $WINEPREFIX (log: $WINEPREFIX.init.log)" >&2
                exit 2
            fi
            touch "$ready"
            t1=${EPOCHREALTIME/[.,]/}
            echo "wine-runner: created the Wine prefix $WINEPREFIX in $(((t1 - t0) / 1000)) ms" >&2
        fi
    ) 9>"$WINEPREFIX.lock"
fi

exec "$wine" "$exe" "$@"
