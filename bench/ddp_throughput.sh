#!/usr/bin/env bash
# Throughput of expctl against PyTorch's own DDP and a bare LibTorch loop, on Fashion-MNIST with
# 2 ranks x 1 thread and batch 64 per rank, for the mlp and the cnn. A benchmark, not a test:
# it prints figures and ratios and asserts nothing.
#
#   bench/ddp_throughput.sh [--expctl PATH] [--models "mlp cnn"] [--steps N] [--repeat R] [--accuracy EPOCHS]
#
#   expctl 2 ranks   expctl run bench/fashion-<model>.yaml (summary.samples_per_sec)
#   torch DDP        bench/torch_ddp.py, Debian's python3-torch (the same LibTorch 1.13)
#   expctl 1 rank    the same spec with distributed.nproc_per_node=1: the reducer registers no
#                    hooks and no collective runs in a world of one, so this is the trainer loop
#   bare loop        bench/bare_loop.cpp, a standalone LibTorch program (built here, in
#                    build/bench, only when this script runs): nothing but the training step
#   1r | bare        expctl 1 rank and a bare loop started at the same time, one per core, over
#                    one rank's ratio: both run through the same noisy moment, so this ratio
#                    wobbles far less than "expctl 1r" over "bare loop" run one after the other
#   ceiling          two bare loops at the same time (each on batch 64): they share the cores,
#                    caches and memory bandwidth exactly as two ranks do but never communicate,
#                    so their summed samples/s is what 2 ranks on this machine can reach at best;
#                    "/ ceil" is expctl 2 ranks over it
#   sync pair        bare_loop --pair: the same two loops, but meeting at a barrier after every
#                    step and exchanging nothing: what 2 ranks of any synchronous data-parallel
#                    trainer reach with communication that costs nothing. Below the ceiling when
#                    one core runs slower than the other or either jitters (each step waits for
#                    the slower); "/ pair" is expctl 2 ranks over it: the cost of the runner and
#                    its all-reduce alone
# Throughput everywhere = median over the steps after warm-up (the first min(10, steps / 10)) of
# the sum over ranks of batch / step time. Also prints the time from `expctl run` to rank 0's
# first step, and with --accuracy E the test accuracy after E epochs (expctl and torch DDP).
# Each measurement is repeated R times (default 3), the programs interleaved so that a noisy
# moment hits all of them (the ceiling, expctl 2 ranks and the pair run back to back, in an order
# that rotates, shown after the row's number); a row per repetition, then the medians (ratios of
# medians), then the best of the R (ratios of the bests; the first step's shortest): noise on a
# shared machine only ever slows a run down, so the best is what each program can do and the
# median what a typical run gets. Read both: a ratio that holds in one and not the other was
# decided by which run a slow spell hit.
# Memory allocator: expctl's ranks raise glibc's mmap and trim thresholds
# (src/expctl/util/malloc_tuning.hpp), which alone makes the cnn 20-60 % faster. So the table
# shows PyTorch DDP twice, as shipped and with the same settings through GLIBC_TUNABLES
# ("torch tuned"), and the bare loop always runs with them: the 1-rank ratio is the runner's own
# overhead, not the allocator's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
source "$here/common.sh"
expctl="${EXPCTL:-}"
models="mlp cnn"
steps=300
repeat=3
epochs=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expctl) expctl="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --accuracy) epochs="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
    *) echo "ddp_throughput.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
check_models ddp_throughput.sh $models
find_expctl ddp_throughput.sh
python=/usr/bin/python3   # Debian's, with python3-torch; a pyenv python3 first in PATH has no torch
"$python" -c 'import torch' 2>/dev/null ||
  { echo "ddp_throughput.sh: $python has no torch, which the PyTorch DDP columns need: apt-get install python3-torch" >&2; exit 2; }

build_bare_loop

work="$(mktemp -d)"
on_exit 'rm -rf "$work"'
export OMP_NUM_THREADS=1

