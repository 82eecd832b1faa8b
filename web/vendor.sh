#!/usr/bin/env bash
# Re-vendors the dashboard's front-end dependencies: installs exactly what package-lock.json
# pins from the npm registry (`npm ci`, no install scripts) and copies the ES-module builds,
# the stylesheet and each package's LICENSE into web/vendor/, which is committed. The hub
# embeds web/ at compile time, so building it needs neither node nor npm; only this script
# does. To upgrade: change the versions in package.json, `npm install --package-lock-only
# --ignore-scripts`, run this script, rebuild, run the browser tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp package.json package-lock.json "$work/"
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)

out=vendor
rm -rf "$out"
mkdir -p "$out"
copy() { # package, file in the package, name in vendor/
    cp "$work/node_modules/$1/$2" "$out/$3"
}
copy @xterm/xterm lib/xterm.mjs xterm.mjs
copy @xterm/xterm css/xterm.css xterm.css
copy @xterm/xterm LICENSE LICENSE.xterm
for addon in fit search web-links; do
    copy "@xterm/addon-$addon" "lib/addon-$addon.mjs" "addon-$addon.mjs"
    copy "@xterm/addon-$addon" LICENSE "LICENSE.addon-$addon"
done
# Source maps are not shipped: drop the comments that point at them.
sed -i '/^\/\/# sourceMappingURL=/d' "$out"/*.mjs
node -e 'const l=require(process.argv[1]);for(const[k,v]of Object.entries(l.packages))if(k)console.log(k.replace("node_modules/",""),v.version,v.integrity)' \
    "$work/package-lock.json" >"$out/VERSIONS"
ls -l "$out"
