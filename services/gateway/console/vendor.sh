#!/usr/bin/env bash
# Re-vendor the console's front-end libraries from package-lock.json into the gateway
# package (muster_gateway/static/vendor/), so that `make run` needs nothing but Python.
#   vendor.sh          install from the lockfile (npm ci) and copy the files
#   vendor.sh --check  the same into a scratch folder; fail if it differs from what is committed
# node_modules/ also holds axe-core, which the browser tests inject.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="$here/../muster_gateway/static/vendor"
cd "$here"
npm ci --no-audit --no-fund --loglevel=error >/dev/null

out="$target"
if [[ "${1:-}" == "--check" ]]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

# name in the package → name served; source maps are not shipped, so their comments go.
copy() {
  sed -e '/^\/\/# sourceMappingURL=/d' -e 's|//# sourceMappingURL=[^ ]*$||' "node_modules/$1" >"$out/$2"
}
copy preact/dist/preact.mjs preact.mjs
copy preact/hooks/dist/hooks.mjs hooks.mjs
copy htm/dist/htm.mjs htm.mjs
copy marked/lib/marked.esm.js marked.mjs
copy dompurify/dist/purify.es.mjs purify.mjs
# The browser has no import map here (an inline one would need 'unsafe-inline' in the CSP):
# the hooks module's bare `preact` import becomes a relative one.
sed -i -e 's|from"preact"|from"./preact.mjs"|g' -e "s|from 'preact'|from './preact.mjs'|g" "$out/hooks.mjs"
for pkg in preact htm marked dompurify; do
  cp "node_modules/$pkg/LICENSE" "$out/$pkg.LICENSE" 2>/dev/null || cp node_modules/$pkg/LICENSE* "$out/$pkg.LICENSE"
done

if [[ "$out" != "$target" ]]; then
  if ! diff -r "$target" "$out"; then
    echo "vendor.sh: the committed files differ from a rebuild; run services/gateway/console/vendor.sh" >&2
    exit 1
  fi
  echo "vendor.sh: committed vendor files equal the rebuild"
fi
