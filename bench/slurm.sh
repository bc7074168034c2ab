#!/usr/bin/env bash
# expctl on a real Slurm (issue 54's two figures), on a throwaway single-node cluster
# (scripts/slurm-throwaway.sh, root and Debian's slurm packages needed):
#   1. submission to first step: `expctl run SPEC --slurm --wait` against the same run started
#      locally (`expctl run SPEC`), interleaved pairs, the order alternating. Slurm side: from just
#      before the command to the first step = (the run's recorded submission time - the start)
#      + summary.slurm.queued_s (submission to the job's expctl starting) + the job's
#      time_to_first_step_s; local side: its time_to_first_step_s (from the process's start). The
#      same statistic both sides (median), and the median of the per-pair differences. Target: <= 2 s more.
#   2. requeue at step ~150 of a 400-step Fashion-MNIST MLP run (2 ranks, checkpoints every 50
#      steps): `scontrol requeue` once rank 0 stored step 150, Slurm's 120 s BeginTime hold lifted,
#      the run resumed by the job. Prints the steps trained twice (the last step trained before the
#      stop minus the checkpoint step it resumed from; target: <= the checkpoint interval) and
#      whether the run's loss_curve_sha256 equals an uninterrupted local run's.
#
#   bench/slurm.sh [BUILD_DIR] [PAIRS]     # defaults: build/ci 5
# A benchmark: it prints figures and asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
build=${1:-build/ci}
pairs=${2:-5}
expctl="$(cd "$build" && pwd)/expctl"
[[ -x $expctl ]] || { echo "slurm.sh: $expctl not found: build first (cmake --build --preset ci)" >&2; exit 2; }
work=$(mktemp -d)
cluster="$work/cluster"
on_exit 'scripts/slurm-throwaway.sh stop "$cluster" >/dev/null 2>&1 || true; rm -rf "$work"'
conf=$(scripts/slurm-throwaway.sh start "$cluster" | tail -n 1)
export SLURM_CONF=$conf OMP_NUM_THREADS=1
py=/usr/bin/python3
spec=experiments/tiny-synthetic.yaml
sets=(--set train.max_steps=50 --set distributed.nproc_per_node=2)
compiler_running && echo "note: a compiler is running: the figures are noisier than on an idle machine"

field() {  # JSON-FILE EXPRESSION (Python over `d`)
  "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

local_first_step() {
  "$expctl" --db "$work/local.db" -q run "$spec" "${sets[@]}" --format json >"$work/local.json"
  field "$work/local.json" 'd["summary"]["time_to_first_step_s"]'
}

slurm_first_step() {
  local start
  start=$(date +%s.%N)
  "$expctl" --db "$work/slurm.db" -q run "$spec" "${sets[@]}" --slurm --wait --format json >"$work/slurm.json"
  "$py" - "$work/slurm.json" "$start" <<'PY'
import datetime, json, sys
d = json.load(open(sys.argv[1]))
submitted = datetime.datetime.strptime(d["run"]["started_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
    tzinfo=datetime.timezone.utc).timestamp()
s = d["summary"]
print((submitted - float(sys.argv[2])) + s["slurm"]["queued_s"] + s["time_to_first_step_s"])
PY
}

if [[ ${SKIP_FIRST:-0} == 0 ]]; then
echo "== 1. submission to first step (tiny spec, 2 ranks; $pairs interleaved pairs)"
locals=() slurms=() diffs=()
for ((i = 0; i < pairs; ++i)); do
  if ((i % 2 == 0)); then l=$(local_first_step); s=$(slurm_first_step); else s=$(slurm_first_step); l=$(local_first_step); fi
  locals+=("$l") slurms+=("$s") diffs+=("$(echo "$s - $l" | bc -l)")
  printf '  pair %d: local %.3f s, slurm %.3f s, more %.3f s\n' "$i" "$l" "$s" "${diffs[-1]}"
done
printf 'median: local %.3f s, slurm %.3f s; median extra %.3f s (target <= 2 s)\n' \
  "$(echo "${locals[@]}" | median)" "$(echo "${slurms[@]}" | median)" "$(echo "${diffs[@]}" | median)"
fi

echo "== 2. requeue at step ~150 of 400 (Fashion-MNIST MLP, 2 ranks, checkpoint every 50 steps)"
req=(--set train.max_steps=400 --set train.checkpoint_every=50 --set train.eval_every=0 --set metrics.log_every=10)
db="$work/requeue.db"
id=$("$expctl" --db "$db" -q run bench/fashion-mlp.yaml "${req[@]}" --slurm)
job=$("$py" -c 'import sqlite3,sys; print([t for (t,) in sqlite3.connect(sys.argv[1]).execute("SELECT tag FROM tags WHERE run_id=?", (sys.argv[2],)) if t.startswith("slurm-job:")][0][10:])' "$db" "$id")
stored() {  # rank 0's loss points stored so far (through expctl: the store keeps series as chunks)
  "$expctl" --db "$db" -q show "$id" --series loss --format json |
    "$py" -c 'import json,sys; d=json.load(sys.stdin); print(sum(1 for p in d["points"] if p["rank"] == 0))'
}
status() { "$py" -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT status, root_cause FROM runs WHERE id=?", (sys.argv[2],)).fetchone()[0])' "$db" "$id"; }
until (($(stored) >= 150)); do sleep 0.05; done
scontrol requeue "$job"
until [[ $(status) == queued ]]; do sleep 0.1; done
last=$(stored)
cause=$("$py" -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT root_cause FROM runs WHERE id=?", (sys.argv[2],)).fetchone()[0])' "$db" "$id")
resumed_from=$(echo "$cause" | grep -o 'checkpoint at step [0-9]*' | grep -o '[0-9]*$')
until squeue -h -j "$job" -t PD -o %i | grep -q .; do sleep 0.2; done
# Not in the second of the requeue: the node revoked the job's credential then, and refuses a start
# in that second (the job fails). Slurm's own 120 s hold is there for that.
sleep 2
# Slurm sets the requeued job's BeginTime again when its first run has finished completing, which
# can overwrite one StartTime=now: say it each second while the job is pending.
while squeue -h -j "$job" -t PD -o %i | grep -q .; do
  scontrol update JobId="$job" StartTime=now 2>/dev/null || true
  sleep 1
done
until [[ $(status) == completed || $(status) == failed || $(status) == interrupted ]]; do sleep 0.5; done
echo "  stopped after step $last, resumed from the checkpoint at step $resumed_from: $((last - resumed_from)) step(s) trained twice (checkpoint interval 50)"
echo "  run $id: $(status)"
"$expctl" --db "$db" -q show "$id" --format json >"$work/requeued.json"
"$expctl" --db "$work/reference.db" -q run bench/fashion-mlp.yaml "${req[@]}" --format json >"$work/reference.json"
a=$(field "$work/requeued.json" 'd["summary"]["loss_curve_sha256"]')
b=$(field "$work/reference.json" 'd["summary"]["loss_curve_sha256"]')
echo "  loss_curve_sha256 requeued $a"
echo "  loss_curve_sha256 local    $b"
[[ $a == "$b" ]] && echo "  equal: the requeued run's loss curve is the uninterrupted run's" || echo "  DIFFERENT"
echo "  invocations $(field "$work/requeued.json" 'd["summary"]["invocations"]'), restarts $(field "$work/requeued.json" 'd["summary"]["slurm"]["restarts"]')"
