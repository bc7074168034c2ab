#!/usr/bin/env bash
# The quick start's step time, this build against another expctl binary (an older main's, say),
# in interleaved pairs (the order alternating): per run the summary's step_time_ms_p50, the same
# statistic on both sides; prints each pair's ratio this/base and the median of the ratios
# (issue 56: "the quick start's step time within 1 % of today's").
#
#   bench/quickstart_ab.sh BASE_EXPCTL [BUILD_DIR] [PAIRS]     # defaults: build/ci 7
# A benchmark: it prints figures and asserts nothing. Run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
base=${1:?usage: bench/quickstart_ab.sh BASE_EXPCTL [BUILD_DIR] [PAIRS]}
build=${2:-build/ci}
pairs=${3:-7}
this="$build/expctl"
for binary in "$this" "$base"; do
  [[ -x $binary ]] || { echo "quickstart_ab.sh: $binary not found: build it first" >&2; exit 2; }
done
work=$(mktemp -d)
on_exit 'rm -rf "$work"'

p50() {  # BINARY TAG: a new quick start's step_time_ms_p50
  rm -rf "$work/$2"*
  "$1" --db "$work/$2.db" -q run experiments/quickstart.yaml --format json >"$work/$2.json"
  /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"]["step_time_ms_p50"])' "$work/$2.json"
}

echo "machine: $(nproc --all) cores; $(date -u +%FT%TZ); this $(git rev-parse --short HEAD), base $base"
compiler_running && echo "warning: a compiler is running: these figures are not worth much" >&2
ratios=""
for ((i = 1; i <= pairs; ++i)); do
  if ((i % 2)); then new=$(p50 "$this" this); old=$(p50 "$base" base); else old=$(p50 "$base" base); new=$(p50 "$this" this); fi
  ratio=$(awk -v a="$new" -v b="$old" 'BEGIN { printf "%.4f", a / b }')
  ratios="$ratios $ratio"
  printf 'pair %d  this %.3f ms  base %.3f ms  ratio %s\n' "$i" "$new" "$old" "$ratio"
done
printf 'median ratio this/base %s (range %s .. %s)\n' "$(echo "$ratios" | median)" \
  "$(echo "$ratios" | sorted_values | head -n1)" "$(echo "$ratios" | sorted_values | tail -n1)"
