#!/usr/bin/env bash
# Renders an HTML report in headless Chromium and checks that the browser's DOM has its plots with
# their data. compare (`expctl compare --format html`): the loss curves' polylines, the
# throughput histogram's bars, the verdict and the spec and environment tables. sweep (`expctl
# sweep --report --format html`): a plot per metric and axis with each run, each median and a
# spread bar, the configuration table and the notes.
# Usage: scripts/render_html_check.sh [compare|sweep] REPORT.html     (default: compare)
# Exit 0 when the plots are there, 1 when not, 77 (ctest SKIP) when no chromium is installed.
set -euo pipefail
# skip NEED WHY: exit 77 (ctest: Skipped); with EXPCTL_REQUIRE_ALL=1 (.ci/run) exit 1 instead, naming
# what is missing, unless NEED is one of EXPCTL_ALLOWED_SKIPS (docs/contributing.md, "Skips").
skip() {
  local allowed="${EXPCTL_ALLOWED_SKIPS:-}"
  if [[ "${EXPCTL_REQUIRE_ALL:-}" == 1 && " ${allowed//,/ } " != *" $1 "* ]]; then
    echo "FAIL: EXPCTL_REQUIRE_ALL=1 but this test cannot run here: $1 is missing ($2)" >&2
    exit 1
  fi
  echo "SKIP: $2" >&2
  exit 77
}
kind=compare
if [[ "${1:-}" == compare || "${1:-}" == sweep ]]; then
  kind="$1"
  shift
fi
report="${1:?usage: render_html_check.sh [compare|sweep] REPORT.html}"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
[[ -n "$browser" ]] || skip chromium "no chromium installed (apt-get install chromium), so the HTML report was not rendered"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
dom="$profile/dom.html"
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile/user" --dump-dom "file://$(realpath "$report")" >"$dom" 2>"$profile/stderr" || {
  echo "chromium failed to render $report:" >&2
  tail -5 "$profile/stderr" >&2
  exit 1
}
failed=0
expect() {
  local pattern="$1" what="$2"
  if ! grep -Eq "$pattern" "$dom"; then
    echo "FAIL: the rendered DOM has no $what (pattern: $pattern)" >&2
    failed=1
  fi
}
if [[ "$kind" == compare ]]; then
  expect '<svg id="loss-curves"' "loss-curve plot"
  expect '<polyline class="curve-a"[^>]* points="[0-9]' "loss curve of A with points"
  expect '<polyline class="curve-b"[^>]* points="[0-9]' "loss curve of B with points"
  expect '<svg id="throughput"' "throughput plot"
  expect '<rect class="bar-a"' "throughput bars of A"
  expect '<rect class="bar-b"' "throughput bars of B"
  expect '<h1 id="verdict"' "verdict heading"
  expect '<h2>Spec differences</h2>' "spec diff section"
  expect '<h2>Environment differences</h2>' "environment diff section"
else
  expect '<svg id="plot-[^"]*"' "plot of a metric against an axis"
  expect '<circle class="run" cx="[0-9]' "run marks with positions"
  expect '<circle class="median" cx="[0-9]' "median marks with positions"
  expect '<line class="spread"' "run-to-run spread bar"
  expect '<table id="configurations"' "configuration table"
  expect '<ul id="notes"' "notes"
fi
if [[ "$failed" -ne 0 ]]; then
  exit 1
fi
echo "ok: $kind report $report renders in $("$browser" --version 2>/dev/null | head -1) with its plots"
