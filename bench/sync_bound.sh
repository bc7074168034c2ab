#!/usr/bin/env bash
# Where two synchronous ranks lose against two independent loops on this machine, step by step.
# A benchmark, not a test: it prints figures and asserts nothing.
#
#   bench/sync_bound.sh [--expctl PATH] [--models "mlp cnn"] [--steps N] [--repeat R]
#
# Each repetition runs three things back to back, in an order that rotates, each with 2
# processes x 1 thread and batch 64:
#   ceiling   two bare loops at the same time (bench/bare_loop.cpp), never meeting
#   pair      bare_loop --pair: the same loops meeting at a barrier after every step (no data)
#   expctl    expctl run bench/fashion-<model>.yaml, 2 ranks (what bench/ddp_throughput.sh runs)
# and reads every step's time of every process (bare_loop --times; expctl's store). With t_r the
# step times of the independent loops, a_k and b_k the two processes' own work in step k (the
# pair: before the barrier; expctl: step time less comm_wait) and s_k the whole step, the ceiling
# over the rate factors exactly into four ratios (med = median over the steps after warm-up):
#   lockstep  mean(med a, med b) / harmonic mean(med t_0, med t_1): the same work, done in lockstep
#             (or under the runner), takes longer than when the loops run free
#   slow core max(med a, med b) / mean(med a, med b): one process's work is slower throughout
#   per-step  med max(a_k, b_k) / max(med a, med b): every step waits for whichever process
#             jittered in that step
#   sync      med s_k / med max(a_k, b_k): the barrier's or the all-reduce's own cost
# The first three are paid by any synchronous trainer whose communication costs nothing; only
# "sync" is the communication's. "rate" = 2 x batch / med s_k, "ceiling" = the loops' summed
# batch / med t_r (the definition bench/ddp_throughput.sh uses).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
source "$here/common.sh"
expctl="${EXPCTL:-}"
models="mlp cnn"
steps=300
repeat=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expctl) expctl="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "sync_bound.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
check_models sync_bound.sh $models
find_expctl sync_bound.sh

build_bare_loop

work="$(mktemp -d)"
on_exit 'rm -rf "$work"'
export OMP_NUM_THREADS=1

analyse() {  # model, repetition label, folder with ind.0 ind.1 pair.0 pair.1 and the run id
  EXPCTL_BIN="$expctl" python3 - "$@" "$work/expctl.db" "$steps" <<'EOF'
import json, os, statistics, subprocess, sys
model, label, folder, run_id, db, steps = sys.argv[1:7]
steps = int(steps)
batch = 64
warmup = min(10, steps // 10)
med = statistics.median

def column(path, index):
    return [float(line.split()[index]) for line in open(path)][warmup:]

def factors(own_a, own_b, whole, free):
    ma, mb = med(own_a), med(own_b)
    harmonic = 2.0 / (1.0 / free[0] + 1.0 / free[1])
    slower_each = med([max(a, b) for a, b in zip(own_a, own_b)])
    return {"rate": 2 * batch / med(whole), "lockstep": (ma + mb) / 2 / harmonic,
            "slow core": max(ma, mb) / ((ma + mb) / 2), "per-step": slower_each / max(ma, mb),
            "sync": med(whole) / slower_each}

free = [med(column(f"{folder}/ind.{r}", 0)) for r in (0, 1)]
ceiling = sum(batch / t for t in free)
pair = factors(column(f"{folder}/pair.0", 0), column(f"{folder}/pair.1", 0),
               [max(x, y) for x, y in zip(column(f"{folder}/pair.0", 1), column(f"{folder}/pair.1", 1))], free)
rows = []  # through expctl: a v8 store keeps series as compressed chunks
for name in ("step_time_ms", "comm_wait_ms"):
    shown = subprocess.run([os.environ["EXPCTL_BIN"], "--db", db, "-q", "show", run_id, "--series", name, "--format",
                            "json"], check=True, capture_output=True, text=True).stdout
    rows += [(name, p["rank"], p["step"], p["value"]) for p in json.loads(shown)["points"]]
series = {}
for name, rank, step, value in rows:
    series.setdefault((name, rank), {})[step] = value / 1000.0
kept = sorted(series[("step_time_ms", 0)])[warmup:]
own = [[series[("step_time_ms", r)][k] - series[("comm_wait_ms", r)][k] for k in kept] for r in (0, 1)]
whole = [max(series[("step_time_ms", 0)][k], series[("step_time_ms", 1)][k]) for k in kept]
run = factors(own[0], own[1], whole, free)
cells = lambda f: " ".join(f"{f[k]:9.3f}" for k in ("lockstep", "slow core", "per-step", "sync"))
print(f"{model + ' ' + label:<9} {ceiling:8.0f} | pair {pair['rate']:7.0f} {100 * pair['rate'] / ceiling:5.1f}% "
      f"{cells(pair)} | expctl {run['rate']:7.0f} {100 * run['rate'] / ceiling:5.1f}% "
      f"{100 * run['rate'] / pair['rate']:5.1f}% {cells(run)}")
EOF
}

print_blas
factor_names="$(printf '%9s %9s %9s %9s' lockstep 'slow core' per-step sync)"
printf '%-9s %8s | %-4s %7s %6s %s | %-6s %7s %6s %6s %s\n' "" ceiling "" rate /ceil "$factor_names" "" rate /ceil /pair "$factor_names"
run_free() {
  "${loop[@]}" --times "$work/ind.0" >/dev/null &
  local first=$!
  "${loop[@]}" --times "$work/ind.1" >/dev/null
  wait "$first"
}
run_pair() {
  "${loop[@]}" --pair --times "$work/pair" >/dev/null
}
run_expctl() {
  "$expctl" --db "$work/expctl.db" -q run "$here/fashion-$model.yaml" --set "train.max_steps=$steps" \
    --format json >"$work/run.json" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["id"])' "$work/run.json" >"$work/run_id"
}
for model in $models; do
  lr="$(spec_lr "$model")"
  loop=(env GLIBC_TUNABLES="$tuned" "$bench_build/bare_loop" --model "$model" --steps "$steps" --lr "$lr")
  for r in $(seq 1 "$repeat"); do
    run_rotated "$r" run_free run_pair run_expctl
    analyse "$model" "#$r" "$work" "$(cat "$work/run_id")"
  done
done
