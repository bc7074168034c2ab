#!/usr/bin/env bash
# Times `expctl compare` over two long multi-rank runs in every report format (issue 10, item 6).
#
#   bench/compare_scale.sh [BUILD_DIR]        # default build/release
#
# Writes a store with two 100k-step 2-rank runs of one spec on one environment (every per-step
# series the runner records) and 6 earlier summary-only runs of it, then runs
# `expctl compare A B --format F` REPEAT times per format and prints the median wall time and the
# largest resident memory. Budgets on a 2-core machine: 0.5 s for text, json and markdown, 1 s for
# html. Knobs (environment): STEPS=100000 RANKS=2 HISTORY=6 REPEAT=3 KEEP=1 (keep the store).
# Needs the targets expctl and expctl_make_compare_store (built with EXPCTL_BUILD_TESTS=ON).
# Run it on an idle machine: a compile running alongside makes every figure meaningless.
set -euo pipefail
source "$(dirname "$0")/common.sh"

build=${1:-build/release}
steps=${STEPS:-100000}
ranks=${RANKS:-2}
history=${HISTORY:-6}
repeat=${REPEAT:-3}
expctl="$build/expctl"
generator="$build/bench/compare/expctl_make_compare_store"

for binary in "$expctl" "$generator"; do
  if [[ ! -x "$binary" ]]; then
    echo "compare_scale: error: $binary not found: build it with cmake --build $build --target expctl expctl_make_compare_store" >&2
    exit 2
  fi
done
if compiler_running; then
  echo "compare_scale: warning: a compiler is running on this machine; the figures below are not comparable" >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/compare-scale.XXXXXX")
if [[ -z "${KEEP:-}" ]]; then
  on_exit 'rm -rf "$work"'
fi
db="$work/expctl.db"

start=$(date +%s.%N)
mapfile -t ids < <("$generator" --db "$db" --steps "$steps" --ranks "$ranks" --history "$history")
end=$(date +%s.%N)
printf 'store: %s steps x %s ranks x 2 runs (+%s earlier runs), %s MiB, written in %.1f s\n' "$steps" "$ranks" \
  "$history" "$(( $(stat -c %s "$db") / 1048576 ))" "$(echo "$end - $start" | bc)"

# One timed compare: prints "SECONDS KIB" (GNU time's wall time and maximum resident set size).
time_compare() {
  local format=$1 out="$work/report.$1" status=0
  /usr/bin/time -f '%e %M' -o "$work/time" "$expctl" --db "$db" compare "${ids[0]}" "${ids[1]}" --format "$format" \
    -o "$out" || status=$?
  if (( status != 0 && status != 3 )); then
    echo "compare_scale: error: expctl compare --format $format exited $status" >&2
    exit 1
  fi
  cat "$work/time"
}


printf '%-9s %10s %10s %10s  %s\n' format "median s" "max MiB" budget verdict
"$expctl" --db "$db" compare "${ids[0]}" "${ids[1]}" >/dev/null || true  # warm the page cache once
over=0
for format in text json markdown html; do
  times=()
  memory=0
  for ((i = 0; i < repeat; ++i)); do
    read -r seconds kib < <(time_compare "$format")
    times+=("$seconds")
    (( kib > memory )) && memory=$kib
  done
  middle=$(printf '%s\n' "${times[@]}" | median)
  budget=0.5
  [[ $format == html ]] && budget=1.0
  verdict=ok
  if (( $(echo "$middle > $budget" | bc) )); then
    verdict=OVER
    over=1
  fi
  printf '%-9s %10s %10s %10s  %s\n' "$format" "$middle" "$(( memory / 1024 ))" "$budget" "$verdict"
done
echo "first line: $(head -n 1 "$work/report.text")"
[[ -n "${KEEP:-}" ]] && echo "store kept in $work"
exit "$over"
