#!/usr/bin/env bash
# Renders a run report in a real browser (headless Chromium, Debian's `chromium` package) and saves
# a screenshot: proof that the page draws without network, and the picture in the docs.
#
#   scripts/screenshot_report.sh out/sample/report.html docs/img/report.png [WIDTHxHEIGHT]
set -euo pipefail
page="$(realpath "$1")"
shot="$2"
size="${3:-1100x2600}"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
if [ -z "$browser" ]; then
    echo "no Chromium found: apt-get install chromium" >&2
    exit 2
fi
mkdir -p "$(dirname "$shot")"
# --no-sandbox: containers and CI runners often lack the user namespaces the sandbox needs.
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="${size/x/,}" --screenshot="$(realpath -m "$shot")" "file://$page" 2>/dev/null
echo "screenshot: $shot"
