#!/usr/bin/env bash
# False alarms of the A/B verdict on this machine: K identical runs of the quick start, one after
# another, then `expctl compare` of every pair (each with the store's history, as a user would
# run it). Prints the runs' samples/s spread, the verdict of each pair and the count of pairs that
# exit 3 (the goal: 0 of 28 for K = 8).
# Usage: bench/false_positives.sh [BUILD_DIR] [K] [STEPS]   (defaults: build/ci 8 80)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
build=${1:-build/ci}
runs=${2:-8}
steps=${3:-80}
expctl="$build/expctl"
[[ -x $expctl ]] || { echo "false_positives.sh: $expctl not found: build first (cmake --build --preset ci)" >&2; exit 2; }
work=$(mktemp -d)
on_exit 'rm -rf "$work"'
db="$work/expctl.db"
echo "== $runs identical runs of experiments/quickstart.yaml (train.max_steps=$steps)"
ids=()
for ((i = 1; i <= runs; i++)); do
  "$expctl" --db "$db" -q run experiments/quickstart.yaml --set "train.max_steps=$steps" --format json >"$work/run.json"
  id=$(python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print(d["run"]["id"], round(d["summary"]["samples_per_sec"]))' "$work/run.json")
  echo "run $i: $id samples/s"
  ids+=("${id%% *}")
done
pairs=0
alarms=0
declare -A verdicts=()
for ((i = 0; i < runs; i++)); do
  for ((j = i + 1; j < runs; j++)); do
    code=0
    "$expctl" --db "$db" compare "${ids[$i]}" "${ids[$j]}" --format json >"$work/cmp.json" || code=$?
    verdict=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1])).get("outcome","?"))' "$work/cmp.json" 2>/dev/null || echo "?")
    verdicts[$verdict]=$((${verdicts[$verdict]:-0} + 1))
    pairs=$((pairs + 1))
    [[ $code -eq 3 ]] && alarms=$((alarms + 1))
  done
done
echo "== verdicts over $pairs pairs: $(for v in "${!verdicts[@]}"; do printf '%s=%s ' "$v" "${verdicts[$v]}"; done)"
echo "false positives (exit 3): $alarms of $pairs pairs"
