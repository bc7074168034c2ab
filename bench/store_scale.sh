#!/usr/bin/env bash
# A SQLite store of a billion points (issue 56). A benchmark, not a test: it prints figures and
# asserts nothing.
#   store    expctl_make_scale_store writes POINTS points shaped like training series (a 1 000 000-
#            step run, 2-rank 100 000-step runs, thousands of short runs: bench/store/
#            make_scale_store.cpp) straight into a new store as sealed chunks: the runs, points,
#            the generation's time, the file's bytes and bytes per point
#   list     `expctl list`: the first call and the median of REPEAT (target 0.3 s)
#   compare  `expctl compare A B` of two 2-rank 100 000-step runs: first and median (target 0.3 s)
#   chart    the 1 000 000-step run's page: /api/series of its loss as the page asks for it (curl,
#            median of REPEAT), its bytes, the same at points=600 (read from the chunk headers),
#            and ms from navigation to the first chart drawn in headless Chromium
#            (bench/serve/first_chart.mjs, median of REPEAT loads; target 1 s)
#
#   bench/store_scale.sh [BUILD_DIR]    # default build/ci
#   knobs: POINTS=1e9 THREADS=$(nproc) REPEAT=5 PARTS="list compare chart" KEEP=1 (keep the store,
#          printed) TMPDIR=/tmp (the store needs about 5 bytes a point there)
# Needs expctl and expctl_make_scale_store (built with the tests), curl, node, chromium and
# tests/browser/node_modules (scripts/install-deps.sh) for the chart. Run it on an idle machine.
set -euo pipefail
source "$(dirname "$0")/common.sh"
root="$(cd "$(dirname "$0")/.." && pwd)"
here="$root/bench"
build="$(cd "${1:-build/ci}" && pwd)"
points=${POINTS:-1e9}
threads=${THREADS:-$(nproc)}
repeat=${REPEAT:-5}
parts=${PARTS:-list compare chart}
expctl="$build/expctl"
generator="$build/bench/store/expctl_make_scale_store"
for binary in "$expctl" "$generator"; do
  [[ -x "$binary" ]] || { echo "store_scale.sh: error: $binary not found: build it with ninja -C $build expctl expctl_make_scale_store" >&2; exit 2; }
done
busy() { compiler_running && echo " (a compiler was running: not comparable)" || true; }
work=$(mktemp -d "${TMPDIR:-/tmp}/store-scale.XXXXXX")
pids=()
if [[ -n "${KEEP:-}" ]]; then
  on_exit 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; echo "kept: $work"'
else
  on_exit 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$work"'
fi
echo "machine: $(nproc --all) cores, load $(cut -d' ' -f1-3 /proc/loadavg)$(busy)"
db="$work/store.db"

"$generator" --db "$db" --points "$points" --threads "$threads" >"$work/made"
made() { sed -n "s/^$1 //p" "$work/made"; }
long=$(made long) a=$(made a) b=$(made b)
stored=$(made points)
bytes=$(( $(stat -c %s "$db") + $(stat -c %s "$db-wal" 2>/dev/null || echo 0) ))
echo "store: $(made runs) runs, $stored points, written in $(made seconds | awk '{ printf "%.0f", $1 }') s on $threads threads$(busy)"
echo "store: file $bytes bytes ($(awk -v b="$bytes" 'BEGIN { printf "%.2f", b / 1e9 }') GB), $(awk -v b="$bytes" -v p="$stored" 'BEGIN { printf "%.2f", b / p }') bytes per point"

# The first call, then the median of $repeat: "FIRST MEDIAN".
first_and_median() {
  local first
  first=$(wall_seconds "$@")
  echo "$first $(for _ in $(seq "$repeat"); do wall_seconds "$@"; done | median)"
}
if [[ " $parts " == *" list "* ]]; then
  read -r first middle < <(first_and_median "$expctl" --db "$db" list)
  echo "list: first $first s, median $middle s of $repeat (target 0.3 s)$(busy)"
fi
if [[ " $parts " == *" compare "* ]]; then
  read -r first middle < <(ok_status=3 first_and_median "$expctl" --db "$db" compare "$a" "$b")
  echo "compare: $a vs $b (2 ranks x 100 000 steps each): first $first s, median $middle s of $repeat (target 0.3 s)$(busy)"
fi
if [[ " $parts " == *" chart "* ]]; then
  token=bench-token-0123456789abcdef
  echo "$token" >"$work/token"
  chmod 600 "$work/token"  # expctl serve refuses a token file others can read
  serve "$db"
  # What the run page asks for its first chart (assets/app.js: the loss at its default budget).
  request="/api/series?id=$long&metric=loss"  # x=step, points=1000: the page's defaults
  answer=$(curl -s -H "Authorization: Bearer $token" "http://127.0.0.1:$port$request" | wc -c)
  api_first=$(get "$request" | ms)
  api=$(for _ in $(seq "$repeat"); do get "$request"; done | median | ms)
  echo "chart: /api/series of the 1 000 000-step loss: $answer bytes; first $api_first ms, median $api ms of $repeat$(busy)"
  # The same series at 600 points: 200 buckets of 5 000 points, drawn from the chunks' headers.
  coarse=$(for _ in $(seq "$repeat"); do get "$request&x=step&points=600"; done | median | ms)
  echo "chart: the same at points=600 (buckets wider than a chunk: from the chunk headers): median $coarse ms of $repeat$(busy)"
  out=$(node "$here/serve/first_chart.mjs" "http://127.0.0.1:$port/run?id=$long&token=$token" chart "$repeat")
  echo "chart: the run page's first chart drawn in $(echo "$out" | sed -n 's/^ms //p' | median) ms (median of $repeat loads in headless Chromium; all: $(echo "$out" | sed -n 's/^ms //p'); target 1 s)$(busy)"
  stop_serve
fi
