#!/usr/bin/env bash
# Your own model and data (docs/models.md), measured. A benchmark, not a test: it prints figures
# and ratios and asserts nothing.
#
#   bench/byo_models.sh [--expctl PATH] [--repeat R] [--only "torch builtin memory"] [--torch-tuned]
#
#   torch     (--torch-tuned: PyTorch with expctl's malloc settings, GLIBC_TUNABLES; without it PyTorch
#             runs as shipped, and glibc's moving mmap threshold alone makes its steps up to 2.6x
#             slower on these models: read both)
#             a scripted model trained by expctl (2 ranks x 1 thread, batch 32 per rank, .npy
#             arrays) against PyTorch's own DDP running the same .pt on the same arrays from
#             Python (tests/tools/torch_ddp_reference.py, Debian's python3-torch): resnet18 on
#             32x32 RGB (a short run) and expctl's built-in cnn written in PyTorch and scripted,
#             on Fashion-MNIST. Target: expctl >= 1.0x.
#   builtin   the built-in cnn against its TorchScript twin, both inside expctl on the same
#             arrays. Target: the TorchScript path costs <= 5 %.
#   memory    a rank's anonymous (private, not file-backed) memory at its peak, training a small
#             mlp on a 1 GiB .npy array against a 10 MiB one (evaluation reads every row). Target:
#             the difference is below 10 % of the array: the array is mapped and shared, not copied.
#
# The statistic, the same on both sides: rank 0's mean step time over the steps after warm-up
# (the first 10: TorchScript's profiling executor optimises after its first runs), turned into
# samples/s as 2 ranks x batch / mean step time. expctl's step times are read from its store,
# PyTorch's are timed around each step in the same place (zero_grad .. optimizer.step). Each
# pair runs back to back, in an order that alternates from one repetition to the next; a row per
# repetition, then the mean and the range of the ratios.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
source "$here/common.sh"
expctl="${EXPCTL:-}"
repeat=5
only="torch builtin memory"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expctl) expctl="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --torch-tuned) torch_tunables="$tuned"; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
    *) echo "byo_models.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
find_expctl byo_models.sh
py=/usr/bin/python3
fixtures="$root/build/bench-byo"
if [[ ! -f "$fixtures/complete" ]]; then
  echo "making the fixtures in $fixtures (once) ..." >&2
  "$py" "$root/tests/tools/byo_fixtures.py" "$fixtures" 2>/dev/null
  "$py" "$root/tests/tools/byo_fixtures.py" --bench "$fixtures"
  touch "$fixtures/complete"
fi
work="$(mktemp -d)"
on_exit "rm -rf '$work'"
export OMP_NUM_THREADS=1
db="$work/expctl.db"

# spec NAME MODEL_LINE DATA STEPS BATCH: a spec file on the fixture arrays DATA (fmnist, rgb32, mem-small...)
spec() {
  local name="$1" model="$2" data="$3" steps="$4" batch="$5" x y ex ey
  case "$data" in
    mem-*) x="$fixtures/$data-x.npy"; y="$fixtures/$data-y.npy"; ex="$x"; ey="$y" ;;
    *) x="$fixtures/$data-train-x.npy"; y="$fixtures/$data-train-y.npy"; ex="$fixtures/$data-eval-x.npy"; ey="$fixtures/$data-eval-y.npy" ;;
  esac
  cat > "$work/$name.yaml" <<YAML
name: $name
seed: 1
distributed: {nproc_per_node: 2, backend: gloo, timeout_s: 600}
data: {dataset: npy, batch_size: $batch, train_inputs: $x, train_targets: $y, eval_inputs: $ex, eval_targets: $ey}
model: $model
optim: {name: sgd, lr: 0.01, momentum: 0.9}
train: {max_steps: $steps, eval_every: 0}
metrics: {log_every: 1000}
YAML
  echo "$work/$name.yaml"
}