json_field() { "$python" -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$1"; }

expctl_run() {  # model, extra --set ...
  local model="$1"; shift
  "$expctl" --db "$work/expctl.db" -q run "$here/fashion-$model.yaml" --format json "$@" 2>"$work/err" ||
    { cat "$work/err" >&2; exit 1; }
}

best() { sorted_values | tail -n 1; }
shortest() { sorted_values | head -n 1; }
row() {  # label, e2, t2, tt2, e1, b1, ceiling, pair, first, side-by-side ratio
  awk -v m="$1" -v a="$2" -v b="$3" -v t="$4" -v c="$5" -v d="$6" -v g="$7" -v p="$8" -v f="$9" -v s="${10}" \
    'BEGIN { printf "%-12s %10.0f %10.0f %7.3fx %11.0f %7.3fx %10.0f %10.0f %7.3fx %9.3fx %9.0f %6.1f%% %9.0f %6.1f%% %10.2fs\n", m, a, b, a / b, t, a / t, c, d, c / d, s, g, 100 * a / g, p, 100 * a / p, f }'
}

# expctl 1 rank and a bare loop started together; prints expctl's samples/s over the loop's.
side_by_side() {  # model, lr
  expctl_run "$1" --set "train.max_steps=$steps" --set distributed.nproc_per_node=1 >"$work/side_e" &
  local first=$!
  GLIBC_TUNABLES="$tuned" "$bench_build/bare_loop" --model "$1" --steps "$steps" --lr "$2" >"$work/side_b"
  wait "$first"
  echo "$(json_field "['summary']['samples_per_sec']" <"$work/side_e") $(json_field "['samples_per_sec']" <"$work/side_b")" |
    awk '{ print $1 / $2 }'
}

# Two bare loops started together; prints their summed samples/s.
ceiling() {  # model, lr
  GLIBC_TUNABLES="$tuned" "$bench_build/bare_loop" --model "$1" --steps "$steps" --lr "$2" >"$work/ceil0" &
  local first=$!
  GLIBC_TUNABLES="$tuned" "$bench_build/bare_loop" --model "$1" --steps "$steps" --lr "$2" >"$work/ceil1"
  wait "$first"
  echo "$(json_field "['samples_per_sec']" <"$work/ceil0") $(json_field "['samples_per_sec']" <"$work/ceil1")" |
    awk '{ print $1 + $2 }'
}

# The three of a repetition whose order rotates; each sets its figure and appends its letter to
# $order. They read $model and $lr.
measure_ceiling() { ceil="$(ceiling "$model" "$lr")"; order+="c"; }
measure_expctl() { e2="$(expctl_run "$model" --set "train.max_steps=$steps")"; order+="e"; }
measure_pair() {
  pair="$(GLIBC_TUNABLES="$tuned" "$bench_build/bare_loop" --model "$model" --steps "$steps" --lr "$lr" --pair |
    json_field "['samples_per_sec']")"
  order+="p"
}

summary_row() {  # label, statistic of the rates, statistic of the first step; over the model's all_* lists
  row "$model $1" "$(echo "$all_e2" | $2)" "$(echo "$all_t2" | $2)" "$(echo "$all_tt2" | $2)" \
    "$(echo "$all_e1" | $2)" "$(echo "$all_b1" | $2)" "$(echo "$all_ceil" | $2)" \
    "$(echo "$all_pair" | $2)" "$(echo "$all_first" | $3)" "$(echo "$all_side" | $2)"
}

print_blas
printf '%-12s %10s %10s %8s %11s %8s %10s %10s %8s %10s %9s %7s %9s %7s %11s\n' model "expctl 2r" "torch 2r" ratio \
  "torch tuned" ratio "expctl 1r" "bare loop" ratio "1r | bare" ceiling "/ ceil" "sync pair" "/ pair" "first step"
for model in $models; do
  lr="$(spec_lr "$model")"
  all_e2=""; all_t2=""; all_tt2=""; all_e1=""; all_b1=""; all_ceil=""; all_pair=""; all_first=""; all_side=""
  for r in $(seq 1 "$repeat"); do
    # The ceiling, expctl 2 ranks and the pair, whose ratios are the table's point, rotate
    # (the row's letters: c, e, p in the order they ran).
    order=""
    run_rotated "$r" measure_ceiling measure_expctl measure_pair
    t2="$("$python" "$here/torch_ddp.py" --model "$model" --steps "$steps" --world 2 --lr "$lr")"
    tt2="$(GLIBC_TUNABLES="$tuned" "$python" "$here/torch_ddp.py" --model "$model" --steps "$steps" --world 2 --lr "$lr")"
    e1="$(expctl_run "$model" --set "train.max_steps=$steps" --set distributed.nproc_per_node=1)"
    b1="$(GLIBC_TUNABLES="$tuned" "$bench_build/bare_loop" --model "$model" --steps "$steps" --lr "$lr")"
    side="$(side_by_side "$model" "$lr")"
    e2s="$(echo "$e2" | json_field "['summary']['samples_per_sec']")"
    t2s="$(echo "$t2" | json_field "['samples_per_sec']")"
    tt2s="$(echo "$tt2" | json_field "['samples_per_sec']")"
    e1s="$(echo "$e1" | json_field "['summary']['samples_per_sec']")"
    b1s="$(echo "$b1" | json_field "['samples_per_sec']")"
    first="$(echo "$e2" | json_field "['summary']['time_to_first_step_s']")"
    row "$model #$r $order" "$e2s" "$t2s" "$tt2s" "$e1s" "$b1s" "$ceil" "$pair" "$first" "$side"
    all_e2+=" $e2s"; all_t2+=" $t2s"; all_tt2+=" $tt2s"; all_e1+=" $e1s"; all_b1+=" $b1s"; all_ceil+=" $ceil"
    all_pair+=" $pair"
    all_first+=" $first"; all_side+=" $side"
  done
  summary_row median median median
  summary_row best best shortest
done

if [[ "$epochs" -gt 0 ]]; then
  printf '\ntest accuracy after %s epoch(s)\n%-5s %10s %10s\n' "$epochs" model expctl "torch DDP"
  for model in $models; do
    lr="$(spec_lr "$model")"
    ea="$(expctl_run "$model" --set train.max_steps=0 --set "train.epochs=$epochs" | json_field "['summary']['eval_accuracy']")"
    ta="$("$python" "$here/torch_ddp.py" --model "$model" --epochs "$epochs" --world 2 --lr "$lr" | json_field "['accuracy']")"
    printf '%-5s %10.4f %10.4f\n' "$model" "$ea" "$ta"
  done
fi
