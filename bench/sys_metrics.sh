#!/usr/bin/env bash
# What the per-rank system metrics (sys_cpu_percent, sys_rss_mb: the supervisor reads /proc once a
# second, docs/run.md) cost the quick start, two ways (issue 55: "within 1 % of off"):
#   1. interleaved pairs of `expctl run experiments/quickstart.yaml` with EXPCTL_SYS_METRICS=0 and
#      without (on), the order alternating; per run the median step_time_ms of rank 0 after 10
#      warm-up steps, the same statistic on both sides; the median of the pairs' ratios on/off
#      (> 1: slower with them on). A shared machine's run-to-run noise is 10-20 %, so this bounds
#      the cost only coarsely.
#   2. with perf (Debian: linux-perf), the share of all CPU samples of a run (supervisor and ranks)
#      spent reading /proc for them (read_process_tree and what it calls): the cost itself.
#
#   bench/sys_metrics.sh [BUILD_DIR] [PAIRS]     # defaults: build/ci 7; SKIP_PERF=1 skips part 2
#   EXTERNAL=1 bench/sys_metrics.sh ...            # part 1 as one rank under torchrun's variables
#                                                  # (no supervisor: rank 0 samples itself)
# A benchmark: it prints figures and asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
build=${1:-build/ci}
pairs=${2:-7}
expctl="$build/expctl"
[[ -x $expctl ]] || { echo "sys_metrics.sh: $expctl not found: build first (cmake --build --preset ci)" >&2; exit 2; }
work=$(mktemp -d)
on_exit 'rm -rf "$work"'
py=/usr/bin/python3

step_median() {  # MODE (on|off): rank 0's median step time (ms) after 10 steps, of a new run
  local mode=$1 db="$work/$1.db"
  rm -f "$db"*
  local -a run=("$expctl" --db "$db" -q run experiments/quickstart.yaml)
  if [[ -n ${EXTERNAL:-} ]]; then
    run=(env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=0 MASTER_ADDR=127.0.0.1
      MASTER_PORT=$((20000 + RANDOM % 20000)) "${run[@]}" --set distributed.nproc_per_node=1)
  fi
  if [[ $mode == off ]]; then
    EXPCTL_SYS_METRICS=0 "${run[@]}" >/dev/null
  else
    "${run[@]}" >/dev/null
  fi
  # Through expctl (the store keeps series as compressed chunks): rank 0's points in step order.
  local id
  id=$("$expctl" --db "$db" -q list --format json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["id"])')
  "$expctl" --db "$db" -q show "$id" --series step_time_ms --format json | "$py" -c '
import json, statistics, sys
points = sorted((p["step"], p["value"]) for p in json.load(sys.stdin)["points"] if p["rank"] == 0)
print(statistics.median([v for _, v in points][10:]))'
}

echo "machine: $(nproc --all) cores; $(date -u +%FT%TZ); expctl $(git rev-parse --short HEAD)"
compiler_running && echo "warning: a compiler is running: these figures are not worth much" >&2
echo "== 1. interleaved pairs, quick start${EXTERNAL:+ (one rank under torchrun variables)}, median step_time_ms of rank 0 (ratio on/off)"
ratios=""
for ((i = 1; i <= pairs; ++i)); do
  if ((i % 2)); then on=$(step_median on); off=$(step_median off); else off=$(step_median off); on=$(step_median on); fi
  ratio=$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.4f", a / b }')
  ratios="$ratios $ratio"
  printf 'pair %d  on %.3f ms  off %.3f ms  ratio %s\n' "$i" "$on" "$off" "$ratio"
done
printf 'median ratio on/off %s (range %s .. %s)\n' "$(echo "$ratios" | median)" \
  "$(echo "$ratios" | sorted_values | head -n1)" "$(echo "$ratios" | sorted_values | tail -n1)"

if [[ -z ${SKIP_PERF:-} ]] && command -v perf >/dev/null; then
  echo "== 2. perf: share of the run's CPU samples spent reading /proc for the system metrics"
  for ((i = 1; i <= 3; ++i)); do
    rm -f "$work/perf.db"*
    perf record -q -g -F 4000 -o "$work/perf.data" -- "$expctl" --db "$work/perf.db" -q run experiments/quickstart.yaml \
      >/dev/null 2>"$work/perf.err"
    total=$(perf script -i "$work/perf.data" -F period 2>/dev/null | wc -l)
    # Samples with read_process_tree anywhere on their stack (children included): the "Samples"
    # column of its line (0 when it is below perf's resolution).
    inside=$(perf report -i "$work/perf.data" --children -n --sort sym --stdio -g none 2>/dev/null |
      awk '/read_process_tree/ && !found { print $3; found = 1 }' || true)
    printf 'run %d: read_process_tree and below in %s of %s samples\n' "$i" "${inside:-0}" "$total"
  done
fi
