#!/usr/bin/env bash
# expctl against PyTorch DDP over a slow link between two "hosts": two network namespaces joined
# by a veth pair, each direction throttled to RATE by a tbf qdisc (default 100mbit), one rank per
# host, the mlp of bench/fashion-mlp.yaml (784-256-128-10) on Fashion-MNIST, batch 64 per rank,
# 1 thread per rank. A benchmark, not a test: it prints figures and asserts nothing.
#
#   sudo bench/two_host_link.sh [--expctl PATH] [--steps N] [--repeat R] [--rate RATE]
#                               [--powersgd-rank K] [--powersgd-warmup W] [--no-torch]
#
#   --steps N            optimizer steps per run (default 300); the test accuracy is taken after
#                        these N steps in every configuration (accumulation: N steps of 4 batches)
#   --repeat R           runs per program and configuration (default 3), expctl and torch
#                        interleaved per configuration, so a noisy moment hits both
#   --rate RATE          tc rate of each direction (default 100mbit)
#   --powersgd-rank K    PowerSGD's rank (default 1) ...
#   --powersgd-warmup W  ... and its plain warm-up steps (default 10), the same for both programs
#   --no-torch           expctl only (also chosen, with a warning, when Debian's python3-torch is
#                        missing)
#   --ranks-per-host N   expctl ranks per namespace (default 1); with 2 or more the all-reduce is
#                        hierarchical (shared memory in each namespace, the link between them),
#                        PyTorch is left out, and configuration fp32-gloo (flat Gloo ring over all
#                        ranks, distributed.allreduce=gloo) is there to compare with
#   --configs A,B        only these configurations (default: all)
#   --keep               leave the work folder (each run's stores, NAME.a.db and NAME.b.db, and its
#                        outputs) and print where, for `expctl --db ... show` of a run's phases
#
# Configurations: fp32 (plain all-reduce), fp16 (expctl distributed.grad_compression=fp16, torch
# fp16_compress_hook), accum4 (train.grad_accum_steps=4, torch no_sync on 3 of 4 micro-batches),
# fp16+accum4, powersgd (distributed.grad_compression=powersgd with powersgd_rank and
# powersgd_warmup_steps, torch powerSGD_hook with matrix_approximation_rank and
# start_powerSGD_iter). expctl runs as two nodes (`run --nnodes 2 --node-rank R --master-addr`),
# torch as bench/torch_ddp.py --rank R. Throughput = median over the steps after warm-up of the
# sum over ranks of samples / step time (summary.samples_per_sec; torch_ddp.py computes it alike).
# Prints a row per repetition (with "comm": the share of expctl rank 0's step time spent waiting
# for collectives, summary.comm_wait_fraction), then the medians. Needs root (ip netns, tc); every namespace and
# veth it made is removed on every exit path (normal end, error, Ctrl-C).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
source "$here/common.sh"
expctl="${EXPCTL:-}"
steps=300
repeat=3
rate=100mbit
psgd_rank=1
psgd_warmup=10
torch=1
per_host=1
only=""
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expctl) expctl="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --powersgd-rank) psgd_rank="$2"; shift 2 ;;
    --powersgd-warmup) psgd_warmup="$2"; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --ranks-per-host) per_host="$2"; shift 2 ;;
    --configs) only="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
    *) echo "two_host_link.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
find_expctl two_host_link.sh
[[ "$(id -u)" == 0 ]] || { echo "two_host_link.sh: needs root for ip netns and tc (run with sudo)" >&2; exit 2; }
python=/usr/bin/python3   # Debian's, with python3-torch; a pyenv python3 first in PATH has no torch
[[ "$per_host" == 1 ]] || torch=0  # torch_ddp.py runs one rank per host
if [[ "$torch" == 1 ]] && ! "$python" -c 'import torch' 2>/dev/null; then
  echo "two_host_link.sh: warning: $python has no torch (apt install python3-torch): expctl only" >&2
  torch=0
fi

