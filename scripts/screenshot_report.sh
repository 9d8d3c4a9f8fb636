#!/usr/bin/env bash
# Screenshot an HTML report with headless Debian Chromium (installs it when missing).
#   scripts/screenshot_report.sh REPORT.html OUT.png [WIDTHxHEIGHT]
set -euo pipefail
report=${1:?usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]}
out=${2:?usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]}
size=${3:-1400x3000}
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  browser=$(command -v chromium)
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --window-size="${size/x/,}" \
  --screenshot="$(realpath -m "$out")" "file://$(realpath "$report")" >/dev/null 2>&1
test -s "$out"
echo "$out"
