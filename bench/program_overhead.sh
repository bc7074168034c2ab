#!/usr/bin/env bash
# The overhead of running a team's own DDP script under `expctl run` (docs/program.md) against
# running the same script directly under PyTorch's launcher: wall clock of the whole command,
# interleaved pairs (the order alternates, so a machine that speeds up or slows down during the
# measurement favours neither), median of the per-pair ratios. Target: <= 1.02.
#
#   bench/program_overhead.sh [--pairs N] [--epochs E] [--monitor-interval S] [--expctl PATH]
#
# torchrun's agent looks at its workers every --monitor_interval seconds (5 by default), so it
# notices their end up to that late: --monitor-interval passes a shorter one, to compare against
# a torchrun that is not held back by it.
# The script is experiments/python-ddp/train.py with its spec's parameters, 2 ranks, Gloo on CPU.
# Debian 12's `torchrun` (torch 1.13 on Python 3.11) crashes in its log-redirection setup
# ("'NoneType' object has no attribute 'get'") unless given --redirects/--tee; the direct side
# runs `/usr/bin/python3 -m torch.distributed.run --redirects 1 --tee 1 --nproc_per_node 2`.
# Run it on an otherwise idle machine: nothing else compiling or training.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
source "$here/common.sh"

pairs=5
epochs=2
monitor=()
expctl="${EXPCTL:-}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pairs) pairs="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --expctl) expctl="$2"; shift 2 ;;
    --monitor-interval) monitor=(--monitor_interval "$2"); shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "program_overhead.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
(( pairs >= 5 )) || { echo "program_overhead.sh: --pairs must be at least 5" >&2; exit 2; }
find_expctl program_overhead.sh
python=/usr/bin/python3
"$python" -c 'import torch' 2>/dev/null ||
  { echo "program_overhead.sh: $python has no torch: apt-get install python3-torch" >&2; exit 2; }

spec="$root/experiments/python-ddp/ddp.yaml"
work="$(mktemp -d)"
on_exit 'rm -rf "$work"'
# The script's arguments exactly as the spec's placeholders give them (lr 0.05, batch 32, seed 7).
args=(--lr 0.05 --batch-size 32 --epochs "$epochs" --samples 2048 --seed 7 --kill-rank1-at-step 0
      --checkpoint-dir "$work/direct-checkpoints")

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { print a - b }'; }
run_expctl() {
  local start; start=$(now)
  "$expctl" --db "$work/expctl.db" -q run "$spec" --set "program.params.epochs=$epochs" >/dev/null 2>"$work/err" ||
    { cat "$work/err" >&2; exit 1; }
  since "$start"
}
run_direct() {
  local start; start=$(now)
  (cd "$root/experiments/python-ddp" &&
    OMP_NUM_THREADS=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 )) PYTHONHASHSEED=7 \
      "$python" -m torch.distributed.run --redirects 1 --tee 1 --nproc_per_node 2 ${monitor[@]+"${monitor[@]}"} \
      --log_dir "$work/torchrun-logs" train.py "${args[@]}" >/dev/null 2>"$work/err") ||
    { cat "$work/err" >&2; exit 1; }
  since "$start"
}

run_expctl >/dev/null  # warm-up: the page cache, and the program's stack probe (cached after once)
run_direct >/dev/null
echo "pair  expctl_s  torchrun_s  ratio"
ratios=()
for (( i = 1; i <= pairs; i++ )); do
  if (( i % 2 )); then e=$(run_expctl); t=$(run_direct); else t=$(run_direct); e=$(run_expctl); fi
  ratio=$(awk -v a="$e" -v b="$t" 'BEGIN { print a / b }')
  ratios+=("$ratio")
  printf "%4d  %8.2f  %10.2f  %6.3f\n" "$i" "$e" "$t" "$ratio"
done
printf "median ratio expctl run / torchrun: %.3fx over %d interleaved pairs (target <= 1.02)\n" \
  "$(echo "${ratios[*]}" | median)" "$pairs"