tag="$$"
ns_a="exl-a-$tag"; ns_b="exl-b-$tag"
veth_a="exla$((tag % 100000))"; veth_b="exlb$((tag % 100000))"
addr_a=10.78.0.1; addr_b=10.78.0.2
work="$(mktemp -d)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  ip netns del "$ns_a" 2>/dev/null || true   # deleting a namespace deletes its end of the veth pair
  ip netns del "$ns_b" 2>/dev/null || true
  ip link del "$veth_a" 2>/dev/null || true  # in case the pair was made before it moved
  if [[ "$keep" == 1 ]]; then
    echo "two_host_link.sh: kept the stores and outputs in $work (e.g. $expctl --db $work/e-${configs[0]:-fp32}-1.a.db list)" >&2
  else
    rm -rf "$work"
  fi
}
on_exit cleanup

ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add "$veth_a" netns "$ns_a" type veth peer name "$veth_b" netns "$ns_b"
ip -n "$ns_a" addr add "$addr_a/24" dev "$veth_a"
ip -n "$ns_b" addr add "$addr_b/24" dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" up
ip -n "$ns_b" link set "$veth_b" up
# Egress of each end: A->B and B->A each get RATE.
ip netns exec "$ns_a" tc qdisc add dev "$veth_a" root tbf rate "$rate" burst 64kb latency 100ms
ip netns exec "$ns_b" tc qdisc add dev "$veth_b" root tbf rate "$rate" burst 64kb latency 100ms

export OMP_NUM_THREADS=1
port=$((20000 + tag % 20000))
next_port() { port=$((port + 1)); }

json_field() { "$python" -c "import json,sys; d=json.load(sys.stdin); v=eval('d' + sys.argv[1]); print('nan' if v is None else v)" "$1"; }

# Both ranks in the background (one per namespace), waited for in this shell (not in a command
# substitution, so that a signal interrupts the wait and the trap runs at once); rank 0's stdout
# is left in PREFIX.0.out.
two_ranks() {  # out-prefix, command for rank 0..., "--", command for rank 1...
  local prefix="$1"; shift
  local first=() second=()
  while [[ "$1" != "--" ]]; do first+=("$1"); shift; done
  shift; second=("$@")
  ip netns exec "$ns_a" "${first[@]}" >"$prefix.0.out" 2>"$prefix.0.err" & local p0=$!
  ip netns exec "$ns_b" "${second[@]}" >"$prefix.1.out" 2>"$prefix.1.err" & local p1=$!
  pids=("$p0" "$p1")
  local status=0
  wait "$p0" || status=1
  wait "$p1" || status=1
  pids=()
  if [[ "$status" != 0 ]]; then
    cat "$prefix.0.err" "$prefix.1.err" >&2
    echo "two_host_link.sh: a rank of $prefix failed" >&2
    exit 1
  fi
}

expctl_pair() {  # name, --set ... (each as "--set" "k=v")
  local name="$1"; shift
  next_port
  local common=(--set "distributed.nproc_per_node=$per_host" --set "train.max_steps=$steps" "$@" --nnodes 2
                --master-addr "$addr_a" --master-port "$port" --format json)
  two_ranks "$work/$name" \
    "$expctl" --db "$work/$name.a.db" -q run "$here/fashion-mlp.yaml" "${common[@]}" --node-rank 0 -- \
    "$expctl" --db "$work/$name.b.db" -q run "$here/fashion-mlp.yaml" "${common[@]}" --node-rank 1
}

torch_pair() {  # name, torch_ddp.py options ...
  local name="$1"; shift
  next_port
  local lr
  lr="$(spec_lr mlp)"
  local common=("$here/torch_ddp.py" --model mlp --world 2 --steps "$steps" --lr "$lr" --eval
                --master-addr "$addr_a" --master-port "$port" "$@")
  two_ranks "$work/$name" \
    env GLOO_SOCKET_IFNAME="$veth_a" "$python" "${common[@]}" --rank 0 -- \
    env GLOO_SOCKET_IFNAME="$veth_b" "$python" "${common[@]}" --rank 1
}