# mean of rank 0's step times (s) after the first 10 steps, of the newest run in the store
expctl_mean_step() {
  rank0_series "$work/last.json" step_time_ms |
    "$py" -c 'import json,sys; v=[s[1] / 1000.0 for s in json.load(sys.stdin) if s[0] > 10]; print(sum(v) / len(v))'
}
run_expctl() { "$expctl" --db "$db" run "$1" --format json > "$work/last.json" 2> "$work/last.err" || { cat "$work/last.err" >&2; exit 1; }; expctl_mean_step; }
run_torch() {  # MODEL DATA STEPS BATCH
  GLIBC_TUNABLES="${torch_tunables:-${GLIBC_TUNABLES:-}}" "$py" "$root/tests/tools/torch_ddp_reference.py" --timing --model "$fixtures/$1" --inputs "$fixtures/$2-train-x.npy" \
    --targets "$fixtures/$2-train-y.npy" --world 2 --batch "$4" --steps "$3" --seed 1 --lr 0.01 --momentum 0.9 \
    --store "$work/torch-store" | "$py" -c "import json,sys; t=json.load(sys.stdin)[0][10:]; print(sum(t)/len(t))"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
sps() { awk -v t="$1" -v b="$2" 'BEGIN { printf "%.1f", 2 * b / t }'; }
summary() { tr ' ' '\n' | awk 'NF { s += $1; n++; if (min == "" || $1 < min) min = $1; if ($1 > max) max = $1 } END { printf "mean %.3f (%.3f .. %.3f, n=%d)", s / n, min, max, n }'; }

print_blas
echo "machine: $(nproc --all) cores; $(date -u +%FT%TZ)"

pair_rows() {  # LABEL FIRST_FN SECOND_FN BATCH: rows "rep  a samples/s  b samples/s  a/b"
  local label="$1" a="$2" b="$3" batch="$4" r ta tb ratios=""
  echo "== $label"
  for ((r = 1; r <= repeat; r++)); do
    if (( r % 2 )); then ta=$($a); tb=$($b); else tb=$($b); ta=$($a); fi
    local q; q=$(ratio "$tb" "$ta")  # a's samples/s over b's = b's step time over a's
    ratios="$ratios $q"
    printf "  rep %d  %-9s %8s samples/s  %-9s %8s samples/s  ratio %s\n" "$r" "${a#*_}" "$(sps "$ta" "$batch")" \
      "${b#*_}" "$(sps "$tb" "$batch")" "$q"
  done
  echo "  ratio ${a#*_} / ${b#*_}: $(echo "$ratios" | summary)"
}

if [[ " $only " == *" torch "* ]]; then
  resnet_spec=$(spec resnet "{arch: torchscript, file: $fixtures/resnet18.pt}" rgb32 25 32)
  cnn_ts_spec=$(spec cnnts "{arch: torchscript, file: $fixtures/cnn_builtin.pt}" fmnist 150 32)
  e_resnet() { run_expctl "$resnet_spec"; }
  t_resnet() { run_torch resnet18.pt rgb32 25 32; }
  e_cnn() { run_expctl "$cnn_ts_spec"; }
  t_cnn() { run_torch cnn_builtin.pt fmnist 150 32; }
  pair_rows "resnet18 (scripted), 2 ranks x 1 thread, batch 32, 32x32 RGB: expctl vs PyTorch DDP" e_resnet t_resnet 32
  pair_rows "cnn (scripted), 2 ranks x 1 thread, batch 32, Fashion-MNIST: expctl vs PyTorch DDP" e_cnn t_cnn 32
fi
if [[ " $only " == *" builtin "* ]]; then
  builtin_spec=$(spec builtin "{arch: cnn, channels: [32, 64]}" fmnist 150 32)
  script_spec=$(spec script "{arch: torchscript, file: $fixtures/cnn_builtin.pt}" fmnist 150 32)
  e_builtin() { run_expctl "$builtin_spec"; }
  e_torchscript() { run_expctl "$script_spec"; }
  pair_rows "cnn built in vs its TorchScript twin, both in expctl (2 ranks, batch 32)" e_torchscript e_builtin 32
fi
if [[ " $only " == *" memory "* ]]; then
  echo "== memory: a rank's peak anonymous memory (RssAnon), small mlp, 20 steps and a full evaluation"
  peak_anon() {  # SPEC: the largest RssAnon (kB) any rank of the run reached
    "$expctl" --db "$db" run "$1" --format json > "$work/mem.json" 2> "$work/mem.err" &
    local pid=$! peak=0 child value
    while kill -0 "$pid" 2>/dev/null; do
      for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
        value=$(awk '/^RssAnon:/ { print $2 }' /proc/"$child"/status 2>/dev/null || echo 0)
        (( ${value:-0} > peak )) && peak=${value:-0}
      done
      sleep 0.05
    done
    wait "$pid" || { cat "$work/mem.err" >&2; exit 1; }
    echo "$peak"
  }
  for r in $(seq 1 "$repeat"); do
    small=$(peak_anon "$(spec memsmall "{arch: mlp, hidden_sizes: [8]}" mem-small 20 32)")
    large=$(peak_anon "$(spec memlarge "{arch: mlp, hidden_sizes: [8]}" mem-large 20 32)")
    array_kb=$(( $(stat -c %s "$fixtures/mem-large-x.npy") / 1024 ))
    printf "  rep %d  10 MiB array: %d kB   1 GiB array: %d kB   difference %d kB = %.2f %% of the array\n" \
      "$r" "$small" "$large" $(( large - small )) "$(awk -v d=$(( large - small )) -v a="$array_kb" 'BEGIN { print 100 * d / a }')"
  done
fi