configs=(fp32 fp16 accum4 fp16+accum4 powersgd)
[[ "$per_host" == 1 ]] || configs=(fp32 fp32-gloo "${configs[@]:1}")
[[ -z "$only" ]] || IFS=, read -r -a configs <<<"$only"
expctl_sets() {
  case "$1" in
    fp32) ;;
    fp32-gloo) echo --set distributed.allreduce=gloo ;;
    fp16) echo --set distributed.grad_compression=fp16 ;;
    accum4) echo --set train.grad_accum_steps=4 ;;
    fp16+accum4) echo --set distributed.grad_compression=fp16 --set train.grad_accum_steps=4 ;;
    powersgd) echo --set distributed.grad_compression=powersgd --set "distributed.powersgd_rank=$psgd_rank" \
                   --set "distributed.powersgd_warmup_steps=$psgd_warmup" ;;
  esac
}
torch_options() {
  case "$1" in
    fp32) ;;
    fp16) echo --fp16 ;;
    accum4) echo --accum 4 ;;
    fp16+accum4) echo --fp16 --accum 4 ;;
    powersgd) echo --powersgd-rank "$psgd_rank" --powersgd-warmup "$psgd_warmup" ;;
  esac
}

row() {  # label, expctl samples/s, torch samples/s, expctl accuracy, torch accuracy, expctl comm share
  awk -v l="$1" -v e="$2" -v t="$3" -v ea="$4" -v ta="$5" -v c="$6" 'BEGIN {
    ratio = (t == "nan" || t == 0) ? "-" : sprintf("%.3fx", e / t)
    printf "%-16s %12.0f %12s %8s %9s %9s %7s\n", l, e, (t == "nan") ? "-" : sprintf("%.0f", t), ratio,
           sprintf("%.4f", ea), (ta == "nan") ? "-" : sprintf("%.4f", ta), (c == "") ? "-" : sprintf("%.0f%%", 100 * c) }'
}

print_blas
echo "two hosts (namespaces), $rate each way, $per_host rank(s) each, mlp on Fashion-MNIST, $steps steps, batch 64 per rank"
printf '%-16s %12s %12s %8s %9s %9s %7s\n' configuration "expctl sps" "torch sps" ratio "expctl acc" "torch acc" "comm"
declare -A all_e all_t all_ea all_ta all_c
for config in "${configs[@]}"; do
  for r in $(seq 1 "$repeat"); do
    # shellcheck disable=SC2046  # the options are words
    expctl_pair "e-$config-$r" $(expctl_sets "$config")
    e_sps="$(json_field "['summary']['samples_per_sec']" <"$work/e-$config-$r.0.out")"
    e_acc="$(json_field "['summary']['eval_accuracy']" <"$work/e-$config-$r.0.out")"
    e_comm="$(json_field "['summary']['comm_wait_fraction']" <"$work/e-$config-$r.0.out")"
    t_sps=nan; t_acc=nan
    if [[ "$torch" == 1 ]]; then
      # shellcheck disable=SC2046
      torch_pair "t-$config-$r" $(torch_options "$config")
      t_sps="$(json_field "['samples_per_sec']" <"$work/t-$config-$r.0.out")"
      t_acc="$(json_field "['accuracy']" <"$work/t-$config-$r.0.out")"
    fi
    row "$config #$r" "$e_sps" "$t_sps" "$e_acc" "$t_acc" "$e_comm"
    all_e[$config]+=" $e_sps"; all_t[$config]+=" $t_sps"; all_ea[$config]+=" $e_acc"; all_ta[$config]+=" $t_acc"
    all_c[$config]+=" $e_comm"
  done
done
echo "medians over $repeat runs:"
for config in "${configs[@]}"; do
  t_med=nan; ta_med=nan
  if [[ "$torch" == 1 ]]; then
    t_med="$(median <<<"${all_t[$config]}")"; ta_med="$(median <<<"${all_ta[$config]}")"
  fi
  row "$config" "$(median <<<"${all_e[$config]}")" "$t_med" "$(median <<<"${all_ea[$config]}")" "$ta_med" \
      "$(median <<<"${all_c[$config]}")"
done
